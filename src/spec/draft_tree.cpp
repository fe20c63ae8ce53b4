#include "spec/draft_tree.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.h"

namespace aerie {

void validate(const DraftTreeShape& shape) {
  if (!shape.enabled()) return;
  AERIE_CHECK(shape.top_k >= 1 && shape.top_k <= 16, "--spec-tree-top-k must be in [1, 16], got ", shape.top_k);
  AERIE_CHECK(shape.depth >= 1 && shape.depth <= 16, "--spec-tree-depth must be in [1, 16], got ", shape.depth);
  AERIE_CHECK(shape.total_tokens >= 1 && shape.total_tokens <= 64, "--spec-tree-tokens must be in [1, 64], got ",
              shape.total_tokens);
}

void DrawAcceptance::observe(int64_t draw, bool accepted) {
  if (draw < 1 || draw > kMaxDraws) return;
  for (int64_t j = 0; j < kMaxDraws; ++j) {  // decay every draw index alike, so the estimates age together
    tried_[size_t(j)] *= kDecay;
    accepted_[size_t(j)] *= kDecay;
  }
  tried_[size_t(draw - 1)] += 1.0;
  accepted_[size_t(draw - 1)] += accepted ? 1.0 : 0.0;
}

double DrawAcceptance::alpha(int64_t draw) const {
  const double prior = draw == 1 ? kPriorFirst : kPriorLater;
  const size_t j = size_t(std::clamp<int64_t>(draw, 1, kMaxDraws) - 1);
  const double a = (accepted_[j] + kPriorStrength * prior) / (tried_[j] + kPriorStrength);
  return std::clamp(a, 0.01, 0.99);
}

void DrawAcceptance::log_values(int64_t n, std::vector<double>& out) const {
  out.resize(size_t(n));
  double rejected_before = 0.0;  // log prod_{i<j} (1 - alpha_i)
  for (int64_t j = 1; j <= n; ++j) {
    const double a = alpha(j);
    out[size_t(j - 1)] = rejected_before + std::log(a);
    // Never above the draw before it (a second draw estimated likelier than a poor first one): the kept
    // children of a node must be its first draws.
    if (j > 1) out[size_t(j - 1)] = std::min(out[size_t(j - 1)], out[size_t(j - 2)]);
    rejected_before += std::log(1.0 - a);
  }
}

double learned_floor(std::span<const double> log_rank_value, int64_t depth, int64_t total_tokens) {
  // The builder's own process on rank values alone: each level's nodes, the top_k of them (by score, ties to the
  // first created) expanded into top_k children each; the total_tokens-th best score of all of them.
  const size_t k = log_rank_value.size();
  thread_local std::vector<double> all, level, frontier;  // reused: a steady step allocates nothing
  thread_local std::vector<size_t> order;
  all.clear();
  level.assign(log_rank_value.begin(), log_rank_value.end());
  for (int64_t d = 1; d <= depth && !level.empty(); ++d) {
    all.insert(all.end(), level.begin(), level.end());
    if (d == depth) break;
    order.resize(level.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),  // ties to the first created (std::stable_sort would allocate)
              [&](size_t x, size_t y) { return level[x] > level[y] || (level[x] == level[y] && x < y); });
    order.resize(std::min(order.size(), k));
    std::sort(order.begin(), order.end());  // creation order, as next_frontier returns it
    frontier.clear();
    for (size_t i : order) frontier.push_back(level[i]);
    level.clear();
    for (const double base : frontier)
      for (const double v : log_rank_value) level.push_back(base + v);
  }
  if (all.empty() || total_tokens <= 0) return -1e300;
  const size_t n = std::min(all.size(), size_t(total_tokens));
  std::nth_element(all.begin(), all.begin() + std::ptrdiff_t(n - 1), all.end(), std::greater<double>());
  return all[n - 1];
}

void DraftTreeBuilder::reset(int64_t top_k) {
  top_k_ = top_k;
  nodes_.clear();
  frontier_from_ = 0;
}

void DraftTreeBuilder::top_ids(const float* row, int64_t n_vocab) {
  const int64_t k = std::min(top_k_, n_vocab);
  // One pass: the k best ids (ascending rank; ties to the lower id).
  ids_.clear();
  for (int64_t t = 0; t < n_vocab; ++t) {
    if (int64_t(ids_.size()) == k && row[t] <= row[ids_.back()]) continue;
    if (int64_t(ids_.size()) == k) ids_.pop_back();
    auto at = ids_.end();
    while (at != ids_.begin() && row[*(at - 1)] < row[t]) --at;
    ids_.insert(at, t);
  }
}

void DraftTreeBuilder::add(int32_t parent, int64_t token, double log_p) {
  const double base = parent < 0 ? 0.0 : nodes_[size_t(parent)].score;
  const int32_t depth = parent < 0 ? 1 : nodes_[size_t(parent)].depth + 1;
  nodes_.push_back(Node{token, parent, depth, base + log_p});
}

void DraftTreeBuilder::expand(int32_t parent, const float* logits, int64_t n_vocab) {
  top_ids(logits, n_vocab);
  // log sum exp(logits), in float (a few ulps do not change a ranking of cumulative log-probabilities).
  const float max = logits[ids_.front()];
  float sum = 0.0f;
  for (int64_t t = 0; t < n_vocab; ++t) sum += std::exp(logits[t] - max);
  const double log_norm = double(max) + std::log(double(sum));
  for (const int64_t t : ids_) add(parent, t, double(logits[t]) - log_norm);
}

