// EAGLE-2 dynamic draft trees (Li et al. 2024, "EAGLE-2"; SGLang's speculative_eagle_topk): the drafter
// grows a tree of candidate tokens depth by depth and the target verifies the best of them in one forward.
//
//   depth 1: the top_k tokens of the head's distribution after the root (the last verified token);
//   depth d + 1: each of the top_k frontier nodes of depth d (the most probable by cumulative
//            log-probability, the sum of log q along the path) is run through the head and adds its top_k
//            children; the top_k best of these top_k^2 candidates are the next frontier;
//   at the end every candidate is reranked by cumulative log-probability and the best total_tokens are
//   kept, a node only with its parent (so a kept node's ancestors are all kept).
//
// Worked example, top_k 2, depth 2, total_tokens 3 (log-probabilities in brackets):
//   root -> a [-0.1], b [-2.5]                      frontier {a, b}
//   a -> c [-0.2], d [-2.0];  b -> e [-0.1], f [-3]  cumulative c -0.3, d -2.1, e -2.6, f -5.5
//   next frontier {c, d}; best 3 of {a -0.1, c -0.3, d -2.1, b -2.5, e -2.6, f -5.5}: a, c, d
//   -> tokens [a c d], parents [-1 0 0]
// The output lists a parent before its children (creation order), parents as indices into the output
// (-1: a child of the root).
//
// Sampled trees (expand_sampled; a request at T > 0 whose drafts are drawn): a node's children are top_k
// draws WITHOUT replacement from the head's processed distribution q there, in draw order, and the target
// tries them in that order by recursive rejection sampling (spec/tree_verify.h). That is lossless only if
// whether a child is in the verified tree never depends on which token it drew (a child kept only when it
// drew a likely token would be tried more often when likely: biased). So a drawn child's score is not its
// own log q but a value known before the draw: the estimated probability that the walk takes the j-th
// draw, alpha_j * prod_{i<j} (1 - alpha_i), with alpha_j = P(draw j accepted | draws 1..j-1 rejected)
// learned from verified trees (DrawAcceptance; Sequoia's positional acceptance vector). Frontiers and the
// final selection then read only draw indices and depths, never a node's token; and as the values fall
// with the draw index (ties: created first), the children a node keeps are always its first draws, the
// prefix the verifier tries in order. The scores are the sum of the path's values, so the best
// total_tokens nodes maximise the expected accepted length under that model; with one draw accepted far
// more often than a second (shipped family at T = 1: alpha_1 0.62-0.66, alpha_2 0.14) the tree is a chain
// with siblings only where the chain's next depth would be worth less.
// Why not the head's own q for the score, as for greedy trees: a sampled draft is accepted with
// probability sum min(p, q), which does not shrink with a flat q as q's largest probability does, so
// q-ranked sampled trees were shallow and accepted less than chains of the same width (T = 1: tau 2.24
// for 2:4:4 against a chain's 2.59 at K = 4).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "sample/sampling.h"

namespace aerie {

// How greedy (and argmax-proposal) trees score their nodes; sampled trees always take kLearned.
//   kLearned     the j-th child of a node: log(alpha_j * prod_{i<j} (1 - alpha_i)) of the sequence's learned
//                acceptance by rank (DrawAcceptance), Sequoia's positional model: the tree is the set of
//                nodes most likely reached under it (a chain, with siblings where they pay more than depth)
//   kConfidence  EAGLE-2's: the child's own log-probability under the head (calibrated heads only: the
//                shipped family's under-confident head made 2:4:4 accept 2.90 where a chain of 4 accepts 3.65;
//                learned: 3.64)
enum class TreeScore { kLearned, kConfidence };

struct DraftTreeShape {
  int64_t top_k = 0;         // children per expanded node, and frontier nodes per depth; 0: chain drafting
  int64_t depth = 0;         // the deepest level (SGLang num_steps): depth - 1 head passes after the first
  int64_t total_tokens = 0;  // nodes verified (SGLang num_draft_tokens, without the root)
  TreeScore score = TreeScore::kLearned;

  bool enabled() const { return top_k > 0; }
};

// Throws aerie::Error naming the option unless top_k in [1, 16], depth in [1, 16], total_tokens in [1, 64].
void validate(const DraftTreeShape& shape);

// alpha_j = P(draw j accepted | draws 1..j-1 rejected) of sampled trees, from the verified trees so far:
// counts decayed by kDecay per observation, shrunk toward a prior with kPriorStrength pseudo-counts.
class DrawAcceptance {
 public:
  static constexpr int64_t kMaxDraws = 16;  // top_k's bound
  static constexpr double kDecay = 0.998, kPriorStrength = 8.0, kPriorFirst = 0.6, kPriorLater = 0.15;

