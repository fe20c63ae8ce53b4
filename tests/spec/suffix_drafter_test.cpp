// The suffix automaton, the shared suffix index and the suffix drafter (spec/suffix_drafter.h) against
// brute force: the longest suffix of a query found in the text and that its occurrence is real, on random
// texts over small alphabets (many repeats) with documents separated; the index's token budget under
// eviction, with what it keeps the newest documents; K from the match length; the sequence's own tokens and
// earlier requests' tokens; every option's refusal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "core/error.h"
#include "spec/suffix_drafter.h"

namespace aerie {
namespace {

// The longest suffix of query's last `window` tokens occurring in `text` (as a contiguous run) whose
// occurrence ends at a position `usable` accepts; brute force.
template <typename Usable>
int64_t brute_longest(const std::vector<int64_t>& text, const std::vector<int64_t>& query, int64_t window,
                      Usable usable) {
  const int64_t longest = std::min<int64_t>(window, int64_t(query.size()));
  for (int64_t l = longest; l >= 1; --l) {
    const auto suffix = query.end() - l;
    for (int64_t end = l - 1; end < int64_t(text.size()); ++end)
      if (usable(end) && std::equal(suffix, query.end(), text.begin() + (end - l + 1))) return l;
  }
  return 0;
}

bool occurs_at(const std::vector<int64_t>& text, const std::vector<int64_t>& query, int64_t length, int64_t end) {
  if (length == 0) return true;
  if (end < length - 1 || end >= int64_t(text.size())) return false;
  return std::equal(query.end() - length, query.end(), text.begin() + (end - length + 1));
}

std::vector<int64_t> random_tokens(std::mt19937_64& rng, int64_t n, int64_t alphabet) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t& t : v) t = int64_t(rng() % uint64_t(alphabet));
  return v;
}

TEST(SuffixAutomaton, LongestSuffixMatchesBruteForce) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t alphabet = 2 + trial % 5;
    std::vector<int64_t> text;
    SuffixAutomaton sam;
    const int64_t n = 1 + int64_t(rng() % 300);
    for (int64_t i = 0; i < n; ++i) {
      // Separators now and then (never in a query): matches must not cross them.
      const int64_t t = rng() % 23 == 0 ? SuffixAutomaton::kSeparator : int64_t(rng() % uint64_t(alphabet));
      sam.push(t);
      text.push_back(t);
    }
    ASSERT_EQ(sam.size(), n);
    EXPECT_LE(sam.n_states(), 2 * n + 1);
    for (int q = 0; q < 20; ++q) {
      std::vector<int64_t> query = random_tokens(rng, 1 + int64_t(rng() % 40), alphabet);
      if (q % 2 == 0) {  // a piece of the text at the end of the query: long matches
        const size_t from = rng() % text.size(), to = std::min(text.size(), from + 1 + rng() % 30);
        for (size_t i = from; i < to; ++i)
          if (text[i] >= 0) query.push_back(text[i]);
      }
      const int64_t window = 1 + int64_t(rng() % 48);
      const auto always = [](int64_t) { return true; };
      const SuffixAutomaton::Match m = sam.longest_suffix(query, window, always);
      EXPECT_EQ(m.length, brute_longest(text, query, window, always)) << "trial " << trial << " query " << q;
      EXPECT_TRUE(occurs_at(text, query, m.length, m.end)) << "trial " << trial << " query " << q;
      // Only occurrences followed by a token: the match is real, usable, and no longer than the longest such.
      const auto followed = [&text](int64_t end) {
        return end + 1 < int64_t(text.size()) && text[size_t(end + 1)] != SuffixAutomaton::kSeparator;
      };
      const SuffixAutomaton::Match f = sam.longest_suffix(query, window, followed);
      EXPECT_LE(f.length, brute_longest(text, query, window, followed));
      EXPECT_TRUE(occurs_at(text, query, f.length, f.end));
      if (f.length > 0) {
        EXPECT_TRUE(followed(f.end));
      }
    }
  }
}

TEST(SuffixAutomaton, KeepsTheLatestOccurrenceOfARepeat) {
  // "a b c x a b c y a b c": "a b c" ends at 2, 6 and 10; the query "... a b c" matches the latest, 10
  // (whose class was last extended there), and a query ending "b c x" is followed by "a" at 4.
  SuffixAutomaton sam;
  for (int64_t t : {0, 1, 2, 7, 0, 1, 2, 8, 0, 1, 2}) sam.push(t);
  const auto always = [](int64_t) { return true; };
  EXPECT_EQ(sam.longest_suffix(std::vector<int64_t>{5, 0, 1, 2}, 64, always).end, 10);
  const SuffixAutomaton::Match m = sam.longest_suffix(std::vector<int64_t>{1, 2, 7}, 64, always);
  EXPECT_EQ(m.length, 3);
  EXPECT_EQ(m.end, 3);
  EXPECT_THROW(sam.push(-2), Error);
  EXPECT_THROW(sam.push(int64_t(1) << 31), Error);
}

