#include "spec/adaptive_tree.h"

#include <algorithm>

namespace aerie {

int64_t tree_nodes(const DraftTreeShape& shape, int64_t depth) {
  if (depth <= 0) return 0;
  return std::min(shape.total_tokens, shape.top_k + (depth - 1) * shape.top_k * shape.top_k);
}

int64_t tree_head_rows(const DraftTreeShape& shape, int64_t depth) {
  return depth <= 0 ? 0 : 1 + shape.top_k * (depth - 1);
}

ChainInTree chain_in_tree(std::span<const int32_t> row_parent, std::span<const int64_t> path) {
  const int64_t n = int64_t(row_parent.size());
  auto first_child = [&](int64_t row) {
    for (int64_t r = 1; r < n; ++r)
      if (row_parent[size_t(r)] == row) return r;
    return int64_t(-1);
  };
  int64_t at = 0, accepted = 0;
  for (size_t j = 1; j < path.size(); ++j) {
    if (path[j] != first_child(at)) return {accepted + 1, accepted};  // the chain's draft was the sibling rejected
    at = path[j];
    ++accepted;
  }
  // The path ends: the chain's next draft rejected where the tree holds it, unseen where it does not.
  return first_child(at) >= 0 ? ChainInTree{accepted + 1, accepted} : ChainInTree{accepted, accepted};
}

namespace {

// One sequence's option in the step: a chain of k drafts (depth 0) or a tree of `depth`.
struct Option {
  double tokens = 1;       // E[tokens]
  int64_t drafts = 0;      // rows beyond its one: chain drafts or tree nodes
  int64_t chain_passes = 0, tree_passes = 0, tree_rows = 0;
};

// What the step's options add up to.
struct Tally {
  double tokens = 0;
  int64_t rows = 0, drafts = 0, tree_rows = 0;
};

// The drafter's seconds: trees are timed whole (StepCosts::tree_draft, their first pass shared with the
// chains' and so with chains of one draft), chain passes beyond the first on top.
double drafter_seconds(const StepCosts& costs, int64_t chain_passes, int64_t tree_rows, int64_t tree_passes) {
  if (tree_rows == 0) return costs.draft(chain_passes);
  const double chains = chain_passes > 1 ? costs.draft(chain_passes) - costs.draft(1) : 0.0;
  return costs.tree_draft(tree_rows, std::max(tree_passes, chain_passes)) + chains;
}

double rate_of(const Tally& t, int64_t chain_passes, int64_t tree_passes, int64_t base, const StepCosts& costs) {
  const double seconds = t.drafts == 0 ? costs.plain(base)
                                       : costs.forward(t.rows) + drafter_seconds(costs, chain_passes, t.tree_rows, tree_passes);
  return seconds > 0 ? t.tokens / seconds : 0.0;
}

Option option_of(std::span<const double> chain_rates, int64_t k, std::span<const double> tree_rates, int64_t depth,
                 const DraftTreeShape& shape) {
  Option o;
  if (depth > 0) {
    o.tokens = expected_tokens(tree_rates, depth);
    o.drafts = tree_nodes(shape, depth);
    o.tree_passes = depth;
    o.tree_rows = tree_head_rows(shape, depth);
  } else {
    o.tokens = expected_tokens(chain_rates, k);
    o.drafts = o.chain_passes = k;
  }
  return o;
}

// The largest of a field over the options, and the largest but for one option (its top two).
struct TopTwo {
  int64_t first = 0, second = 0;
  size_t at = SIZE_MAX;
  void add(int64_t v, size_t i) {
    if (v > first) second = first, first = v, at = i;
    else second = std::max(second, v);
  }
  int64_t without(size_t i) const { return i == at ? second : first; }
};

}  // namespace

double step_rate(std::span<const std::span<const double>> chain_rates, std::span<const int64_t> chain_k,
                 std::span<const std::span<const double>> tree_rates, std::span<const int64_t> depth,
                 const DraftTreeShape& shape, const StepCosts& costs, int64_t other_rows) {
  const int64_t base = int64_t(chain_rates.size()) + std::max<int64_t>(other_rows, 0);
  Tally t{double(base - int64_t(chain_rates.size())), base - int64_t(chain_rates.size()), 0, 0};
  int64_t chain_passes = 0, tree_passes = 0;
  for (size_t s = 0; s < chain_rates.size(); ++s) {
    const Option o = option_of(chain_rates[s], chain_k[s], tree_rates[s], depth[s], shape);
    t.tokens += o.tokens, t.rows += 1 + o.drafts, t.drafts += o.drafts, t.tree_rows += o.tree_rows;
    chain_passes = std::max(chain_passes, o.chain_passes), tree_passes = std::max(tree_passes, o.tree_passes);
  }
  return rate_of(t, chain_passes, tree_passes, base, costs);
}

void choose_trees(std::span<const std::span<const double>> chain_rates, std::span<const int64_t> chain_k,
                  std::span<const std::span<const double>> tree_rates, const DraftTreeShape& shape,
                  const StepCosts& costs, std::span<int64_t> depth, int64_t other_rows) {
  // Moves at most: each a pass over every sequence and depth (a large batch starts from the best uniform
  // depth, so a few moves are enough there too).
  constexpr int64_t kMaxMoves = 32;
  const size_t n = chain_rates.size();
  int64_t deepest = 0;
  for (size_t s = 0; s < n; ++s) depth[s] = 0, deepest = std::max<int64_t>(deepest, int64_t(tree_rates[s].size()));
  if (deepest == 0) return;
  const int64_t base = int64_t(n) + std::max<int64_t>(other_rows, 0);
  // The start: the chains, or every sequence that may at one depth d (cut to its own), whichever is best.
  // Reused from step to step (a steady step allocates nothing).
  thread_local std::vector<int64_t> trial;
  thread_local std::vector<Option> now;
  trial.resize(n);
  now.resize(n);
  double best = 0;
  int64_t best_d = 0;
  for (int64_t d = 1; d <= deepest; ++d) {
    for (size_t s = 0; s < n; ++s) trial[s] = std::min<int64_t>(d, int64_t(tree_rates[s].size()));
    const double rate = step_rate(chain_rates, chain_k, tree_rates, trial, shape, costs, other_rows);
    if (rate > best) best = rate, best_d = d;
  }
  if (best > step_rate(chain_rates, chain_k, tree_rates, depth, shape, costs, other_rows) * (1 + kMinTreeGain))
    for (size_t s = 0; s < n; ++s) depth[s] = std::min<int64_t>(best_d, int64_t(tree_rates[s].size()));
  for (int64_t move = 0; move < kMaxMoves; ++move) {
    Tally t{double(base - int64_t(n)), base - int64_t(n), 0, 0};
    TopTwo chain_passes, tree_passes;
    for (size_t s = 0; s < n; ++s) {
      now[s] = option_of(chain_rates[s], chain_k[s], tree_rates[s], depth[s], shape);
      t.tokens += now[s].tokens, t.rows += 1 + now[s].drafts, t.drafts += now[s].drafts, t.tree_rows += now[s].tree_rows;
      chain_passes.add(now[s].chain_passes, s), tree_passes.add(now[s].tree_passes, s);
    }
    const double current = rate_of(t, chain_passes.first, tree_passes.first, base, costs);
    double best_rate = current * (1 + kMinTreeGain);
    size_t best_s = n;
    int64_t best_d = 0;
    for (size_t s = 0; s < n; ++s) {
      for (int64_t d = 0; d <= int64_t(tree_rates[s].size()); ++d) {
        if (d == depth[s]) continue;
        const Option o = option_of(chain_rates[s], chain_k[s], tree_rates[s], d, shape);
        Tally u = t;
        u.tokens += o.tokens - now[s].tokens;
        u.rows += o.drafts - now[s].drafts;
        u.drafts += o.drafts - now[s].drafts;
        u.tree_rows += o.tree_rows - now[s].tree_rows;
        const double rate = rate_of(u, std::max(chain_passes.without(s), o.chain_passes),
                                    std::max(tree_passes.without(s), o.tree_passes), base, costs);
        if (rate > best_rate) best_rate = rate, best_s = s, best_d = d;
      }
    }
    if (best_s == n) return;
    depth[best_s] = best_d;
  }
}

void apply_probes(AdaptiveKState& state, int64_t chain_k, int64_t chain_allowed, int64_t depth, int64_t deepest,
                  TreeProbes& probes) {
  state.tree = state.tree_probe = false;
  if (depth > 0) {
    state.k = apply_probe(state, depth, deepest);
    state.tree = state.k > 0;
    if (state.tree) probes.rounds = 0;
    return;
  }
  state.k = apply_probe(state, chain_k, chain_allowed);
  if (deepest == 0 || state.k == 0 || state.probe || ++probes.rounds < probes.interval) return;
  probes.rounds = 0;
  probes.interval = std::min(2 * probes.interval, TreeProbes::kMaxInterval);
  state.k = deepest;
  state.tree = state.tree_probe = true;
}

}  // namespace aerie
