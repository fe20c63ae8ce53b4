#include "spec/suffix_drafter.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.h"
#include "spec/spec_options.h"

namespace aerie {
namespace {

// One sequence's state: an automaton over its tokens but the last (so that every occurrence it finds is
// followed by a token of the sequence), and those tokens, given to the shared index when it ends.
struct SequenceSuffix final : DraftState {
  SuffixAutomaton own;
  std::vector<int64_t> tokens;  // tokens[0, own.size()): what `own` holds
  std::shared_ptr<SuffixIndex> shared;
  int64_t last_match = 0;

  ~SequenceSuffix() override {
    if (!shared || tokens.empty()) return;
    try {
      shared->add(tokens);
    } catch (...) {
      // Out of memory while indexing: the shared index only loses this request's tokens (a destructor
      // must not throw).
    }
  }
};

}  // namespace

void validate(const SuffixOptions& o) {
  AERIE_CHECK(o.min_match >= 1 && o.min_match <= SuffixOptions::kMaxMatch,
              "--draft suffix: the shortest match that drafts (--suffix-min-match) must be in [1, ",
              SuffixOptions::kMaxMatch, "], got ", o.min_match);
  AERIE_CHECK(std::isfinite(o.factor) && o.factor > 0.0 && o.factor <= SuffixOptions::kMaxFactor,
              "--draft suffix: drafts per matched token (--suffix-factor) must be in (0, ", SuffixOptions::kMaxFactor,
              "], got ", o.factor);
  AERIE_CHECK(o.cache_tokens >= 0 && o.cache_tokens <= SuffixOptions::kMaxCacheTokens,
              "--draft suffix: the shared index's budget (--suffix-cache-tokens) must be in [0, ",
              SuffixOptions::kMaxCacheTokens, "], got ", o.cache_tokens);
  AERIE_CHECK(o.head_k >= 0 && o.head_k <= kMaxDraftTokens, "--suffix-head-k must be in [0, ", kMaxDraftTokens,
              "], got ", o.head_k);
}

SuffixIndex::SuffixIndex(int64_t budget_tokens) : generation_tokens_(budget_tokens / 2) {
  AERIE_CHECK(budget_tokens >= 0, "suffix index: a negative token budget ", budget_tokens);
}

void SuffixIndex::add(std::span<const int64_t> document) {
  if (generation_tokens_ < 2 || document.empty()) return;
  // A document with its separator fits one generation: a longer one keeps its end.
  if (int64_t(document.size()) + 1 > generation_tokens_) document = document.last(size_t(generation_tokens_ - 1));
  std::lock_guard<std::mutex> lock(mutex_);
  if (int64_t(newer_.text.size() + document.size()) + 1 > generation_tokens_) {
    older_ = std::move(newer_);
    newer_ = Generation{};
  }
  for (int64_t t : document) {
    newer_.automaton.push(t);
    newer_.text.push_back(t);
  }
  newer_.automaton.push(SuffixAutomaton::kSeparator);
  newer_.text.push_back(SuffixAutomaton::kSeparator);
}

SuffixIndex::Lookup SuffixIndex::lookup_in(const Generation& g, std::span<const int64_t> query, int64_t window,
                                           std::span<int64_t> out) const {
  const std::vector<int64_t>& text = g.text;
  const auto followed = [&text](int64_t end) {
    return end + 1 < int64_t(text.size()) && text[size_t(end + 1)] != SuffixAutomaton::kSeparator;
  };
  const SuffixAutomaton::Match m = g.automaton.longest_suffix(query, window, followed);
  if (m.length == 0) return {};
  Lookup r{m.length, 0};
  for (int64_t from = m.end + 1; r.n < int64_t(out.size()) && from < int64_t(text.size()) &&
                                 text[size_t(from)] != SuffixAutomaton::kSeparator;
       ++from)
    out[size_t(r.n++)] = text[size_t(from)];
  return r;
}

SuffixIndex::Lookup SuffixIndex::lookup(std::span<const int64_t> query, int64_t window, std::span<int64_t> out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Lookup newer = lookup_in(newer_, query, window, out);
  std::array<int64_t, kMaxDraftTokens> older_out;
  const Lookup older =
      lookup_in(older_, query, window, std::span(older_out).first(std::min(out.size(), older_out.size())));
  if (older.length <= newer.length) return newer;  // a tie goes to the newer text
  std::copy_n(older_out.begin(), older.n, out.begin());
  return older;
}

int64_t SuffixIndex::held_tokens() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return int64_t(newer_.text.size() + older_.text.size());
}