void DraftTreeBuilder::expand_ranked(int32_t parent, const float* logits, int64_t n_vocab,
                                     std::span<const double> log_rank_value) {
  AERIE_CHECK(int64_t(log_rank_value.size()) >= top_k_, "draft tree: ", log_rank_value.size(), " rank values for top_k ",
              top_k_);
  top_ids(logits, n_vocab);
  for (size_t j = 0; j < ids_.size(); ++j) add(parent, ids_[j], log_rank_value[j]);
}

void DraftTreeBuilder::expand_sampled(int32_t parent, const float* probs, int64_t n_vocab, Rng& rng,
                                      std::span<const double> log_draw_value) {
  AERIE_CHECK(int64_t(log_draw_value.size()) >= top_k_, "draft tree: ", log_draw_value.size(), " draw values for top_k ",
              top_k_);
  top_ids(probs, n_vocab);  // how many tokens have mass, up to top_k
  double left = 0.0;        // the mass not drawn yet
  for (int64_t t = 0; t < n_vocab; ++t) left += probs[t];
  drawn_.clear();           // ascending
  for (const int64_t ranked : ids_) {
    if (!(probs[ranked] > 0.0f) || !(left > 0.0)) break;  // fewer than top_k tokens with mass
    // One draw from probs without the tokens drawn so far: the first token whose running sum passes u.
    const double u = rng.next_unit_double() * left;
    double run = 0.0;
    int64_t pick = -1;
    size_t next_drawn = 0;
    for (int64_t t = 0; t < n_vocab; ++t) {
      if (next_drawn < drawn_.size() && drawn_[next_drawn] == t) {
        ++next_drawn;
        continue;
      }
      if (!(probs[t] > 0.0f)) continue;
      pick = t;  // rounding: the last token with mass left, should u pass the whole sum
      run += probs[t];
      if (run > u) break;
    }
    if (pick < 0) break;
    left -= probs[pick];
    drawn_.insert(std::upper_bound(drawn_.begin(), drawn_.end(), pick), pick);
    add(parent, pick, log_draw_value[drawn_.size() - 1]);
  }
}

std::span<const int32_t> DraftTreeBuilder::next_frontier(int64_t total_tokens, double best_child_gain,
                                                         double floor) {
  order_.clear();
  for (size_t i = frontier_from_; i < nodes_.size(); ++i) order_.push_back(int32_t(i));
  frontier_from_ = nodes_.size();
  const size_t k = std::min(order_.size(), size_t(top_k_));
  // Ties to the node created first.
  std::sort(order_.begin(), order_.end(), [this](int32_t a, int32_t b) { return ranks_before(a, b); });
  frontier_.assign(order_.begin(), order_.begin() + std::ptrdiff_t(k));
  std::erase_if(frontier_, [&](int32_t n) { return nodes_[size_t(n)].score + best_child_gain < floor; });
  if (total_tokens > 0 && int64_t(nodes_.size()) >= total_tokens) {
    // The total_tokens-th best score so far: a child that cannot pass it is never selected (later nodes only
    // push it further down).
    scores_.resize(nodes_.size());
    for (size_t i = 0; i < nodes_.size(); ++i) scores_[i] = nodes_[i].score;
    std::nth_element(scores_.begin(), scores_.begin() + (total_tokens - 1), scores_.end(), std::greater<double>());
    const double bar = scores_[size_t(total_tokens - 1)];
    std::erase_if(frontier_, [&](int32_t n) { return !(nodes_[size_t(n)].score + best_child_gain > bar); });
  }
  std::sort(frontier_.begin(), frontier_.end());
  return frontier_;
}

void DraftTreeBuilder::select(int64_t total_tokens, std::vector<int64_t>& tokens, std::vector<int32_t>& parents,
                              std::vector<int32_t>* kept) {
  order_.resize(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) order_[i] = int32_t(i);
  std::sort(order_.begin(), order_.end(), [this](int32_t a, int32_t b) { return ranks_before(a, b); });
  // picked_[i]: node i's index in the output, -1 while not kept. A child's score is at most its parent's
  // (a log-probability is <= 0) and a parent is created first, so in this order a parent comes before its
  // children; a node whose parent was not kept (rounding) is skipped, so every kept node's ancestors are.
  picked_.assign(nodes_.size(), -1);
  int64_t n = 0;
  for (int32_t i : order_) {
    if (n == total_tokens) break;
    const int32_t parent = nodes_[size_t(i)].parent;
    if (parent >= 0 && picked_[size_t(parent)] < 0) continue;
    picked_[size_t(i)] = 0;
    ++n;
  }
  tokens.clear();
  parents.clear();
  if (kept) kept->clear();
  for (size_t i = 0; i < nodes_.size(); ++i) {  // creation order: parents first
    if (picked_[i] < 0) continue;
    picked_[i] = int32_t(tokens.size());
    const int32_t parent = nodes_[i].parent;
    tokens.push_back(nodes_[i].token);
    if (kept) kept->push_back(int32_t(i));
    parents.push_back(parent < 0 ? -1 : picked_[size_t(parent)]);
  }
}

}  // namespace aerie
