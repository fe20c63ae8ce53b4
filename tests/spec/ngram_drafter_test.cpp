// The n-gram drafter (spec/ngram_drafter.h): its proposals worked out by hand (longest gram first, latest
// occurrence, min/max bounds, the K cut, the overlapping copy, no match), its incremental index against a
// plain scan of the whole sequence at every length of random sequences (growing past the capacity it
// started with, and handed a shorter sequence), its option checks, and its registry entry.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"
#include "spec/ngram_drafter.h"

namespace aerie {
namespace {

const std::filesystem::path kData(AERIE_TEST_DATA_DIR);

std::vector<int64_t> propose(const NgramDrafter& d, DraftState& state, const std::vector<int64_t>& tokens, int64_t k) {
  std::vector<int64_t> out(size_t(k), -1);
  out.resize(size_t(d.propose(state, tokens, out)));
  return out;
}

std::vector<int64_t> propose_fresh(const std::vector<int64_t>& tokens, int64_t min_n, int64_t max_n, int64_t k) {
  const NgramDrafter d(NgramOptions{min_n, max_n});
  std::unique_ptr<DraftState> state = d.start(int64_t(tokens.size()));
  return propose(d, *state, tokens, k);
}

// The definition, by brute force: for n = max_n down to min_n, the latest end j < size - 1 with
// tokens[j - n + 1 .. j] == the last n tokens; drafts copy j + 1, j + 2, ... (past the end: the drafts).
std::vector<int64_t> reference(const std::vector<int64_t>& t, int64_t min_n, int64_t max_n, int64_t k) {
  const int64_t size = int64_t(t.size());
  for (int64_t n = max_n; n >= min_n; --n) {
    for (int64_t j = size - 2; j >= n - 1; --j) {
      bool same = true;
      for (int64_t i = 0; i < n && same; ++i) same = t[size_t(j - i)] == t[size_t(size - 1 - i)];
      if (!same) continue;
      std::vector<int64_t> seq = t;
      for (int64_t m = 0; m < k; ++m) seq.push_back(seq[size_t(j + 1 + m)]);
      return std::vector<int64_t>(seq.begin() + size, seq.end());
    }
  }
  return {};
}

TEST(NgramDrafter, ProposalsByHand) {
  const struct {
    const char* name;
    std::vector<int64_t> tokens;
    int64_t min_n, max_n, k;
    std::vector<int64_t> drafts;
  } cases[] = {
      {"no earlier occurrence of any suffix", {1, 2, 3, 4}, 1, 3, 4, {}},
      {"one token: nothing earlier", {3}, 1, 1, 4, {}},
      // "1 2" ends at 2; "2" alone ends later, at 5, but the longer gram wins.
      {"longest gram first", {5, 1, 2, 9, 7, 2, 8, 1, 2}, 1, 2, 4, {9, 7, 2, 8}},
      {"max_n bounds the gram", {5, 1, 2, 9, 7, 2, 8, 1, 2}, 1, 1, 3, {8, 1, 2}},
      // "1 2" ends at 1 and at 4: the latest is taken.
      {"latest occurrence", {1, 2, 3, 1, 2, 4, 1, 2}, 2, 2, 2, {4, 1}},
      {"K cuts the copy", {1, 2, 3, 1, 2, 4, 1, 2}, 2, 2, 1, {4}},
      {"min_n: a shorter match does not count", {1, 2, 3, 4, 2, 5, 9, 2}, 2, 3, 3, {}},
      {"min_n 1 takes it", {1, 2, 3, 4, 2, 5, 9, 2}, 1, 3, 3, {5, 9, 2}},
      // "7 1 2" ends at 2: the copy runs to the end of the sequence and on into its own drafts.
      {"copy into the drafts", {7, 1, 2, 3, 8, 7, 1, 2}, 1, 3, 7, {3, 8, 7, 1, 2, 3, 8}},
      {"a run repeats", {4, 4, 4}, 1, 3, 4, {4, 4, 4, 4}},
      {"a period repeats", {6, 1, 2, 1, 2}, 2, 2, 5, {1, 2, 1, 2, 1}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(propose_fresh(c.tokens, c.min_n, c.max_n, c.k), c.drafts) << c.name;
    EXPECT_EQ(reference(c.tokens, c.min_n, c.max_n, c.k), c.drafts) << c.name << " (the reference)";
  }
}

// One state carried along a growing sequence gives, at every length, what a scan of the whole sequence
// gives: the index sees each token once. Small vocabularies make matches of every length common; the
// state starts with room for 8 tokens, so its table grows (rebuilt) where the distinct grams outnumber that.
TEST(NgramDrafter, IncrementalIndexEqualsAFullScanAtEveryLength) {
  std::mt19937_64 rng(5);
  int64_t matched = 0, steps = 0, largest_table = 0;
  for (const auto& [min_n, max_n, vocab] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 3}, {1, 3, 4}, {2, 5, 3},
                                            {3, 3, 2}, {1, 8, 6}, {5, 5, 2}}) {
    for (int seq = 0; seq < 4; ++seq) {
      const NgramDrafter d(NgramOptions{min_n, max_n});
      std::unique_ptr<DraftState> state = d.start(8);
      std::vector<int64_t> tokens;
      for (int64_t len = 1; len <= 300; ++len) {
        tokens.push_back(int64_t(rng() % uint64_t(vocab)));
        // Several tokens at a time too, as after a round that accepted drafts.
        if (rng() % 3 == 0) continue;
        const int64_t k = 1 + int64_t(rng() % 6);
        const std::vector<int64_t> got = propose(d, *state, tokens, k);
        ASSERT_EQ(got, reference(tokens, min_n, max_n, k)) << "n " << min_n << ".." << max_n << " length " << len;
        matched += got.empty() ? 0 : 1;
        ++steps;
      }
      largest_table = std::max(largest_table, static_cast<const NgramIndex&>(*state).table_capacity());
    }
  }
  EXPECT_GT(largest_table, 64);  // one entry per distinct gram: grown from 16 slots
  EXPECT_GT(matched, steps / 2);
  EXPECT_LT(matched, steps);
}

TEST(NgramDrafter, AShorterSequenceIsIndexedAgain) {
  const NgramDrafter d(NgramOptions{1, 2});
  std::unique_ptr<DraftState> state = d.start(16);
  const std::vector<int64_t> a = {1, 2, 3, 1, 2, 3, 1};
  EXPECT_EQ(propose(d, *state, a, 2), reference(a, 1, 2, 2));
  const std::vector<int64_t> b = {5, 6, 5};  // not an extension of a
  EXPECT_EQ(propose(d, *state, b, 2), (std::vector<int64_t>{6, 5}));
}

TEST(NgramDrafter, GramLengthsAreChecked) {
  auto error_of = [](NgramOptions o) -> std::string {
    try {
      NgramDrafter d(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_EQ(error_of({0, 3}), "--draft ngram: the shortest n-gram matched (--ngram-min) must be at least 1, got 0");
  EXPECT_EQ(error_of({4, 2}), "--draft ngram: the shortest n-gram matched (--ngram-min 4) exceeds the longest (--ngram-max 2)");
  EXPECT_EQ(error_of({1, 65}), "--draft ngram: the longest n-gram matched (--ngram-max) must be at most 64, got 65");
  EXPECT_EQ(error_of({1, 64}), "(accepted)");
  EXPECT_EQ(error_of({3, 3}), "(accepted)");
}

// The registry's entry without a folder: any target, no layers, no head.
TEST(NgramDrafter, RegistryEntry) {
  ThreadPool pool(1);
  EXPECT_EQ(identify_drafter(kNgramDraftName), DrafterKind::kNgram);
  EXPECT_STREQ(drafter_kind_name(DrafterKind::kNgram), "n-gram drafter");
  for (const char* dir : {"spec/tiny_vocab16", "deepseek_tiny_vocab"}) {
    std::unique_ptr<Model> target = load_model(kData / dir, pool);
    DraftLoadOptions options;
    options.ngram = {2, 4};
    std::unique_ptr<Drafter> d = load_any_drafter(kNgramDraftName, *target, pool, options);
    ASSERT_NE(d->as_token_drafter(), nullptr) << dir;
    EXPECT_EQ(d->as_head(), nullptr);
    EXPECT_EQ(d->describe(), "ngram: prompt lookup, n-grams of 2..4 tokens (longest first, latest occurrence)");
    // A head folder through the same door is a head.
    if (std::string(dir) == "spec/tiny_vocab16") {
      EXPECT_NE(load_any_drafter((kData / "spec/tiny_vocab16_eagle1").string(), *target, pool)->as_head(), nullptr);
    }
    auto error_of = [&](const std::function<void()>& f) -> std::string {
      try {
        f();
      } catch (const Error& e) {
        return e.what();
      }
      return "(loaded)";
    };
    EXPECT_EQ(error_of([&] { load_drafter(kNgramDraftName, *target, pool); }),
              "--draft ngram is the n-gram drafter, not a draft head (load_any_drafter loads it)");
    options.ngram = {3, 1};
    EXPECT_NE(error_of([&] { load_any_drafter(kNgramDraftName, *target, pool, options); }).find("exceeds the longest"),
              std::string::npos);
    options.ngram = {};
    options.target_layers = {1};
    EXPECT_EQ(error_of([&] { load_any_drafter(kNgramDraftName, *target, pool, options); }),
              "--draft ngram (the n-gram drafter) reads no hidden state of the target; target layers cannot be "
              "chosen (asked for {1})");
  }
}

}  // namespace
}  // namespace aerie
