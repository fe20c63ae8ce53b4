// BlockIndex: chain hash -> block id for the prefix cache, in a table sized once for the pool (open
// addressing, linear probing, backward-shift deletion), so registering and forgetting blocks never
// touches the heap on the step path. At most one entry per block, so the table stays under half full.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace aerie {

class BlockIndex {
 public:
  explicit BlockIndex(int32_t max_entries);

  // The block registered under `hash`, or -1.
  int32_t find(uint64_t hash) const;
  // Adds hash -> block; false (nothing changed) when the hash is present already.
  bool insert(uint64_t hash, int32_t block);
  // Removes the entry of `hash` if it maps to `block`.
  void erase(uint64_t hash, int32_t block);
  int32_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    int32_t block = -1;  // -1: empty
  };
  size_t home(uint64_t hash) const { return size_t(hash) & mask_; }

  std::vector<Slot> slots_;  // power-of-two size >= 2 * max_entries
  size_t mask_ = 0;
  int32_t size_ = 0, max_entries_ = 0;
};

}  // namespace aerie
