// HeadProposer: a draft head's passes of one engine step (spec/proposer.h), batched over the sequences
// that ran: one pass over every sequence's new rows with the target's features (the rows whose tokens
// stay: a prompt chunk, or the accepted drafts and the target's token), which proposes each drafting
// sequence's first draft; then K - 1 passes of one row per sequence still drafting, on the head's own
// features.
//
// At step K = 0 (DraftTokensByBatchSize at a large batch, or adaptive K) no head pass runs: the target
// features of the new rows are kept in the sequence's state and go into the head's next pass, so its cache
// catches up in one pass when drafting resumes. A sequence more than kMaxDeferredRows behind gives up
// (SequenceProposal::gave_up) and decodes plainly from then on.
//
// Worked example, two sequences after verification: A accepted 1 draft (rows [f_P d1 | f_P+1 y] to the
// head), B finished a prompt chunk of 3 rows; K = 3 for A, 0 for B (still prefilling):
//   pass 0 (target features): rows [A: 2 | B: 3], logits of A's last row -> A.d'1
//   pass 1 (own features):    rows [A: (g, d'1)] -> A.d'2
//   pass 2 (own features):    rows [A: (g, d'2)] -> A.d'3
//
// Draft trees (ProposalRow::tree, spec/draft_tree.h): pass 0 as above gives the root's children; each
// further pass runs, per tree sequence, only the new frontier as tree rows (SequenceRows::tree_parent) on
// top of the nodes run by the earlier passes, which stay in the head's cache after the root
// (SequenceRows::tree_cached), so that each row sees the prefix and its own ancestors only; the frontier's
// logits add the next level: top_k rows a pass. The tree's best nodes become the sequence's drafts, with
// the parent rows the target verifies them with (SequenceProposal::tree_parent).
//   tree pass at level 2, top_k 2: cached rows [a b] (the level-1 frontier), new rows [c d] (children of a),
//   tree_parent [-1 -1 0 0], tree_cached 2, features [g_a g_a], logits of rows c and d.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/constraint_mask.h"
#include "sample/sampling.h"
#include "spec/draft_head.h"
#include "spec/draft_tree.h"
#include "spec/proposer.h"

namespace aerie {

class HeadProposer : public Proposer {
 public:
  static constexpr int64_t kMaxDeferredRows = 256;

  // Checks that the head's vocabulary maps into the target's.
  HeadProposer(DraftHead& head, const ProposerConfig& config);

  std::string describe() const override { return head_.describe(); }
  std::unique_ptr<ProposerState> start(int64_t capacity) const override;
  void restart(ProposerState& state) const override;
  int64_t deferred_rows(const ProposerState& state) const override;
  void propose(const ProposalInput& in, std::span<SequenceProposal> out) override;

  std::optional<KvCache> make_kv_cache(int64_t capacity, KvDType dtype) const override {
    return head_.make_kv_cache(capacity, dtype);
  }
  const std::vector<int>& target_layers() const override { return head_.target_layers(); }
  int64_t n_draft_vocab() const override { return head_.n_vocab(); }
  std::span<const int64_t> draft_to_target() const override { return draft_to_target_; }
  bool drafts_trees() const override { return head_.takes_tree_rows(); }
  bool one_hot() const override { return false; }

 private:
  struct State;
  static State& state_of(const ProposalRow& row);
  // Step K = 0: keeps the new rows' target features in each state instead of running the head.
  void defer(const ProposalInput& in, std::span<SequenceProposal> out);
  void pick(const ProposalRow& row, State& state, SequenceProposal& out, const float* logits, int64_t i);
  // The tree passes after pass 0 for the sequences in tree_work_[0, trees_now_) (their root expanded),
  // then their drafts.
  void propose_trees(std::span<SequenceProposal> out);
  struct TreeWork;
  // Adds the children of builder node `node` (-1: the root) from its row of head logits [n_vocab]: the
  // top_k, or for a sampled row top_k draws (their distribution kept for the verifier).
  void expand(TreeWork& w, int32_t node, const float* logits, int64_t n_vocab);
  // The tree's best nodes as the sequence's drafts, with their row parents (and, sampled, the q of each
  // row that has children).
  void finish_tree(TreeWork& w, SequenceProposal& out);
  // Whether the tree's scores are learned by rank (sampled trees always; greedy ones unless
  // DraftTreeShape::score is kConfidence).
  bool learned(const TreeWork& w) const;
  // What the verification of the sequence's last sampled tree (its row parents in `state`) tells of each
  // draw index: `path` is the verified rows, the root first (ProposalRow::feature_path).
  void observe_tree(State& state, std::span<const int64_t> path);
  int64_t to_target(int64_t draft_id) const {
    return draft_to_target_.empty() ? draft_id : draft_to_target_[size_t(draft_id)];
  }

  DraftHead& head_;
  std::vector<int64_t> draft_to_target_;
  SpecOptions spec_;
  int64_t deferred_row_floats_;  // a held-back row's target features: its parts times the target's width

  // Per-step buffers, reused.
  std::vector<float> gathered_;          // features of the pass's rows, per part [n_rows, width]
  std::vector<const float*> parts_;
  std::vector<int64_t> ids_, logit_rows_;
  std::vector<int64_t> prev_ids_;        // per sequence of a pass: the token before its first row
  std::vector<SequenceRows> rows_;
  std::vector<size_t> drafting_;         // rows (of the input) that draft this step
  std::vector<int64_t> drafting_k_;      // their K (0 once a tree's chain passes are done)
  std::vector<float> self_features_;     // [n drafting, n_embd_head] each one's last head feature
  std::vector<size_t> active_;           // drafting sequences in the current own-feature pass
  // Trees: per tree sequence drafting this step (index t), reused.
  struct TreeWork {
    size_t row = 0;                 // its ProposalRow
    int64_t depth = 0;              // levels this round
    int64_t head_length = 0;        // the head's cache at the root (the run nodes' rows follow it)
    KvCache* cache = nullptr;
    int64_t last_token = 0;
    const ProposalRow* row_in = nullptr;  // its ProposalRow (sampled: children drawn with its sampling and rng)
    DraftTreeBuilder builder;
    std::vector<double> values;       // learned scores: each rank's value this round (DrawAcceptance::log_values)
    double floor = -1e300;            // learned scores: learned_floor of `values` (set once per round)
    std::vector<float> qs;            // sampled: [expanded nodes, n_vocab] the distributions drawn from
    std::vector<int32_t> q_slot;      // sampled: [1 + builder nodes] row of qs of the root (0) and each node, -1 if none
    std::vector<float> root_feature;  // [n_embd_head] the head's feature at the root row
    std::vector<int32_t> run_nodes;   // builder nodes run as rows so far, in row order
    std::vector<int32_t> row_of_node; // [builder nodes] row in run_nodes, -1 if not run
    std::vector<float> features;      // [run_nodes, n_embd_head] each run node's output feature
    std::vector<int32_t> tree_parent; // [run_nodes] the parent row of each run node (SequenceRows::tree_parent)
  };
  std::vector<TreeWork> tree_work_;
  size_t trees_now_ = 0;                    // tree_work_[0, trees_now_) draft this step
  std::vector<int64_t> tree_tokens_;
  std::vector<int32_t> tree_parents_, tree_kept_;
  SamplerScratch sampler_scratch_;
  ConstraintScratch constraint_scratch_;
};

}  // namespace aerie
