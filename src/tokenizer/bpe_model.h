// The BPE model of tokenizer.json: vocabulary, ranked merges, ignore_merges, byte_fallback and unk.
// In byte-level mode (a ByteLevel pre-tokenizer) the vocabulary is re-keyed by the raw bytes each token
// stands for, so pieces of input text are encoded without first spelling them in the byte alphabet.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace aerie {

// A token id as tokenizer.json writes it, checked before it sizes anything: an integer in [0, id_bound).
// `where` names the field in errors ("model.vocab \"a\"", "added_tokens[3]").
int32_t checked_token_id(const nlohmann::json& id, int64_t id_bound, const std::string& where);

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Merge rules keyed by the pair of token ids: open addressing, since lookups dominate the merge loop.
class MergeTable {
 public:
  struct Entry {
    uint64_t key;  // (left id << 32) | right id; kEmpty where the slot is free
    int32_t rank;
    int32_t new_id;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  void reserve(size_t n_merges);
  // A later rule for the same pair replaces the earlier one (as tokenizers' HashMap collect does).
  void insert(int32_t left, int32_t right, int32_t rank, int32_t new_id);
  const Entry* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = make_key(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static uint64_t make_key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  size_t slot_of(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & mask_; }

  std::vector<Entry> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

class BpeModel {
 public:
  // Reusable per-thread state of the merge loop and the cache from piece bytes to ids.
  struct Scratch {
    std::vector<int32_t> ids, prev, next, rank, new_id;
    struct HeapItem {
      int32_t rank, pos, new_id;
    };
    std::vector<HeapItem> heap;
    std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, StringHash, std::equal_to<>> cache;
    std::vector<int32_t> cache_ids;  // cache values: [offset, offset + count) of this pool
  };

  // Builds from the "model" object of tokenizer.json; `byte_level` says whether a ByteLevel pre-tokenizer
  // feeds it. Throws aerie::Error for other model types, unsupported options, malformed merges, and ids
  // that are negative, shared or not below `id_bound` (the id-indexed tables are sized by the largest id).
  static BpeModel from_json(const nlohmann::json& model, bool byte_level, int64_t id_bound);

  // Appends the ids of one pre-token (raw bytes in byte-level mode, UTF-8 text otherwise).
  void encode_piece(std::string_view piece, Scratch& scratch, std::vector<int32_t>& out) const;

  // Largest id in the vocabulary plus one.
  int32_t n_vocab() const { return static_cast<int32_t>(id_to_token_.size()); }
  // The token as tokenizer.json spells it ("" for an id the vocabulary does not use).
  const std::string& id_to_token(int32_t id) const { return id_to_token_[static_cast<size_t>(id)]; }
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool byte_level() const { return byte_level_; }

 private:
  void initial_symbols(std::string_view piece, std::vector<int32_t>& ids) const;
  void merge_linear(Scratch& s) const;
  void merge_heap(Scratch& s) const;

  StringIdMap vocab_;        // as spelled in tokenizer.json
  StringIdMap piece_vocab_;  // keyed by raw bytes in byte-level mode; empty otherwise (vocab_ serves)
  std::vector<std::string> id_to_token_;
  MergeTable merges_;
  std::array<int32_t, 256> byte_ids_{};  // byte-level mode: id of each single byte, -1 if missing
  std::optional<int32_t> unk_id_;
  bool byte_level_ = false;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
};

}  // namespace aerie
