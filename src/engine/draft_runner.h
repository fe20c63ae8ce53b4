// The draft head's passes of one engine step, batched over the sequences that ran: one pass over every
// sequence's new rows with the target's features (the rows whose tokens stay: a prompt chunk, or the
// accepted drafts and the target's token), which proposes each decoding sequence's first draft; then
// K - 1 passes of one row per sequence still drafting, on the head's own features. Writes each sequence's
// pending drafts (drafts, draft_ids, and q for rejection sampling).
//
// At K = 0 (DraftTokensByBatchSize at a large batch) no head pass runs: the target features of the new
// rows are kept with the sequence and go into the head's next pass, so its cache catches up in one pass
// when drafting resumes. A sequence more than kMaxDeferredRows behind stops speculating instead.
//
// Worked example, two sequences after verification: A accepted 1 draft (rows [f_P d1 | f_P+1 y] to the
// head), B finished a prompt chunk of 3 rows; K = 3 for A, 0 for B (still prefilling):
//   pass 0 (target features): rows [A: 2 | B: 3], logits of A's last row -> A.d'1
//   pass 1 (own features):    rows [A: (g, d'1)] -> A.d'2
//   pass 2 (own features):    rows [A: (g, d'2)] -> A.d'3
//
// Draft trees (SpecOptions::tree, spec/draft_tree.h): a sequence (greedy or sampled) without penalties or structured
// output drafts an EAGLE-2 tree instead (the others a chain). Pass 0 as above gives the root's children;
// each further pass runs, per tree sequence, only the new frontier as tree rows (SequenceRows::tree_parent)
// on top of the nodes run by the earlier passes, which stay in the head's cache after the root
// (SequenceRows::tree_cached), so that each row sees the prefix and its own ancestors only; the frontier's
// logits add the next level: top_k rows a pass. The tree's best nodes become the sequence's drafts, with
// the parent rows the target verifies them with (PendingTree).
//   tree pass at level 2, top_k 2: cached rows [a b] (the level-1 frontier), new rows [c d] (children of a),
//   tree_parent [-1 -1 0 0], tree_cached 2, features [g_a g_a], logits of rows c and d.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "models/model.h"
#include "sample/constraint_mask.h"
#include "sample/sampling.h"
#include "sched/scheduler.h"
#include "spec/draft_head.h"
#include "spec/draft_tree.h"
#include "spec/spec_options.h"

namespace aerie {

// A sequence's draft tree between drafting and the round after its verification.
struct PendingTree {
  std::vector<int32_t> row_parent;  // [1 + N] parent row of each verification row (row 0, the last token: -1)
  std::vector<int64_t> kept;        // set by the verification: the rows whose positions stay, [0, path rows...]
};

// Drafts a decoding sequence may make this step at `k_step` (or at its own adaptive K when lower): the
// round after it verifies 1 + K rows, which must not run past max_tokens or `max_length`.
int64_t drafts_allowed(const Sequence& seq, int64_t k_step, int64_t max_length);

class DraftRunner {
 public:
  static constexpr int64_t kMaxDeferredRows = 256;

  // draft_to_target: [n_draft_vocab] for a reduced-vocabulary head, empty otherwise.
  DraftRunner(DraftHead& head, Scheduler& scheduler, std::vector<int64_t> draft_to_target, const SpecOptions& spec,
              int64_t max_length);

  // plan[i] ran rows starting at target row row_begin[i]; new_positions[i] of them stay in its cache
  // (0: the sequence ended or failed this step, no head rows). k_step: drafts per decoding sequence this
  // step (fewer near max_tokens or the max length).
  void propose(std::span<const ScheduledRows> plan, std::span<const int64_t> row_begin,
               std::span<const int64_t> new_positions, const ForwardOutput& target_out, int64_t k_step);

  // seq's pending tree when its drafts are a tree (null for a chain or no drafts).
  PendingTree* tree(const Sequence& seq);
  // Whether seq drafts trees: trees are on and its request has no penalties, structured output, relaxed
  // or synthetic acceptance (spec/tree_verify.h verifies greedy and sampled trees).
  bool drafts_tree(const Sequence& seq) const;
  void forget(uint64_t id) { trees_.erase(id); }

 private:
  // K = 0: keeps the new rows' target features with each sequence instead of running the head.
  void defer(std::span<const ScheduledRows> plan, std::span<const int64_t> row_begin,
             std::span<const int64_t> new_positions, const ForwardOutput& target_out);
  void pick(Sequence& seq, const float* logits, int64_t i);
  // The tree passes after pass 0 for the sequences in trees_now_ (their root expanded), then their drafts.
  void propose_trees();

  DraftHead& head_;
  Scheduler& scheduler_;
  std::vector<int64_t> draft_to_target_;
  SpecOptions spec_;
  int64_t max_length_;

  // Per-step buffers, reused.
  std::vector<float> gathered_;          // features of the pass's rows, per part [n_rows, width]
  std::vector<const float*> parts_;
  std::vector<int64_t> ids_, logit_rows_;
  std::vector<int64_t> prev_ids_;        // per sequence of a pass: the token before its first row
  std::vector<SequenceRows> rows_;
  std::vector<Sequence*> drafting_;      // sequences that draft this step
  std::vector<int64_t> drafting_k_;      // their K (a tree's depth)
  std::vector<char> drafting_tree_;      // whether each drafts a tree
  std::vector<float> self_features_;     // [n drafting, n_embd_head] each one's last head feature
  std::vector<size_t> active_;           // drafting sequences in the current own-feature pass
  // Trees: per tree sequence drafting this step (index t), reused.
  struct TreeWork {
    Sequence* seq = nullptr;
    int64_t depth = 0;              // levels this round
    int64_t head_length = 0;        // the head's cache at the root (the run nodes' rows follow it)
    DraftTreeBuilder builder;
    std::vector<float> root_feature;  // [n_embd_head] the head's feature at the root row
    std::vector<int32_t> run_nodes;   // builder nodes run as rows so far, in row order
    std::vector<int32_t> row_of_node; // [builder nodes] row in run_nodes, -1 if not run
    std::vector<float> features;      // [run_nodes, n_embd_head] each run node's output feature
    std::vector<int32_t> tree_parent; // [run_nodes] the parent row of each run node (SequenceRows::tree_parent)
    size_t n_frontier = 0;            // the last pass's frontier: the final run_nodes
  };
  std::vector<TreeWork> tree_work_;
  size_t trees_now_ = 0;                    // tree_work_[0, trees_now_) draft this step
  std::unordered_map<uint64_t, PendingTree> trees_;  // by Sequence::id
  std::vector<int64_t> tree_tokens_;
  std::vector<int32_t> tree_parents_;
  SamplerScratch sampler_scratch_;
  ConstraintScratch constraint_scratch_;
};

}  // namespace aerie
