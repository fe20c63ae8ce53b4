// EAGLE-2 tree drafting (spec/draft_tree.h) and greedy tree verification (spec/tree_verify.h): the worked
// examples of the headers, then random trees against brute-force references (every root-to-node path of
// the tree, every candidate's cumulative log-probability).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

#include "sample/sampling.h"
#include "spec/draft_tree.h"
#include "spec/tree_verify.h"

namespace aerie {
namespace {

// A logits row [n_vocab] whose log-softmax puts `lp` on the listed tokens (the rest share what is left).
std::vector<float> row_with(int64_t n_vocab, const std::map<int64_t, double>& lp) {
  double mass = 0;
  for (const auto& [t, l] : lp) mass += std::exp(l);
  const double rest = std::log((1.0 - mass) / double(n_vocab - int64_t(lp.size())));
  std::vector<float> row(static_cast<size_t>(n_vocab), static_cast<float>(rest));
  for (const auto& [t, l] : lp) row[size_t(t)] = float(l);
  return row;
}

TEST(DraftTree, TheHeadersWorkedExample) {
  constexpr int64_t V = 8;
  enum : int64_t { a = 1, b = 2, c = 3, d = 4, e = 5, f = 6 };
  DraftTreeBuilder tree;
  tree.reset(2);
  tree.expand(-1, row_with(V, {{a, -0.1}, {b, -2.5}}).data(), V);
  const std::vector<int32_t> frontier(tree.next_frontier().begin(), tree.next_frontier().end());
  ASSERT_EQ(frontier, (std::vector<int32_t>{0, 1}));
  tree.expand(0, row_with(V, {{c, -0.2}, {d, -2.0}}).data(), V);
  tree.expand(1, row_with(V, {{e, -0.1}, {f, -3.0}}).data(), V);
  const std::span<const int32_t> next = tree.next_frontier();  // c (-0.3) and d (-2.1)
  EXPECT_EQ(std::vector<int32_t>(next.begin(), next.end()), (std::vector<int32_t>{2, 3}));
  std::vector<int64_t> tokens;
  std::vector<int32_t> parents;
  tree.select(3, tokens, parents);
  EXPECT_EQ(tokens, (std::vector<int64_t>{a, c, d}));
  EXPECT_EQ(parents, (std::vector<int32_t>{-1, 0, 0}));
  tree.select(5, tokens, parents);  // + b (-2.5), e (-2.6)
  EXPECT_EQ(tokens, (std::vector<int64_t>{a, b, c, d, e}));
  EXPECT_EQ(parents, (std::vector<int32_t>{-1, -1, 0, 0, 1}));
  EXPECT_NEAR(tree.nodes()[4].score, -2.6, 1e-5);
}

// Random heads: grow trees as the drafter does and check the selection against the candidates' scores.
TEST(DraftTree, SelectionKeepsTheBestNodesWithTheirAncestorsParentsFirst) {
  constexpr int64_t V = 16;
  Rng rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t top_k = 1 + int64_t(rng.next_u64() % 4), depth = 1 + int64_t(rng.next_u64() % 5);
    const int64_t total = 1 + int64_t(rng.next_u64() % 20);
    DraftTreeBuilder tree;
    tree.reset(top_k);
    std::vector<float> row(V);
    auto random_row = [&] {
      for (float& x : row) x = 4.0f * (rng.next_unit_float() - 0.5f);
      return row.data();
    };
    tree.expand(-1, random_row(), V);
    for (int64_t level = 1; level < depth; ++level) {
      const std::vector<int32_t> frontier(tree.next_frontier().begin(), tree.next_frontier().end());
      ASSERT_EQ(int64_t(frontier.size()), top_k);
      for (int32_t node : frontier) {
        EXPECT_EQ(tree.nodes()[size_t(node)].depth, level);
        tree.expand(node, random_row(), V);
      }
    }
    const auto& nodes = tree.nodes();
    std::vector<int64_t> tokens;
    std::vector<int32_t> parents;
    tree.select(total, tokens, parents);
    ASSERT_EQ(int64_t(tokens.size()), std::min<int64_t>(total, int64_t(nodes.size())));
    // Map the output back to nodes (creation order) and check order, ancestry and optimality.
    std::vector<int32_t> kept;
    double worst_kept = 0;
    std::vector<bool> is_kept(nodes.size(), false);
    size_t next = 0;
    for (size_t i = 0; i < nodes.size() && next < tokens.size(); ++i) {
      const int32_t want_parent = parents[next];
      const int32_t node_parent = nodes[i].parent;
      const bool parent_matches = want_parent < 0 ? node_parent < 0
                                                  : node_parent >= 0 && kept[size_t(want_parent)] == node_parent;
      if (nodes[i].token == tokens[next] && parent_matches && (node_parent < 0 || is_kept[size_t(node_parent)])) {
        kept.push_back(int32_t(i));
        is_kept[i] = true;
        worst_kept = next == 0 ? nodes[i].score : std::min(worst_kept, nodes[i].score);
        ++next;
      }
    }
    ASSERT_EQ(next, tokens.size()) << "output is not a creation-ordered subset of the candidates";
    for (size_t o = 0; o < parents.size(); ++o) EXPECT_LT(parents[o], int32_t(o));
    // Every candidate left out scores no better than the worst kept one (or its parent was left out).
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!is_kept[i] && (nodes[i].parent < 0 || is_kept[size_t(nodes[i].parent)])) {
        EXPECT_LE(nodes[i].score, worst_kept + 1e-12) << "trial " << trial;
      }
    }
  }
}

