#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <climits>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace aerie {
namespace {

using Json = nlohmann::json;

// Words up to this many symbols use the quadratic scan for the best pair, which beats a heap on the
// short words of natural text; longer ones (runs of spaces or of CJK) use the heap.
constexpr size_t kHeapThreshold = 48;
// Pieces up to this many bytes are cached; the cache is dropped when its id pool passes kCacheIds.
constexpr size_t kCachePieceBytes = 64;
constexpr size_t kCacheIds = 1 << 20;

std::pair<std::string, std::string> parse_merge(const Json& merge, size_t index) {
  if (merge.is_string()) {
    // "left right": tokens never contain a space, so exactly one separates them.
    const auto& text = merge.get_ref<const std::string&>();
    const size_t space = text.find(' ');
    AERIE_CHECK(space != std::string::npos && text.find(' ', space + 1) == std::string::npos,
                "tokenizer.json: model.merges[", index, "] \"", text, "\" is not two tokens separated by one space");
    return {text.substr(0, space), text.substr(space + 1)};
  }
  AERIE_CHECK(merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string(),
              "tokenizer.json: model.merges[", index, "] must be \"a b\" or [\"a\", \"b\"]");
  return {merge[0].get<std::string>(), merge[1].get<std::string>()};
}

}  // namespace

int32_t checked_token_id(const Json& id, int64_t id_bound, const std::string& where) {
  AERIE_CHECK(id.is_number_integer(), "tokenizer.json: ", where, " has a non-integer id");
  // An unsigned id beyond INT64_MAX would wrap negative in get<int64_t>.
  const int64_t value = id.is_number_unsigned() && id.get<uint64_t>() > uint64_t{INT64_MAX} ? INT64_MAX : id.get<int64_t>();
  AERIE_CHECK(value >= 0, "tokenizer.json: ", where, " has a negative id ", value);
  AERIE_CHECK(value < id_bound, "tokenizer.json: ", where, " has id ", value, ", implausible for this file (ids must be below ",
              id_bound, ", from its number of tokens and the limit max_vocab_size)");
  return static_cast<int32_t>(value);
}

void MergeTable::reserve(size_t n_merges) {
  size_t capacity = 16;
  while (capacity < n_merges * 2) capacity *= 2;
  slots_.assign(capacity, Entry{kEmpty, 0, 0});
  mask_ = capacity - 1;
  size_ = 0;
}

void MergeTable::insert(int32_t left, int32_t right, int32_t rank, int32_t new_id) {
  if (size_ * 2 + 2 > slots_.size()) {
    std::vector<Entry> old = std::move(slots_);
    reserve(std::max<size_t>(16, old.size()));
    for (const Entry& e : old) {
      if (e.key != kEmpty) insert(static_cast<int32_t>(e.key >> 32), static_cast<int32_t>(e.key), e.rank, e.new_id);
    }
  }
  const uint64_t key = make_key(left, right);
  for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
    Entry& e = slots_[i];
    if (e.key == key || e.key == kEmpty) {
      if (e.key == kEmpty) ++size_;
      e = Entry{key, rank, new_id};
      return;
    }
  }
}