TEST(SuffixIndex, EvictionKeepsTheNewestDocumentsWithinTheBudget) {
  std::mt19937_64 rng(7);
  for (int64_t budget : {2, 16, 100, 1000}) {
    SuffixIndex index(budget);
    std::vector<std::vector<int64_t>> added;
    for (int d = 0; d < 60; ++d) {
      std::vector<int64_t> doc = random_tokens(rng, 1 + int64_t(rng() % 90), 4);
      index.add(doc);
      // A document over half the budget keeps its last half-budget tokens (less its separator).
      const size_t room = size_t(std::max<int64_t>(budget / 2 - 1, 0));
      if (doc.size() > room) doc.erase(doc.begin(), doc.end() - ptrdiff_t(room));
      added.push_back(doc);
      EXPECT_LE(index.held_tokens(), budget) << "budget " << budget;
      const std::vector<std::vector<int64_t>> held = index.documents();
      if (budget < 4) {
        EXPECT_TRUE(held.empty());
        continue;
      }
      // What it holds is the newest documents, in order, the latest always among them, and at least as
      // much as fits in half the budget.
      ASSERT_FALSE(held.empty()) << "budget " << budget;
      ASSERT_LE(held.size(), added.size());
      EXPECT_TRUE(std::equal(held.begin(), held.end(), added.end() - ptrdiff_t(held.size())));
      int64_t held_tokens = 0;
      for (const auto& h : held) held_tokens += int64_t(h.size()) + 1;
      EXPECT_EQ(held_tokens, index.held_tokens());
      if (held.size() < added.size()) {
        EXPECT_GT(held_tokens, budget / 2) << "budget " << budget;
      }
    }
  }
}

// Memory follows what is held, not what was ever added: ~100 bytes a token of natural-ish text, and the
// bound holds after many generations have been dropped.
TEST(SuffixIndex, MemoryStaysBoundedByTheBudget) {
  std::mt19937_64 rng(3);
  const int64_t budget = 20000;
  SuffixIndex index(budget);
  size_t most = 0;
  for (int d = 0; d < 400; ++d) {
    index.add(random_tokens(rng, 100 + int64_t(rng() % 400), 50));
    most = std::max(most, index.memory_bytes());
  }
  std::printf("budget %lld tokens: at most %zu bytes (%.0f per budget token), %lld tokens held\n", (long long)budget,
              most, double(most) / double(budget), (long long)index.held_tokens());
  EXPECT_LE(index.held_tokens(), budget);
  EXPECT_LT(most, size_t(budget) * 256);
}

TEST(SuffixIndex, LookupCopiesWhatFollowsARealOccurrence) {
  std::mt19937_64 rng(11);
  SuffixIndex index(600);
  for (int d = 0; d < 40; ++d) {
    index.add(random_tokens(rng, 5 + int64_t(rng() % 60), 3 + d % 3));
    const std::vector<std::vector<int64_t>> held = index.documents();
    std::vector<int64_t> text;  // as the index lays them out
    for (const auto& h : held) {
      text.insert(text.end(), h.begin(), h.end());
      text.push_back(SuffixAutomaton::kSeparator);
    }
    const auto followed = [&text](int64_t end) {
      return end + 1 < int64_t(text.size()) && text[size_t(end + 1)] != SuffixAutomaton::kSeparator;
    };
    for (int q = 0; q < 10; ++q) {
      std::vector<int64_t> query = random_tokens(rng, 1 + int64_t(rng() % 12), 5);
      const std::vector<int64_t>& from = held[rng() % held.size()];
      const size_t cut = rng() % from.size();
      query.insert(query.end(), from.begin(), from.begin() + ptrdiff_t(cut));
      std::vector<int64_t> out(1 + rng() % 8);
      const SuffixIndex::Lookup r = index.lookup(query, 32, out);
      EXPECT_LE(r.length, brute_longest(text, query, 32, followed));
      if (r.length == 0) continue;
      // Some occurrence of the matched suffix is followed by exactly the copied tokens (to its document's end).
      bool found = false;
      for (int64_t end = r.length - 1; end + 1 < int64_t(text.size()) && !found; ++end) {
        if (!occurs_at(text, query, r.length, end)) continue;
        int64_t n = 0;
        while (n < int64_t(out.size()) && text[size_t(end + 1 + n)] != SuffixAutomaton::kSeparator &&
               text[size_t(end + 1 + n)] == out[size_t(n)])
          ++n;
        const bool stopped = n == int64_t(out.size()) || text[size_t(end + 1 + n)] == SuffixAutomaton::kSeparator;
        found = n == r.n && stopped && r.n > 0;
      }
      EXPECT_TRUE(found) << "document " << d << " query " << q << ": match of " << r.length;
    }
  }
}

