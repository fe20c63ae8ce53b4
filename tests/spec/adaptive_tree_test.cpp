// Adaptive K between chains and trees (spec/adaptive_tree.h): a tree's rows and head rows by depth; what a
// greedy tree round says about the chain inside it (table of paths), and that DraftTreeBuilder keeps the
// head's argmax as the first kept child (the order that relies on); the choice picks the tree where extra
// rows are nearly free and the tree accepts more, the chain where rows cost linearly and the tree's gain
// is small, the best depth (or the chain) by brute force for one sequence, a tree only where allowed;
// tree probes come at a bounded rate while a chain is chosen and their count starts over with a tree round.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "spec/adaptive_tree.h"

namespace aerie {
namespace {

constexpr int64_t kTrust = CostCurve::kMinSamples + 1;
const DraftTreeShape kShape{2, 4, 8};

// verify(n) = base * (1 + slope * (n - 1)); drafter passes `draft` each; tree steps by head rows
// `tree_row` each.
StepCosts costs_of(double base, double slope, double draft, double tree_row, int64_t max_rows = 64) {
  StepCosts c(max_rows);
  for (int64_t i = 0; i < kTrust; ++i) {
    for (int64_t n = 1; n <= max_rows; ++n) {
      c.observe_forward(n, base * (1 + slope * double(n - 1)));
      c.observe_plain(n, base * (1 + slope * double(n - 1)));
      c.observe_tree_draft(n, tree_row * double(n));
    }
    for (int64_t p = 1; p <= kMaxAdaptiveK; ++p) c.observe_draft(p, draft * double(p));
  }
  return c;
}

// One sequence: the chain's K by choose_draft_tokens, then the tree's depth (0: the chain).
std::pair<int64_t, int64_t> choose_one(std::span<const double> chain, std::span<const double> tree,
                                       const StepCosts& costs) {
  std::vector<DraftGain> gains;
  int64_t k = -1, depth = -1;
  const std::span<const double> chains[] = {chain}, trees[] = {tree};
  choose_draft_tokens(chains, costs, std::span(&k, 1), gains);
  choose_trees(chains, std::span(&k, 1), trees, kShape, costs, std::span(&depth, 1));
  return {k, depth};
}

TEST(AdaptiveTree, RowsByDepth) {
  const int64_t nodes[] = {0, 2, 6, 8, 8}, head_rows[] = {0, 1, 3, 5, 7};
  for (int64_t d = 0; d <= 4; ++d) {
    EXPECT_EQ(tree_nodes(kShape, d), nodes[d]) << d;
    EXPECT_EQ(tree_head_rows(kShape, d), head_rows[d]) << d;
  }
  EXPECT_EQ(tree_nodes({3, 3, 64}, 3), 3 + 9 + 9);
}

TEST(AdaptiveTree, ChainInsideAGreedyTree) {
  // Rows: 1, 2 children of the root (1 first); 3, 4 of row 1; 5 of row 2; 6 of row 3.
  const std::vector<int32_t> parents = {-1, 0, 0, 1, 1, 2, 3};
  const struct {
    std::vector<int64_t> path;
    int64_t tried, accepted;
  } cases[] = {
      {{0}, 1, 0},           // nothing accepted: the chain's first draft (row 1) rejected
      {{0, 1}, 2, 1},        // row 1's first child (3) rejected
      {{0, 1, 3}, 3, 2},     // row 3's first child (6) rejected
      {{0, 1, 3, 6}, 3, 3},  // a leaf: the chain's fourth draft is not in the tree, unseen
      {{0, 2}, 1, 0},        // the walk took the second child: the chain's draft was rejected
      {{0, 1, 4}, 2, 1},
      {{0, 2, 5}, 1, 0},
  };
  for (const auto& c : cases) {
    const ChainInTree got = chain_in_tree(parents, c.path);
    EXPECT_EQ(got.tried, c.tried) << c.path.size() << " " << c.path.back();
    EXPECT_EQ(got.accepted, c.accepted) << c.path.size() << " " << c.path.back();
  }
}

TEST(AdaptiveTree, BuilderKeepsTheArgmaxAsTheFirstChild) {
  // Trees grown as HeadProposer grows them from random logits: in the selected rows, every node's first
  // kept child is the argmax of the logits it was expanded with (the chain's draft).
  std::mt19937_64 rng(3);
  std::normal_distribution<float> g(0, 2);
  constexpr int64_t kVocab = 12;
  for (int trial = 0; trial < 50; ++trial) {
    const DraftTreeShape shape{1 + int64_t(rng() % 4), 1 + int64_t(rng() % 5), 1 + int64_t(rng() % 16)};
    DraftTreeBuilder b;
    b.reset(shape.top_k);
    std::vector<std::vector<float>> logits;  // [expansion] by node index + 1 (0: the root)
    std::vector<int64_t> argmax(1, -1);      // [node + 1]
    auto expand = [&](int32_t parent) {
      std::vector<float> row(kVocab);
      for (float& x : row) x = g(rng);
      argmax.resize(b.nodes().size() + 1 + kVocab, -1);
      argmax[size_t(parent + 1)] = std::max_element(row.begin(), row.end()) - row.begin();
      b.expand(parent, row.data(), kVocab);
    };
    expand(-1);
    for (int64_t level = 1; level < shape.depth; ++level) {
      const std::vector<int32_t> frontier(b.next_frontier().begin(), b.next_frontier().end());
      for (int32_t node : frontier) expand(node);
    }
    std::vector<int64_t> tokens;
    std::vector<int32_t> parents;
    b.select(shape.total_tokens, tokens, parents);
    // Output index -> builder node: the kept nodes in creation order.
    std::vector<int32_t> node_of;
    for (size_t i = 0, o = 0; i < b.nodes().size() && o < tokens.size(); ++i) {
      const int32_t p = b.nodes()[i].parent;
      const bool parent_kept = p < 0 || std::find(node_of.begin(), node_of.end(), p) != node_of.end();
      if (parent_kept && b.nodes()[i].token == tokens[o] &&
          (parents[o] < 0 ? p < 0 : node_of[size_t(parents[o])] == p))
        node_of.push_back(int32_t(i)), ++o;
    }
    ASSERT_EQ(node_of.size(), tokens.size());
    std::vector<char> seen(tokens.size() + 1, 0);
    for (size_t o = 0; o < tokens.size(); ++o) {
      const int32_t parent_out = parents[o];
      if (seen[size_t(parent_out + 1)]) continue;
      seen[size_t(parent_out + 1)] = 1;
      const int32_t parent_node = parent_out < 0 ? -1 : node_of[size_t(parent_out)];
      EXPECT_EQ(tokens[o], argmax[size_t(parent_node + 1)]) << "trial " << trial << " row " << o;
    }
  }
}

TEST(AdaptiveTree, MemoryBoundTargetPicksTheTree) {
  // Rows nearly free (1% of a forward each, a memory-bound target), the tree accepting 0.9 a depth where
  // the chain accepts 0.6: the full tree.
  const StepCosts costs = costs_of(1.0, 0.01, 0.05, 0.02);
  const std::vector<double> chain(8, 0.6), tree(4, 0.9);
  const auto [k, depth] = choose_one(chain, tree, costs);
  EXPECT_GT(k, 0);
  EXPECT_EQ(depth, 4);
}

TEST(AdaptiveTree, LinearRowsAndASmallTreeGainPickTheChain) {
  // Every row as dear as a forward's fixed part: the tree's 8 rows against the chain's few, for 0.62
  // against 0.6.
  const StepCosts costs = costs_of(1.0, 1.0, 0.05, 0.05);
  const std::vector<double> chain(8, 0.6), tree(4, 0.62);
  EXPECT_EQ(choose_one(chain, tree, costs).second, 0);
}

TEST(AdaptiveTree, OneSequencePicksTheBestDepthOrTheChainByBruteForce) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  int n_trees = 0, n_chains = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<double> chain(1 + rng() % 8), tree(1 + rng() % 4);
    for (double& a : chain) a = u(rng);
    for (double& a : tree) a = std::min(1.0, u(rng) * 1.3);
    const StepCosts costs = costs_of(1.0, 0.3 * u(rng), 0.2 * u(rng), 0.1 * u(rng));
    const auto [k, depth] = choose_one(chain, tree, costs);
    const std::span<const double> chains[] = {chain}, trees_in[] = {tree};
    int64_t none = 0;
    const double chain_rate = step_rate(chains, std::span(&k, 1), trees_in, std::span(&none, 1), kShape, costs);
    int64_t best = 0;
    double best_rate = 0;
    for (int64_t d = 1; d <= int64_t(tree.size()); ++d) {
      const double rate = step_rate(chains, std::span(&k, 1), trees_in, std::span(&d, 1), kShape, costs);
      if (rate > best_rate) best_rate = rate, best = d;
    }
    // The best depth where it beats the chain by the margin (ties and noise go to the chain).
    EXPECT_EQ(depth, best_rate > chain_rate * (1 + kMinTreeGain) ? best : 0) << "trial " << trial;
    ++(depth > 0 ? n_trees : n_chains);
  }
  EXPECT_GT(n_trees, 30);
  EXPECT_GT(n_chains, 30);
}