BpeModel BpeModel::from_json(const Json& model, bool byte_level, int64_t id_bound) {
  AERIE_CHECK(model.is_object(), "tokenizer.json: 'model' must be an object");
  const std::string type = model.contains("type") && model.at("type").is_string() ? model.at("type").get<std::string>()
                                                                                    : std::string("BPE");
  AERIE_CHECK(type == "BPE", "tokenizer.json: unsupported model type '", type, "' (only BPE is supported)");
  AERIE_CHECK(model.contains("vocab") && model.at("vocab").is_object(), "tokenizer.json: BPE model lacks a 'vocab' object");
  AERIE_CHECK(model.contains("merges") && model.at("merges").is_array(), "tokenizer.json: BPE model lacks a 'merges' array");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    AERIE_CHECK(!model.contains(key) || model.at(key).is_null() || model.at(key) == "",
                "tokenizer.json: BPE option '", key, "' is not supported");
  }
  AERIE_CHECK(!model.contains("dropout") || model.at("dropout").is_null() || model.at("dropout") == 0.0,
              "tokenizer.json: BPE dropout is not supported (inference encodes deterministically)");

  BpeModel m;
  m.byte_level_ = byte_level;
  auto flag = [&](const char* key) { return model.contains(key) && model.at(key).is_boolean() && model.at(key).get<bool>(); };
  m.ignore_merges_ = flag("ignore_merges");
  m.byte_fallback_ = flag("byte_fallback");
  m.fuse_unk_ = flag("fuse_unk");

  const Json& vocab = model.at("vocab");
  m.vocab_.reserve(vocab.size());
  std::vector<bool> taken;
  for (const auto& [token, id_json] : vocab.items()) {
    const int32_t id = checked_token_id(id_json, id_bound, "model.vocab \"" + token + "\"");
    if (static_cast<size_t>(id) >= m.id_to_token_.size()) {
      m.id_to_token_.resize(static_cast<size_t>(id) + 1);
      taken.resize(static_cast<size_t>(id) + 1);
    }
    AERIE_CHECK(!taken[static_cast<size_t>(id)], "tokenizer.json: model.vocab \"", token, "\" and \"",
                m.id_to_token_[static_cast<size_t>(id)], "\" share id ", id);
    taken[static_cast<size_t>(id)] = true;
    m.vocab_.emplace(token, id);
    m.id_to_token_[static_cast<size_t>(id)] = token;
  }
  if (byte_level) {
    m.piece_vocab_.reserve(vocab.size());
    for (const auto& [token, id] : m.vocab_) {
      // Tokens outside the byte alphabet (added tokens kept in the vocab) can never come out of a piece.
      if (auto bytes = byte_level_decode(token)) m.piece_vocab_.emplace(std::move(*bytes), id);
    }
    for (int b = 0; b < 256; ++b) {
      const auto it = m.vocab_.find(byte_level_char(static_cast<uint8_t>(b)));
      m.byte_ids_[static_cast<size_t>(b)] = it == m.vocab_.end() ? -1 : it->second;
    }
  }
  if (model.contains("unk_token") && model.at("unk_token").is_string()) {
    const auto unk = model.at("unk_token").get<std::string>();
    const auto it = m.vocab_.find(unk);
    AERIE_CHECK(it != m.vocab_.end(), "tokenizer.json: unk_token \"", unk, "\" is not in the vocab");
    m.unk_id_ = it->second;
  }

  const Json& merges = model.at("merges");
  m.merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto [left, right] = parse_merge(merges[i], i);
    const auto l = m.vocab_.find(left), r = m.vocab_.find(right), merged = m.vocab_.find(left + right);
    AERIE_CHECK(l != m.vocab_.end() && r != m.vocab_.end(), "tokenizer.json: model.merges[", i, "] (\"", left,
                "\", \"", right, "\") uses a token that is not in model.vocab");
    AERIE_CHECK(merged != m.vocab_.end(), "tokenizer.json: model.merges[", i, "] yields \"", left + right,
                "\", which is not in model.vocab");
    m.merges_.insert(l->second, r->second, static_cast<int32_t>(i), merged->second);
  }
  return m;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::initial_symbols(std::string_view piece, std::vector<int32_t>& ids) const {
  ids.clear();
  if (byte_level_) {
    for (const char c : piece) {
      const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
      if (id >= 0) ids.push_back(id);
      else if (unk_id_ && !(fuse_unk_ && !ids.empty() && ids.back() == *unk_id_)) ids.push_back(*unk_id_);
    }
    return;
  }
  // One symbol per character; unknown ones become <0xXX> byte tokens, or unk, or are dropped.
  bool last_was_unk = false;
  for (size_t i = 0; i < piece.size();) {
    const size_t n = std::min(utf8_sequence_length(static_cast<uint8_t>(piece[i])), piece.size() - i);
    const std::string_view ch = piece.substr(i, n);
    i += n;
    if (const auto it = vocab_.find(ch); it != vocab_.end()) {
      ids.push_back(it->second);
      last_was_unk = false;
      continue;
    }
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      for (const char c : ch) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", static_cast<unsigned>(static_cast<uint8_t>(c)));
        if (const auto it = vocab_.find(std::string_view(name)); it != vocab_.end()) bytes.push_back(it->second);
      }
      if (bytes.size() == ch.size()) {
        ids.insert(ids.end(), bytes.begin(), bytes.end());
        last_was_unk = false;
        continue;
      }
    }
    if (unk_id_ && !(fuse_unk_ && last_was_unk)) ids.push_back(*unk_id_);
    last_was_unk = unk_id_.has_value();
  }
}

