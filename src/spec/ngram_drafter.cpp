#include "spec/ngram_drafter.h"

#include <algorithm>
#include <bit>

#include "core/error.h"
#include "core/mix64.h"

namespace aerie {
namespace {

constexpr uint64_t kSeed = 0x243F6A8885A308D3ull;  // hash of the empty gram

// The hash of a gram extended one token to the LEFT: grams are hashed from their last token backwards,
// so the hashes of the grams of length 1, 2, ... ending at one position come from one pass.
uint64_t extend(uint64_t h, int64_t token) { return mix64(h ^ (uint64_t(token) + 0x9E3779B97F4A7C15ull)); }

// Slots for `entries` grams at a load of at most 1/2.
size_t slots_for(int64_t entries) { return std::bit_ceil(size_t(std::max<int64_t>(8, 2 * entries))); }

}  // namespace

void validate(const NgramOptions& options) {
  AERIE_CHECK(options.min_n >= 1, "--draft ngram: the shortest n-gram matched (--ngram-min) must be at least 1, got ",
              options.min_n);
  AERIE_CHECK(options.max_n >= options.min_n, "--draft ngram: the shortest n-gram matched (--ngram-min ",
              options.min_n, ") exceeds the longest (--ngram-max ", options.max_n, ")");
  AERIE_CHECK(options.max_n <= NgramOptions::kMaxN, "--draft ngram: the longest n-gram matched (--ngram-max) must be at most ",
              NgramOptions::kMaxN, ", got ", options.max_n);
}

NgramIndex::NgramIndex(const NgramOptions& options, int64_t capacity) : options_(options) {
  const size_t slots = slots_for((options.max_n - options.min_n + 1) * std::max<int64_t>(capacity, 1));
  keys_.assign(slots, 0);
  ends_.assign(slots, -1);
}

void NgramIndex::insert(uint64_t key, int32_t end) {
  const size_t mask = keys_.size() - 1;
  for (size_t s = size_t(key) & mask;; s = (s + 1) & mask) {
    if (ends_[s] < 0) {
      keys_[s] = key;
      ends_[s] = end;
      ++n_entries_;
      return;
    }
    if (keys_[s] == key) {  // positions only grow: the newer occurrence replaces the older
      ends_[s] = end;
      return;
    }
  }
}

std::optional<int32_t> NgramIndex::find(uint64_t key) const {
  const size_t mask = keys_.size() - 1;
  for (size_t s = size_t(key) & mask; ends_[s] >= 0; s = (s + 1) & mask)
    if (keys_[s] == key) return ends_[s];
  return std::nullopt;
}

void NgramIndex::index_position(std::span<const int64_t> tokens, int64_t end) {
  // Room for this position's grams first (a sequence past the capacity it started with).
  if (2 * (n_entries_ + options_.max_n - options_.min_n + 1) > int64_t(keys_.size())) rebuild(tokens, 2 * keys_.size());
  uint64_t h = kSeed;
  for (int64_t n = 1; n <= options_.max_n && n <= end + 1; ++n) {
    h = extend(h, tokens[size_t(end - n + 1)]);
    if (n >= options_.min_n) insert(h, int32_t(end));
  }
}

void NgramIndex::rebuild(std::span<const int64_t> tokens, size_t capacity) {
  keys_.assign(capacity, 0);
  ends_.assign(capacity, -1);
  n_entries_ = 0;
  for (int64_t end = 0; end < n_indexed_; ++end) index_position(tokens, end);
}

void NgramIndex::update(std::span<const int64_t> tokens) {
  const int64_t last = int64_t(tokens.size()) - 1;  // grams ending here are the query, not yet indexed
  if (last < n_indexed_) {
    // Not an extension of what was indexed: start again.
    std::fill(ends_.begin(), ends_.end(), -1);
    n_entries_ = 0;
    n_indexed_ = 0;
  }
  for (; n_indexed_ < last; ++n_indexed_) index_position(tokens, n_indexed_);
}

std::optional<NgramMatch> NgramIndex::longest_match(std::span<const int64_t> tokens) const {
  const int64_t size = int64_t(tokens.size());
  // An earlier occurrence of a gram of length n ends at n - 1 or later and before the last token.
  const int64_t longest = std::min(options_.max_n, size - 1);
  if (longest < options_.min_n) return std::nullopt;
  uint64_t hashes[NgramOptions::kMaxN];  // [longest] hash of the suffix of length n + 1
  uint64_t h = kSeed;
  for (int64_t n = 1; n <= longest; ++n) hashes[n - 1] = h = extend(h, tokens[size_t(size - n)]);
  for (int64_t n = longest; n >= options_.min_n; --n) {
    const std::optional<int32_t> end = find(hashes[n - 1]);
    if (!end || *end < n - 1) continue;
    const auto earlier = tokens.begin() + (*end - n + 1), suffix = tokens.end() - n;
    if (std::equal(earlier, earlier + n, suffix)) return NgramMatch{*end, n};
  }
  return std::nullopt;
}

NgramDrafter::NgramDrafter(const NgramOptions& options) : options_(options) { validate(options); }

std::string NgramDrafter::describe() const {
  return str_cat("ngram: prompt lookup, n-grams of ", options_.min_n, "..", options_.max_n,
                 " tokens (longest first, latest occurrence)");
}

std::unique_ptr<DraftState> NgramDrafter::start(int64_t capacity) const {
  return std::make_unique<NgramIndex>(options_, capacity);
}

int64_t NgramDrafter::propose(DraftState& state, std::span<const int64_t> tokens, std::span<int64_t> out) const {
  auto& index = static_cast<NgramIndex&>(state);  // start() made it
  index.update(tokens);
  const std::optional<NgramMatch> match = index.longest_match(tokens);
  if (!match) return 0;
  // Draft m copies position end + 1 + m; past the sequence's end that is an earlier draft (end + 1 + m -
  // size < m because end < size - 1).
  const int64_t size = int64_t(tokens.size());
  for (int64_t m = 0; m < int64_t(out.size()); ++m) {
    const int64_t from = match->end + 1 + m;
    out[size_t(m)] = from < size ? tokens[size_t(from)] : out[size_t(from - size)];
  }
  return int64_t(out.size());
}

}  // namespace aerie