TEST(DraftTree, TopOneIsTheArgmaxChain) {
  constexpr int64_t V = 10;
  Rng rng(3);
  DraftTreeBuilder tree;
  tree.reset(1);
  std::vector<int64_t> chain;
  std::vector<float> row(V);
  int32_t parent = -1;
  for (int level = 0; level < 5; ++level) {
    for (float& x : row) x = rng.next_unit_float();
    chain.push_back(int64_t(std::max_element(row.begin(), row.end()) - row.begin()));
    tree.expand(parent, row.data(), V);
    parent = tree.next_frontier()[0];
  }
  std::vector<int64_t> tokens;
  std::vector<int32_t> parents;
  tree.select(5, tokens, parents);
  EXPECT_EQ(tokens, chain);
  EXPECT_EQ(parents, (std::vector<int32_t>{-1, 0, 1, 2, 3}));
}

TEST(DraftTree, SampledExpansionDrawsWithoutReplacementInDrawOrder) {
  constexpr int64_t V = 5;
  const std::vector<float> q = {0.4f, 0.0f, 0.3f, 0.2f, 0.1f};  // token 1 has no mass: never drawn
  const std::vector<double> values = {-0.5, -2.0, -3.0};
  Rng rng(11);
  DraftTreeBuilder tree;
  std::map<std::pair<int64_t, int64_t>, int64_t> counts;
  constexpr int kDraws = 40000;
  for (int i = 0; i < kDraws; ++i) {
    tree.reset(2);
    tree.expand_sampled(-1, q.data(), V, rng, values);
    ASSERT_EQ(tree.nodes().size(), 2u);
    const auto& n = tree.nodes();
    ASSERT_NE(n[0].token, n[1].token);
    // Scores are the draw index's values, whatever was drawn.
    EXPECT_EQ(n[0].score, values[0]);
    EXPECT_EQ(n[1].score, values[1]);
    ++counts[{n[0].token, n[1].token}];
  }
  // Ordered pairs: P(a, b) = q(a) q(b) / (1 - q(a)); chi-square over the 12 possible pairs (11 degrees of
  // freedom: the 0.9999 quantile is about 40).
  double chi2 = 0.0;
  int64_t seen = 0;
  for (int64_t a = 0; a < V; ++a)
    for (int64_t b = 0; b < V; ++b) {
      if (a == b || q[size_t(a)] == 0.0f || q[size_t(b)] == 0.0f) continue;
      const double expected = kDraws * double(q[size_t(a)]) * q[size_t(b)] / (1.0 - q[size_t(a)]);
      const double observed = double(counts[{a, b}]);
      seen += counts[{a, b}];
      chi2 += (observed - expected) * (observed - expected) / expected;
    }
  EXPECT_EQ(seen, kDraws) << "a draw of a token without mass, or a repeat";
  EXPECT_LT(chi2, 40.0);
  // Fewer tokens with mass than top_k: that many children.
  const std::vector<float> one = {0.0f, 1.0f, 0.0f, 0.0f, 0.0f};
  tree.reset(3);
  tree.expand_sampled(-1, one.data(), V, rng, values);
  ASSERT_EQ(tree.nodes().size(), 1u);
  EXPECT_EQ(tree.nodes()[0].token, 1);
}