TEST(AdaptiveTree, OnlySequencesThatMayDraftATreeDoAndTheStepGains) {
  const StepCosts costs = costs_of(1.0, 0.01, 0.05, 0.02);
  const std::vector<double> chain(6, 0.6), tree(4, 0.9);
  const std::span<const double> chains[] = {chain, chain, chain}, trees[] = {tree, {}, tree};
  std::vector<DraftGain> gains;
  std::vector<int64_t> k(3), depth(3), none(3, 0);
  choose_draft_tokens(chains, costs, k, gains);
  choose_trees(chains, k, trees, kShape, costs, depth);
  EXPECT_EQ(depth, (std::vector<int64_t>{4, 0, 4}));
  EXPECT_GT(step_rate(chains, k, trees, depth, kShape, costs),
            step_rate(chains, k, trees, none, kShape, costs) * (1 + kMinTreeGain));
}

TEST(AdaptiveTree, TreeProbesAreBoundedAndStartOverWhenTheTreeIsChosen) {
  AdaptiveKState state;
  state.acceptance.rounds = AdaptiveKState::kMinEvidence;
  TreeProbes schedule;
  int64_t probes = 0, first = -1;
  for (int64_t round = 0; round < 1000; ++round) {
    apply_probes(state, /*chain_k=*/3, /*chain_allowed=*/8, /*depth=*/0, /*deepest=*/4, schedule);
    if (!state.tree) continue;
    EXPECT_TRUE(state.tree_probe);
    EXPECT_EQ(state.k, 4);
    if (first < 0) first = round;
    ++probes;
  }
  EXPECT_EQ(first, TreeProbes::kFirstInterval - 1);  // soon at first
  EXPECT_LE(probes, 1000 / TreeProbes::kMaxInterval + 6);  // then one in 64 at most
  EXPECT_GE(probes, 1000 / TreeProbes::kMaxInterval);
  schedule.rounds = 10;
  apply_probes(state, 3, 8, /*depth=*/2, 4, schedule);  // the tree chosen: depth 2 (or explored at 1 or 3)
  EXPECT_TRUE(state.tree);
  EXPECT_FALSE(state.tree_probe);
  EXPECT_EQ(schedule.rounds, 0);  // the count starts over
  // Chains of K = 0 (plain) are not probed with trees (their own one-draft probes go on), nor where no
  // tree is allowed.
  AdaptiveKState plain;
  for (int round = 0; round < 100; ++round) {
    apply_probes(plain, 0, 8, 0, 4, schedule);
    EXPECT_FALSE(plain.tree);
    AdaptiveKState chain_only = state;
    apply_probes(chain_only, 3, 8, 0, 0, schedule);
    EXPECT_FALSE(chain_only.tree);
  }
}

}  // namespace
}  // namespace aerie