  // A verified try of draw `draw` (1-based) at some node.
  void observe(int64_t draw, bool accepted);
  double alpha(int64_t draw) const;  // clamped to [0.01, 0.99]
  // out[j - 1] = log(alpha_j * prod_{i<j} (1 - alpha_i)), j = 1..n: the value of the j-th draw, capped by
  // the value of draw j - 1 (values never rise with the draw index).
  void log_values(int64_t n, std::vector<double>& out) const;

 private:
  std::array<double, kMaxDraws> tried_{}, accepted_{};
};

// Learned scores depend on rank paths only, so the best total_tokens nodes of a tree up to `depth` levels are
// known before the head runs: the total_tokens-th best score of the tree the builder grows from these values
// (top_k expanded per level, each child's j-th rank adding log_rank_value[j - 1]). A frontier node whose best
// child falls below it is not run; where a node has fewer children (a distribution with fewer tokens), the
// tree is smaller than that, and pruning by this floor can only leave it smaller still, never change a kept
// node's value.
double learned_floor(std::span<const double> log_rank_value, int64_t depth, int64_t total_tokens);

class DraftTreeBuilder {
 public:
  struct Node {
    int64_t token = 0;   // draft-vocabulary id
    int32_t parent = -1; // node index, -1: a child of the root
    int32_t depth = 1;   // 1 for the root's children
    double score = 0;    // cumulative log-probability along the path from the root
  };

  // Starts a tree: no nodes, top_k children per expansion.
  void reset(int64_t top_k);
  // Adds the top_k children of `parent` (a node index, or -1 for the root) from its row of head logits
  // [n_vocab] (log-softmax; ties go to the lower id, as ops::argmax).
  void expand(int32_t parent, const float* logits, int64_t n_vocab);
  // The top_k children of `parent` (as expand), the j-th scored log_rank_value[j - 1] instead of its own
  // log-probability (greedy trees shaped by learned acceptance, --spec-tree-shape learned).
  void expand_ranked(int32_t parent, const float* logits, int64_t n_vocab, std::span<const double> log_rank_value);
  // A sampled tree's expansion: up to top_k children of `parent` drawn without replacement from `probs`
  // [n_vocab] (a distribution: the head's after the request's sampling processing), in draw order, the
  // j-th scored with log_draw_value[j - 1] (DrawAcceptance::log_values); fewer when fewer tokens have mass.
  void expand_sampled(int32_t parent, const float* probs, int64_t n_vocab, Rng& rng,
                      std::span<const double> log_draw_value);
  // The next frontier: of the nodes added since the last call, the top_k by score (ties: created first),
  // in creation order.
  // With total_tokens > 0, a node is left out when its best child (its score + best_child_gain, the most a
  // child can add: 0 for log-probabilities, the first rank's value for learned scores) could not beat the
  // total_tokens-th best node so far: select() would never keep it, so the head need not run it.
  // floor: also left out when its best child would score below it (learned_floor: known before any draw).
  std::span<const int32_t> next_frontier(int64_t total_tokens = 0, double best_child_gain = 0.0,
                                         double floor = -1e300);
  // The best total_tokens nodes (fewer when the tree has fewer), each with its ancestors, in creation
  // order: tokens [n] and parents [n] (indices into the output; -1: child of the root).
  // kept (optional): [n] each output node's index in nodes().
  void select(int64_t total_tokens, std::vector<int64_t>& tokens, std::vector<int32_t>& parents,
              std::vector<int32_t>* kept = nullptr);

  const std::vector<Node>& nodes() const { return nodes_; }

 private:
  int64_t top_k_ = 1;
  std::vector<Node> nodes_;
  size_t frontier_from_ = 0;   // first node not yet offered to a frontier
  std::vector<int32_t> frontier_, order_, picked_;
  // The top_k ids of one row (ascending rank; ties to the lower id) into ids_.
  void top_ids(const float* row, int64_t n_vocab);
  // Higher score first, ties to the node created first (an index order, so std::sort needs no buffer).
  bool ranks_before(int32_t a, int32_t b) const {
    const double sa = nodes_[size_t(a)].score, sb = nodes_[size_t(b)].score;
    return sa > sb || (sa == sb && a < b);
  }
  // Appends a child of `parent` with the given token and log-probability.
  void add(int32_t parent, int64_t token, double log_p);

  std::vector<int64_t> ids_;   // [top_k] the best ids of one expansion
  std::vector<int64_t> drawn_; // a sampled expansion's draws so far, ascending
  std::vector<double> scores_; // next_frontier's scratch
};

}  // namespace aerie