TEST(DraftTree, DrawAcceptanceStartsAtItsPriorLearnsAndValuesEachDraw) {
  DrawAcceptance a;
  EXPECT_DOUBLE_EQ(a.alpha(1), DrawAcceptance::kPriorFirst);
  EXPECT_DOUBLE_EQ(a.alpha(2), DrawAcceptance::kPriorLater);
  std::vector<double> v;
  a.log_values(3, v);
  ASSERT_EQ(v.size(), 3u);
  const double a1 = DrawAcceptance::kPriorFirst, a2 = DrawAcceptance::kPriorLater;
  EXPECT_NEAR(v[0], std::log(a1), 1e-12);
  EXPECT_NEAR(v[1], std::log((1 - a1) * a2), 1e-12);
  EXPECT_NEAR(v[2], std::log((1 - a1) * (1 - a2) * a2), 1e-12);
  // A head whose first draw is taken 9 times in 10 and whose second never is.
  Rng rng(4);
  for (int i = 0; i < 3000; ++i) {
    const bool first = rng.next_unit_double() < 0.9;
    a.observe(1, first);
    if (!first) a.observe(2, false);
  }
  EXPECT_NEAR(a.alpha(1), 0.9, 0.03);
  EXPECT_LT(a.alpha(2), 0.03);
  EXPECT_DOUBLE_EQ(a.alpha(3), DrawAcceptance::kPriorLater);  // never tried: still its prior
  a.observe(0, true);  // outside [1, kMaxDraws]: ignored
  a.observe(DrawAcceptance::kMaxDraws + 1, true);
  EXPECT_NEAR(a.alpha(1), 0.9, 0.03);
}

// A random tree shape (top_k 1-3, depth 1..max_depth, 1-12 nodes) and learned rank values from 20 random
// observations of ranks 1..ranks, each accepted with probability `accept`.
struct RandomShape {
  int64_t top_k = 0, depth = 0, total = 0;
  std::vector<double> values;
};

RandomShape random_shape(Rng& rng, int64_t max_depth, int64_t ranks, double accept) {
  RandomShape c;
  c.top_k = 1 + int64_t(rng.next_unit_double() * 3);
  c.depth = 1 + int64_t(rng.next_unit_double() * double(max_depth));
  c.total = 1 + int64_t(rng.next_unit_double() * 12);
  DrawAcceptance acc;
  for (int i = 0; i < 20; ++i) acc.observe(1 + int64_t(rng.next_unit_double() * double(ranks)), rng.next_unit_double() < accept);
  acc.log_values(c.top_k, c.values);
  return c;
}