TEST(SuffixIndex, LongDistinctRepeatsAreFoundExactly) {
  // Over a large alphabet a piece of a held document after unrelated tokens matches exactly its length.
  std::mt19937_64 rng(5);
  SuffixIndex index(4000);
  std::vector<std::vector<int64_t>> docs;
  for (int d = 0; d < 20; ++d) {
    docs.push_back(random_tokens(rng, 50 + int64_t(rng() % 50), 100000));
    index.add(docs.back());
  }
  for (int q = 0; q < 50; ++q) {
    const std::vector<int64_t>& doc = docs[rng() % docs.size()];
    const size_t from = rng() % 20, length = 1 + rng() % 20;
    std::vector<int64_t> query = {100001, 100002};  // never in a document
    query.insert(query.end(), doc.begin() + ptrdiff_t(from), doc.begin() + ptrdiff_t(from + length));
    std::vector<int64_t> out(6);
    const SuffixIndex::Lookup r = index.lookup(query, 64, out);
    EXPECT_EQ(r.length, int64_t(length));
    ASSERT_EQ(r.n, 6);
    EXPECT_TRUE(std::equal(out.begin(), out.end(), doc.begin() + ptrdiff_t(from + length)));
  }
}

int64_t propose(const SuffixDrafter& drafter, DraftState& state, const std::vector<int64_t>& tokens, int64_t k,
                std::vector<int64_t>& out) {
  out.assign(size_t(k), -1);
  const int64_t n = drafter.propose(state, tokens, out);
  out.resize(size_t(n));
  return n;
}

TEST(SuffixDrafter, DraftsFromItsOwnTokensWithKFromTheMatchLength) {
  SuffixOptions o;
  o.min_match = 3;
  o.factor = 0.5;
  o.cache_tokens = 0;
  const SuffixDrafter drafter(o);
  std::unique_ptr<DraftState> state = drafter.start(64);
  std::vector<int64_t> out;
  // "1 2 3 4 5 6 7 8 | 9 ... 1 2": match "1 2" (2 < 3): no drafts.
  std::vector<int64_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2};
  EXPECT_EQ(propose(drafter, *state, tokens, 8, out), 0);
  EXPECT_EQ(SuffixDrafter::last_match(*state), 2);
  // "... 1 2 3 4 5 6": match 6 -> floor(0.5 x 6) = 3 drafts, 7 8 9.
  for (int64_t t : {3, 4, 5, 6}) tokens.push_back(t);
  EXPECT_EQ(propose(drafter, *state, tokens, 8, out), 3);
  EXPECT_EQ(out, (std::vector<int64_t>{7, 8, 9}));
  // A run repeating itself: the copy runs into its own drafts (overlap), capped by K.
  const SuffixDrafter eager(SuffixOptions{1, 4.0, 0, 0});
  std::unique_ptr<DraftState> run = eager.start(16);
  EXPECT_EQ(propose(eager, *run, {5, 6, 5, 6, 5}, 7, out), 7);
  EXPECT_EQ(out, (std::vector<int64_t>{6, 5, 6, 5, 6, 5, 6}));
  // A sequence that is not an extension starts again.
  EXPECT_EQ(propose(drafter, *state, {1, 2, 3}, 8, out), 0);
}

TEST(SuffixDrafter, ARequestDraftsWhatAnEarlierRequestWrote) {
  SuffixOptions o;
  o.min_match = 2;
  const SuffixDrafter drafter(o);
  const std::vector<int64_t> first = {100, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  {
    std::unique_ptr<DraftState> state = drafter.start(32);
    std::vector<int64_t> out;
    propose(drafter, *state, first, 4, out);
  }  // the request ended: what its state saw (all but its last token) is in the shared index
  ASSERT_EQ(drafter.shared_index()->documents(), (std::vector<std::vector<int64_t>>{{100, 11, 12, 13, 14, 15, 16, 17, 18, 19}}));
  std::unique_ptr<DraftState> state = drafter.start(32);
  std::vector<int64_t> out;
  EXPECT_EQ(propose(drafter, *state, {200, 201, 12, 13, 14}, 8, out), 3);  // match 3: 3 drafts
  EXPECT_EQ(out, (std::vector<int64_t>{15, 16, 17}));
  EXPECT_EQ(SuffixDrafter::last_match(*state), 3);
  // Its own tokens win a tie: "13 14" occurs in both; its own continuation is 99.
  EXPECT_EQ(propose(drafter, *state, {200, 201, 12, 13, 14, 99, 5, 13, 14}, 8, out), 2);
  EXPECT_EQ(out, (std::vector<int64_t>{99, 5}));
}

TEST(SuffixDrafter, RefusesOptionsOutOfRange) {
  const struct {
    SuffixOptions options;
    const char* expected;
  } cases[] = {
      {{0, 1.0, 0, 0}, "--suffix-min-match) must be in [1, 64], got 0"},
      {{65, 1.0, 0, 0}, "--suffix-min-match) must be in [1, 64], got 65"},
      {{4, 0.0, 0, 0}, "--suffix-factor) must be in (0, 16], got 0"},
      {{4, 17.0, 0, 0}, "--suffix-factor) must be in (0, 16], got 17"},
      {{4, 1.0, -1, 0}, "--suffix-cache-tokens) must be in [0, 268435456], got -1"},
      {{4, 1.0, 0, 33}, "--suffix-head-k must be in [0, 32], got 33"},
  };
  for (const auto& c : cases) {
    try {
      SuffixDrafter drafter(c.options);
      ADD_FAILURE() << "accepted: " << c.expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace aerie
