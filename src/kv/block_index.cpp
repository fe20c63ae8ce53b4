#include "kv/block_index.h"

#include "core/error.h"

namespace aerie {

BlockIndex::BlockIndex(int32_t max_entries) : max_entries_(max_entries) {
  size_t n = 16;
  while (n < 2 * size_t(max_entries)) n *= 2;
  slots_.resize(n);
  mask_ = n - 1;
}

int32_t BlockIndex::find(uint64_t hash) const {
  for (size_t i = home(hash);; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.block < 0) return -1;
    if (s.hash == hash) return s.block;
  }
}

bool BlockIndex::insert(uint64_t hash, int32_t block) {
  AERIE_CHECK(size_ < max_entries_, "block index: more entries than blocks");
  size_t i = home(hash);
  for (; slots_[i].block >= 0; i = (i + 1) & mask_)
    if (slots_[i].hash == hash) return false;
  slots_[i] = Slot{hash, block};
  ++size_;
  return true;
}

void BlockIndex::erase(uint64_t hash, int32_t block) {
  size_t i = home(hash);
  for (;; i = (i + 1) & mask_) {
    if (slots_[i].block < 0) return;
    if (slots_[i].hash == hash) break;
  }
  if (slots_[i].block != block) return;
  // Backward shift: move later entries of the probe run into the hole when their home allows it, so
  // lookups never need tombstones.
  size_t hole = i;
  for (size_t j = (i + 1) & mask_; slots_[j].block >= 0; j = (j + 1) & mask_) {
    const size_t h = home(slots_[j].hash);
    // j may move to `hole` when its home is not in the cyclic interval (hole, j].
    const bool home_in_between = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
    if (!home_in_between) {
      slots_[hole] = slots_[j];
      hole = j;
    }
  }
  slots_[hole] = Slot{};
  --size_;
}

}  // namespace aerie