TEST(DraftTree, SampledTreesKeepEachNodesFirstDraws) {
  // Whatever is drawn, the kept children of every node are its first draws (the prefix the verifier tries),
  // and the kept set depends on draw indices only: a rerun with other draws keeps the same shape.
  constexpr int64_t V = 12;
  Rng rng(8);
  std::vector<float> q(V);
  for (int trial = 0; trial < 200; ++trial) {
    const RandomShape c = random_shape(rng, 4, 3, 0.5);
    const int64_t top_k = c.top_k, depth = c.depth, total = c.total;
    const std::vector<double>& values = c.values;
    std::vector<std::vector<int32_t>> shapes;
    for (int rerun = 0; rerun < 2; ++rerun) {
      DraftTreeBuilder tree;
      tree.reset(top_k);
      auto fill = [&] {
        double sum = 0;
        for (float& x : q) sum += (x = float(rng.next_unit_double()));
        for (float& x : q) x = float(x / sum);
      };
      fill();
      tree.expand_sampled(-1, q.data(), V, rng, values);
      for (int64_t level = 1; level < depth; ++level) {
        const std::vector<int32_t> frontier(tree.next_frontier().begin(), tree.next_frontier().end());
        for (int32_t node : frontier) {
          fill();
          tree.expand_sampled(node, q.data(), V, rng, values);
        }
      }
      std::vector<int64_t> tokens;
      std::vector<int32_t> parents, kept;
      tree.select(total, tokens, parents, &kept);
      const auto& nodes = tree.nodes();
      for (size_t i = 0; i < kept.size(); ++i) {
        // Every earlier draw of the same parent is kept too.
        for (int32_t n = 0; n < kept[i]; ++n) {
          if (nodes[size_t(n)].parent != nodes[size_t(kept[i])].parent) continue;
          EXPECT_NE(std::find(kept.begin(), kept.end(), n), kept.end()) << "trial " << trial << " node " << kept[i];
        }
      }
      shapes.push_back(parents);
    }
    EXPECT_EQ(shapes[0], shapes[1]) << "trial " << trial << ": the shape followed the draws";
  }
}

TEST(DraftTree, PrunedFrontiersKeepWhatUnprunedOnesWould) {
  // Learned scores (expand_ranked) with the frontier pruned by learned_floor and the best-so-far bar: as many
  // nodes selected as running every frontier node, none less likely, and fewer nodes run.
  constexpr int64_t V = 9;
  Rng rng(5);
  int64_t runs[2] = {0, 0};
  for (int trial = 0; trial < 200; ++trial) {
    const RandomShape c = random_shape(rng, 5, 2, 0.7);
    const int64_t top_k = c.top_k, depth = c.depth, total = c.total;
    const std::vector<double>& values = c.values;
    std::vector<int64_t> tokens[2];
    std::vector<int32_t> parents[2];
    std::vector<double> scores[2];
    for (int pruned = 0; pruned < 2; ++pruned) {
      DraftTreeBuilder tree;
      tree.reset(top_k);
      // A node's head row depends on its path only (a key per node), so both runs see the same rows.
      std::vector<uint64_t> key;
      auto expand = [&](int32_t node) {
        Rng r(uint64_t(trial) * 1000003u + (node < 0 ? 1u : key[size_t(node)]));
        std::vector<float> row(V);
        for (float& x : row) x = r.next_unit_float();
        const size_t before = tree.nodes().size();
        tree.expand_ranked(node, row.data(), V, values);
        for (size_t n = before; n < tree.nodes().size(); ++n)
          key.push_back((node < 0 ? 1u : key[size_t(node)]) * 31u + uint64_t(tree.nodes()[n].token) + 2u);
        ++runs[pruned];
      };
      expand(-1);
      for (int64_t level = 1; level < depth; ++level) {
        const std::span<const int32_t> f =
            pruned ? tree.next_frontier(total, values[0], learned_floor(values, depth, total)) : tree.next_frontier();
        for (int32_t node : std::vector<int32_t>(f.begin(), f.end())) expand(node);
      }
      std::vector<int32_t> kept;
      tree.select(total, tokens[pruned], parents[pruned], &kept);
      for (int32_t n : kept) scores[pruned].push_back(tree.nodes()[size_t(n)].score);
      std::sort(scores[pruned].begin(), scores[pruned].end(), std::greater<double>());
    }
    // As many nodes, each at least as likely reached: the pruned run lost no node it would have kept (a
    // frontier slot a hopeless node took unpruned may even go to a better one).
    ASSERT_EQ(scores[1].size(), scores[0].size()) << "trial " << trial;
    for (size_t i = 0; i < scores[0].size(); ++i) EXPECT_GE(scores[1][i], scores[0][i] - 1e-12) << "trial " << trial;
  }
  EXPECT_LT(runs[1], runs[0]) << "pruning ran every node";
  std::printf("head rows: %lld unpruned, %lld pruned\n", (long long)runs[0], (long long)runs[1]);
}