void BpeModel::merge_linear(Scratch& s) const {
  const auto n = static_cast<int32_t>(s.ids.size());
  s.next.resize(static_cast<size_t>(n));
  s.rank.resize(static_cast<size_t>(n));
  s.new_id.resize(static_cast<size_t>(n));
  auto update = [&](int32_t i) {
    const MergeTable::Entry* e = s.next[i] < 0 ? nullptr : merges_.find(s.ids[i], s.ids[s.next[i]]);
    s.rank[i] = e ? e->rank : INT32_MAX;
    s.new_id[i] = e ? e->new_id : -1;
  };
  for (int32_t i = 0; i < n; ++i) s.next[i] = i + 1 < n ? i + 1 : -1;
  for (int32_t i = 0; i < n; ++i) update(i);
  for (;;) {
    // The lowest-ranked pair, leftmost among equals.
    int32_t best = -1, best_rank = INT32_MAX, before_best = -1;
    for (int32_t i = 0, before = -1; i >= 0; before = i, i = s.next[i]) {
      if (s.rank[i] < best_rank) best = i, best_rank = s.rank[i], before_best = before;
    }
    if (best < 0) break;
    s.ids[best] = s.new_id[best];
    s.next[best] = s.next[s.next[best]];
    update(best);
    if (before_best >= 0) update(before_best);
  }
  // Compact the surviving symbols in order.
  int32_t w = 0;
  for (int32_t i = 0; i >= 0; i = s.next[i]) s.ids[w++] = s.ids[i];
  s.ids.resize(static_cast<size_t>(w));
}

void BpeModel::merge_heap(Scratch& s) const {
  const auto n = static_cast<int32_t>(s.ids.size());
  s.prev.resize(static_cast<size_t>(n));
  s.next.resize(static_cast<size_t>(n));
  s.rank.assign(static_cast<size_t>(n), 1);  // reused as "alive"
  for (int32_t i = 0; i < n; ++i) {
    s.prev[i] = i - 1;
    s.next[i] = i + 1 < n ? i + 1 : -1;
  }
  // Min-heap on (rank, pos): the same order the linear scan picks.
  auto later = [](const Scratch::HeapItem& a, const Scratch::HeapItem& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  s.heap.clear();
  auto push = [&](int32_t pos) {
    if (pos < 0 || s.next[pos] < 0) return;
    if (const auto* e = merges_.find(s.ids[pos], s.ids[s.next[pos]])) {
      s.heap.push_back({e->rank, pos, e->new_id});
      std::push_heap(s.heap.begin(), s.heap.end(), later);
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), later);
    const Scratch::HeapItem top = s.heap.back();
    s.heap.pop_back();
    // Skip stale entries: the left symbol was absorbed, or its pair changed since the push. (A changed
    // pair always spells a longer string, so an equal new_id means the pair is unchanged.)
    if (!s.rank[top.pos] || s.next[top.pos] < 0) continue;
    const int32_t right = s.next[top.pos];
    const auto* e = merges_.find(s.ids[top.pos], s.ids[right]);
    if (!e || e->new_id != top.new_id) continue;
    s.ids[top.pos] = top.new_id;
    s.rank[right] = 0;
    s.next[top.pos] = s.next[right];
    if (s.next[right] >= 0) s.prev[s.next[right]] = top.pos;
    push(s.prev[top.pos]);
    push(top.pos);
  }
  int32_t w = 0;
  for (int32_t i = 0; i >= 0; i = s.next[i]) s.ids[w++] = s.ids[i];
  s.ids.resize(static_cast<size_t>(w));
}

void BpeModel::encode_piece(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const {
  const StringIdMap& whole = byte_level_ ? piece_vocab_ : vocab_;
  if (ignore_merges_) {
    if (const auto it = whole.find(piece); it != whole.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = piece.size() <= kCachePieceBytes;
  if (cacheable) {
    if (const auto it = s.cache.find(piece); it != s.cache.end()) {
      const auto [offset, count] = it->second;
      out.insert(out.end(), s.cache_ids.begin() + offset, s.cache_ids.begin() + offset + count);
      return;
    }
  }
  initial_symbols(piece, s.ids);
  if (s.ids.size() > 1) {
    if (s.ids.size() <= kHeapThreshold) merge_linear(s);
    else merge_heap(s);
  }
  out.insert(out.end(), s.ids.begin(), s.ids.end());
  if (cacheable) {
    if (s.cache_ids.size() + s.ids.size() > kCacheIds) {
      s.cache.clear();
      s.cache_ids.clear();
    }
    s.cache.emplace(std::string(piece), std::pair<uint32_t, uint32_t>(static_cast<uint32_t>(s.cache_ids.size()),
                                                                       static_cast<uint32_t>(s.ids.size())));
    s.cache_ids.insert(s.cache_ids.end(), s.ids.begin(), s.ids.end());
  }
}

}  // namespace aerie