size_t SuffixIndex::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return newer_.automaton.memory_bytes() + older_.automaton.memory_bytes() +
         (newer_.text.capacity() + older_.text.capacity()) * sizeof(int64_t);
}

std::vector<std::vector<int64_t>> SuffixIndex::documents() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::vector<int64_t>> docs(1);
  for (const Generation* g : {&older_, &newer_})
    for (int64_t t : g->text) {
      if (t == SuffixAutomaton::kSeparator)
        docs.emplace_back();
      else
        docs.back().push_back(t);
    }
  docs.pop_back();  // after the last separator
  return docs;
}

SuffixDrafter::SuffixDrafter(const SuffixOptions& options) : options_(options) {
  validate(options);
  if (options.cache_tokens > 0) shared_ = std::make_shared<SuffixIndex>(options.cache_tokens);
}

std::string SuffixDrafter::describe() const {
  return str_cat("suffix: longest repeat of the sequence's suffix in its own tokens",
                 shared_ ? str_cat(" and in ", options_.cache_tokens, " tokens of earlier requests") : std::string(),
                 "; drafts floor(", options_.factor, " x match) from a match of ", options_.min_match, "+ tokens");
}

std::unique_ptr<DraftState> SuffixDrafter::start(int64_t capacity) const {
  (void)capacity;  // the automaton grows with the sequence (reserving the whole capacity would cost ~100 B a token)
  auto state = std::make_unique<SequenceSuffix>();
  state->shared = shared_;
  return state;
}

int64_t SuffixDrafter::last_match(const DraftState& state) {
  return static_cast<const SequenceSuffix&>(state).last_match;
}

int64_t SuffixDrafter::propose(DraftState& state, std::span<const int64_t> tokens, std::span<int64_t> out) const {
  auto& s = static_cast<SequenceSuffix&>(state);  // start() made it
  s.last_match = 0;
  const int64_t size = int64_t(tokens.size());
  if (size - 1 < int64_t(s.tokens.size())) {
    // Not an extension of what was indexed: start again.
    s.own = SuffixAutomaton{};
    s.tokens.clear();
  }
  for (int64_t i = int64_t(s.tokens.size()); i < size - 1; ++i) {
    s.own.push(tokens[size_t(i)]);
    s.tokens.push_back(tokens[size_t(i)]);
  }
  out = out.first(std::min(out.size(), size_t(kMaxDraftTokens)));
  // Every occurrence in `own` ends before the last token, so the sequence itself continues it.
  const SuffixAutomaton::Match own = s.own.longest_suffix(tokens, SuffixOptions::kMaxMatch, [](int64_t) { return true; });
  std::array<int64_t, kMaxDraftTokens> shared_out;
  const SuffixIndex::Lookup shared =
      shared_ && own.length < SuffixOptions::kMaxMatch
          ? shared_->lookup(tokens, SuffixOptions::kMaxMatch, std::span(shared_out).first(out.size()))
          : SuffixIndex::Lookup{};
  const bool use_own = own.length >= shared.length;  // a tie goes to the sequence's own tokens
  const int64_t length = use_own ? own.length : shared.length;
  s.last_match = length;
  if (length < options_.min_match) return 0;
  int64_t n = std::min(int64_t(out.size()), int64_t(std::floor(options_.factor * double(length))));
  if (!use_own) {
    n = std::min(n, shared.n);
    std::copy_n(shared_out.begin(), n, out.begin());
    return n;
  }
  // Draft m copies position end + 1 + m; past the sequence's end that is an earlier draft (an overlapping
  // copy, as in the n-gram drafter: end + 1 + m - size < m because end < size - 1).
  for (int64_t m = 0; m < n; ++m) {
    const int64_t from = own.end + 1 + m;
    out[size_t(m)] = from < size ? tokens[size_t(from)] : out[size_t(from - size)];
  }
  return n;
}

}  // namespace aerie
