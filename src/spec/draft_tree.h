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
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace aerie {

struct DraftTreeShape {
  int64_t top_k = 0;         // children per expanded node, and frontier nodes per depth; 0: chain drafting
  int64_t depth = 0;         // the deepest level (SGLang num_steps): depth - 1 head passes after the first
  int64_t total_tokens = 0;  // nodes verified (SGLang num_draft_tokens, without the root)

  bool enabled() const { return top_k > 0; }
};

// Throws aerie::Error naming the option unless top_k in [1, 16], depth in [1, 16], total_tokens in [1, 64].
void validate(const DraftTreeShape& shape);

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
  // The next frontier: of the nodes added since the last call, the top_k by score (ties: created first),
  // in creation order.
  std::span<const int32_t> next_frontier();
  // The best total_tokens nodes (fewer when the tree has fewer), each with its ancestors, in creation
  // order: tokens [n] and parents [n] (indices into the output; -1: child of the root).
  void select(int64_t total_tokens, std::vector<int64_t>& tokens, std::vector<int32_t>& parents);

  const std::vector<Node>& nodes() const { return nodes_; }

 private:
  int64_t top_k_ = 1;
  std::vector<Node> nodes_;
  size_t frontier_from_ = 0;   // first node not yet offered to a frontier
  std::vector<int32_t> frontier_, order_, picked_;
  std::vector<int64_t> ids_;   // [top_k] the best ids of one expansion
};

}  // namespace aerie
