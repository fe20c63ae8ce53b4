#include "spec/draft_tree.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace aerie {

void validate(const DraftTreeShape& shape) {
  if (!shape.enabled()) return;
  AERIE_CHECK(shape.top_k >= 1 && shape.top_k <= 16, "--spec-tree-top-k must be in [1, 16], got ", shape.top_k);
  AERIE_CHECK(shape.depth >= 1 && shape.depth <= 16, "--spec-tree-depth must be in [1, 16], got ", shape.depth);
  AERIE_CHECK(shape.total_tokens >= 1 && shape.total_tokens <= 64, "--spec-tree-tokens must be in [1, 64], got ",
              shape.total_tokens);
}

void DraftTreeBuilder::reset(int64_t top_k) {
  top_k_ = top_k;
  nodes_.clear();
  frontier_from_ = 0;
}

void DraftTreeBuilder::expand(int32_t parent, const float* logits, int64_t n_vocab) {
  const int64_t k = std::min(top_k_, n_vocab);
  // One pass: the k best ids (ascending rank; ties to the lower id) and the maximum.
  ids_.clear();
  for (int64_t t = 0; t < n_vocab; ++t) {
    if (int64_t(ids_.size()) == k && logits[t] <= logits[ids_.back()]) continue;
    if (int64_t(ids_.size()) == k) ids_.pop_back();
    auto at = ids_.end();
    while (at != ids_.begin() && logits[*(at - 1)] < logits[t]) --at;
    ids_.insert(at, t);
  }
  // log sum exp(logits), in float (a few ulps do not change a ranking of cumulative log-probabilities).
  const float max = logits[ids_.front()];
  float sum = 0.0f;
  for (int64_t t = 0; t < n_vocab; ++t) sum += std::exp(logits[t] - max);
  const double log_norm = double(max) + std::log(double(sum));
  const double base = parent < 0 ? 0.0 : nodes_[size_t(parent)].score;
  const int32_t depth = parent < 0 ? 1 : nodes_[size_t(parent)].depth + 1;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t t = ids_[size_t(i)];
    nodes_.push_back(Node{t, parent, depth, base + double(logits[t]) - log_norm});
  }
}

std::span<const int32_t> DraftTreeBuilder::next_frontier() {
  order_.clear();
  for (size_t i = frontier_from_; i < nodes_.size(); ++i) order_.push_back(int32_t(i));
  frontier_from_ = nodes_.size();
  const size_t k = std::min(order_.size(), size_t(top_k_));
  // Stable by creation order on equal scores.
  std::stable_sort(order_.begin(), order_.end(),
                   [this](int32_t a, int32_t b) { return nodes_[size_t(a)].score > nodes_[size_t(b)].score; });
  frontier_.assign(order_.begin(), order_.begin() + std::ptrdiff_t(k));
  std::sort(frontier_.begin(), frontier_.end());
  return frontier_;
}

void DraftTreeBuilder::select(int64_t total_tokens, std::vector<int64_t>& tokens, std::vector<int32_t>& parents) {
  order_.resize(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) order_[i] = int32_t(i);
  std::stable_sort(order_.begin(), order_.end(),
                   [this](int32_t a, int32_t b) { return nodes_[size_t(a)].score > nodes_[size_t(b)].score; });
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
  for (size_t i = 0; i < nodes_.size(); ++i) {  // creation order: parents first
    if (picked_[i] < 0) continue;
    picked_[i] = int32_t(tokens.size());
    const int32_t parent = nodes_[i].parent;
    tokens.push_back(nodes_[i].token);
    parents.push_back(parent < 0 ? -1 : picked_[size_t(parent)]);
  }
}

}  // namespace aerie