// The longest path from the root whose every token is the argmax at its parent's row, by brute force.
std::vector<int64_t> longest_agreeing_path(const std::vector<float>& logits, int64_t V, const std::vector<int64_t>& tokens,
                                           const std::vector<int32_t>& row_parent) {
  std::vector<int64_t> best;
  for (int64_t end = 1; end < int64_t(row_parent.size()); ++end) {
    std::vector<int64_t> path;
    for (int64_t r = end; r > 0; r = row_parent[size_t(r)]) path.insert(path.begin(), r);
    bool agrees = true;
    for (int64_t r : path) {
      const float* parent_row = logits.data() + row_parent[size_t(r)] * V;
      agrees = agrees && int64_t(std::max_element(parent_row, parent_row + V) - parent_row) == tokens[size_t(r - 1)];
    }
    if (agrees && path.size() > best.size()) best = path;
  }
  return best;
}

TEST(TreeVerify, GreedyAcceptsTheLongestPathTheTargetAgreesWith) {
  constexpr int64_t V = 4;
  Rng rng(5);
  for (int trial = 0; trial < 500; ++trial) {
    const int64_t n = 1 + int64_t(rng.next_u64() % 10);
    std::vector<int32_t> row_parent{-1};
    std::vector<int64_t> tokens;
    for (int64_t attempt = 0; attempt < n; ++attempt) {
      const int64_t r = int64_t(row_parent.size());
      const int32_t parent = int32_t(rng.next_u64() % row_parent.size());
      // Siblings carry distinct tokens: pick one no sibling has (skip the node when none is left).
      std::vector<int64_t> free;
      for (int64_t t = 0; t < V; ++t) {
        bool used = false;
        for (int64_t s = 1; s < r; ++s) used = used || (row_parent[size_t(s)] == parent && tokens[size_t(s - 1)] == t);
        if (!used) free.push_back(t);
      }
      if (free.empty()) continue;
      row_parent.push_back(parent);
      tokens.push_back(free[rng.next_u64() % free.size()]);
    }
    std::vector<float> logits(row_parent.size() * V);
    for (float& x : logits) x = rng.next_unit_float();
    std::vector<int64_t> path;
    const TreeVerdict verdict = verify_tree_greedy(logits.data(), V, tokens, row_parent, path);
    EXPECT_EQ(path, longest_agreeing_path(logits, V, tokens, row_parent)) << "trial " << trial;
    const float* last = logits.data() + (path.empty() ? 0 : path.back()) * V;
    EXPECT_EQ(verdict.next_token, int64_t(std::max_element(last, last + V) - last));
  }
}

TEST(TreeVerify, TheHeadersWorkedExample) {
  constexpr int64_t V = 4;
  enum : int64_t { a = 0, b = 1, c = 2 };
  const std::vector<int64_t> tokens{a, b, c};
  const std::vector<int32_t> row_parent{-1, 0, 0, 1};
  std::vector<float> logits(4 * V, 0.0f);
  logits[0 * V + a] = 1;  // row 0 -> a
  logits[1 * V + c] = 1;  // row 1 (a) -> c
  logits[3 * V + 3] = 1;  // row 3 (c) -> 3
  std::vector<int64_t> path;
  EXPECT_EQ(verify_tree_greedy(logits.data(), V, tokens, row_parent, path).next_token, 3);
  EXPECT_EQ(path, (std::vector<int64_t>{1, 3}));
  logits[0 * V + a] = 0, logits[0 * V + b] = 1, logits[2 * V + a] = 1;  // row 0 -> b, row 2 (b) -> a
  EXPECT_EQ(verify_tree_greedy(logits.data(), V, tokens, row_parent, path).next_token, a);
  EXPECT_EQ(path, (std::vector<int64_t>{2}));
}

}  // namespace
}  // namespace aerie
