#include "engine/draft_runner.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "engine/finite_logits.h"
#include "ops/ops.h"

namespace aerie {

DraftRunner::DraftRunner(DraftHead& head, Scheduler& scheduler, std::vector<int64_t> draft_to_target,
                         const SpecOptions& spec, int64_t max_length)
    : head_(head), scheduler_(scheduler), draft_to_target_(std::move(draft_to_target)), spec_(spec),
      max_length_(max_length) {}

int64_t drafts_allowed(const Sequence& seq, int64_t k_step, int64_t max_length) {
  if (seq.draft_limit >= 0) k_step = std::min(k_step, seq.draft_limit);  // K chosen for it (engine/adaptive_k.h)
  const int64_t remaining = seq.options.max_tokens - seq.n_generated();
  const int64_t room = max_length - seq.n_computed - 1;
  return std::max<int64_t>(0, std::min({k_step, remaining - 1, room}));
}

bool DraftRunner::drafts_tree(const Sequence& seq) const {
  // Greedy or sampled (spec/tree_verify.h); not the synthetic acceptance of speed tests.
  return spec_.tree.enabled() && accept_rule(seq.options.sampling, spec_, true) != AcceptRule::kSynthetic &&
         !seq.constraint && !seq.options.penalties.active() && !spec_.relaxed_thinking;
}

PendingTree* DraftRunner::tree(const Sequence& seq) {
  if (seq.drafts.empty()) return nullptr;
  const auto it = trees_.find(seq.id);
  return it != trees_.end() && it->second.row_parent.size() == seq.drafts.size() + 1 ? &it->second : nullptr;
}

void DraftRunner::pick(Sequence& seq, const float* logits, int64_t i) {
  const int64_t vd = head_.n_vocab();
  // A broken head's NaN would reach the output through the rejection rule's residual max(0, p - q).
  check_finite_logits(logits, 1, vd);
  if (seq.constraint) {
    // Structured output: the head proposes only what the constraint allows after the previous drafts.
    if (i == 0 || !seq.draft_constraint) seq.draft_constraint = seq.constraint->clone();
    logits = mask_draft_logits(*seq.draft_constraint, logits, vd, draft_to_target_, constraint_scratch_);
  }
  int64_t d;
  if (accept_rule(seq.options.sampling, spec_, true) == AcceptRule::kRejection) {
    float* q = seq.q.data() + i * vd;
    compute_probs(logits, vd, seq.options.sampling, q, sampler_scratch_);
    d = sample_from_probs(q, vd, seq.rng);
  } else {
    d = ops::argmax(logits, vd);
  }
  seq.draft_ids[size_t(i)] = d;
  seq.drafts[size_t(i)] = draft_to_target_.empty() ? d : draft_to_target_[size_t(d)];
  if (seq.draft_constraint) seq.draft_constraint->accept(seq.drafts[size_t(i)]);
}

void DraftRunner::defer(std::span<const ScheduledRows> plan, std::span<const int64_t> row_begin,
                        std::span<const int64_t> new_positions, const ForwardOutput& target_out) {
  const size_t n_parts = target_out.hidden.size();
  const int64_t width = target_out.n_embd;
  const size_t row_floats = n_parts * size_t(width);
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& seq = *plan[i].seq;
    const int64_t rows = new_positions[i];
    if (rows == 0 || seq.speculation_off) continue;
    if (seq.deferred_rows + rows > kMaxDeferredRows) {
      // Too far behind to catch up cheaply: this sequence decodes plainly from now on.
      seq.speculation_off = true;
      seq.deferred_rows = 0;
      seq.deferred_features.clear();
      continue;
    }
    if (seq.deferred_features.capacity() == 0) seq.deferred_features.reserve(size_t(kMaxDeferredRows) * row_floats);
    seq.deferred_features.resize(size_t(seq.deferred_rows + rows) * row_floats);
    for (int64_t r = 0; r < rows; ++r)
      for (size_t j = 0; j < n_parts; ++j)
        std::memcpy(seq.deferred_features.data() + size_t(seq.deferred_rows + r) * row_floats + j * size_t(width),
                    target_out.hidden[j].data + (row_begin[i] + r) * width, size_t(width) * sizeof(float));
    seq.deferred_rows += rows;
  }
}

void DraftRunner::propose(std::span<const ScheduledRows> plan, std::span<const int64_t> row_begin,
                          std::span<const int64_t> new_positions, const ForwardOutput& target_out, int64_t k_step) {
  if (k_step == 0) return defer(plan, row_begin, new_positions, target_out);
  const size_t n_parts = target_out.hidden.size();
  const int64_t width = target_out.n_embd;
  const size_t row_floats = n_parts * size_t(width);
  int64_t m = 0;
  for (size_t i = 0; i < plan.size(); ++i)
    if (new_positions[i] > 0 && !plan[i].seq->speculation_off) m += plan[i].seq->deferred_rows + new_positions[i];
  if (m == 0) return;
  gathered_.resize(size_t(m) * row_floats);
  parts_.resize(n_parts);
  for (size_t j = 0; j < n_parts; ++j) parts_[j] = gathered_.data() + j * size_t(m * width);
  ids_.clear();
  prev_ids_.clear();
  rows_.clear();
  logit_rows_.clear();
  drafting_.clear();
  drafting_k_.clear();
  drafting_tree_.clear();
  trees_now_ = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& seq = *plan[i].seq;
    if (new_positions[i] == 0 || seq.speculation_off) continue;
    // Rows: the deferred ones (steps at K = 0), then this step's.
    const int64_t deferred = seq.deferred_rows, rows = deferred + new_positions[i];
    const int64_t hb = int64_t(ids_.size());
    const int64_t start = seq.n_computed - rows;  // target position of the first row
    const auto verified = trees_.find(seq.id);
    const std::vector<int64_t>* kept =
        verified != trees_.end() && !verified->second.kept.empty() ? &verified->second.kept : nullptr;
    AERIE_CHECK(kept == nullptr || int64_t(kept->size()) >= new_positions[i], "draft runner: ", new_positions[i],
                " new positions after a tree verification that kept ", kept ? kept->size() : 0, " rows");
    for (int64_t r = 0; r < rows; ++r) ids_.push_back(seq.tokens[size_t(start + r + 1)]);
    for (size_t j = 0; j < n_parts; ++j) {
      float* dst = gathered_.data() + j * size_t(m * width) + size_t(hb * width);
      for (int64_t r = 0; r < deferred; ++r)
        std::memcpy(dst + r * width, seq.deferred_features.data() + size_t(r) * row_floats + j * size_t(width),
                    size_t(width) * sizeof(float));
      if (kept == nullptr) {
        std::memcpy(dst + deferred * width, target_out.hidden[j].data + row_begin[i] * width,
                    size_t(new_positions[i] * width) * sizeof(float));
        continue;
      }
      // A verified tree: the accepted path's rows, not consecutive in the target's batch.
      for (int64_t r = 0; r < new_positions[i]; ++r)
        std::memcpy(dst + (deferred + r) * width, target_out.hidden[j].data + (row_begin[i] + (*kept)[size_t(r)]) * width,
                    size_t(width) * sizeof(float));
    }
    rows_.push_back(SequenceRows{hb, rows, &*seq.draft_kv});
    prev_ids_.push_back(seq.tokens[size_t(start)]);
    const bool tree = drafts_tree(seq);
    // A tree's depth bounds its accepted path as K bounds a chain's.
    const int64_t k = seq.prefilling() ? 0 : drafts_allowed(seq, tree ? spec_.tree.depth : k_step, max_length_);
    if (k > 0) {
      logit_rows_.push_back(hb + rows - 1);
      drafting_.push_back(&seq);
      drafting_k_.push_back(k);
      drafting_tree_.push_back(tree);
      if (tree) continue;
      seq.drafts.resize(size_t(k));
      seq.draft_ids.resize(size_t(k));
      if (accept_rule(seq.options.sampling, spec_, true) == AcceptRule::kRejection)
        seq.q.resize(size_t(k * head_.n_vocab()));
    }
  }
  const DraftOutput first = head_.forward(DraftBatch{ids_, FeatureSource::kTarget, parts_, rows_, logit_rows_, prev_ids_});
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& seq = *plan[i].seq;
    if (new_positions[i] == 0 || seq.speculation_off) continue;
    seq.deferred_rows = 0;  // in the head's cache now
    scheduler_.register_draft_blocks(seq);
  }
  const int64_t hd = first.n_embd, vd = first.n_vocab;
  self_features_.resize(drafting_.size() * size_t(hd));
  for (size_t d = 0; d < drafting_.size(); ++d) {
    Sequence& seq = *drafting_[d];
    if (drafting_tree_[d]) {  // the root's children; the tree's passes follow the chains'
      if (tree_work_.size() == trees_now_) tree_work_.emplace_back();
      TreeWork& t = tree_work_[trees_now_++];
      t.seq = &seq;
      t.depth = drafting_k_[d];
      t.head_length = seq.draft_kv->length();
      t.builder.reset(spec_.tree.top_k);
      check_finite_logits(first.logits + int64_t(d) * vd, 1, vd);
      t.builder.expand(-1, first.logits + int64_t(d) * vd, vd);
      t.root_feature.assign(first.features + logit_rows_[d] * hd, first.features + (logit_rows_[d] + 1) * hd);
      drafting_k_[d] = 0;  // no chain passes
      continue;
    }
    if (const auto stale = trees_.find(seq.id); stale != trees_.end()) stale->second.row_parent.clear();
    pick(seq, first.logits + int64_t(d) * vd, 0);
    std::memcpy(self_features_.data() + d * size_t(hd), first.features + logit_rows_[d] * hd,
                size_t(hd) * sizeof(float));
  }
  // Further draft steps: one row per sequence still drafting, on the head's own features.
  const int64_t max_k = drafting_k_.empty() ? 0 : *std::max_element(drafting_k_.begin(), drafting_k_.end());
  for (int64_t step = 1; step < max_k; ++step) {
    ids_.clear();
    prev_ids_.clear();
    rows_.clear();
    logit_rows_.clear();
    active_.clear();
    gathered_.resize(drafting_.size() * size_t(hd));
    for (size_t d = 0; d < drafting_.size(); ++d) {
      if (drafting_k_[d] <= step) continue;
      const int64_t r = int64_t(ids_.size());
      const Sequence& seq = *drafting_[d];
      ids_.push_back(seq.drafts[size_t(step - 1)]);
      prev_ids_.push_back(step == 1 ? seq.tokens[size_t(seq.n_computed)] : seq.drafts[size_t(step - 2)]);
      std::memcpy(gathered_.data() + size_t(r * hd), self_features_.data() + d * size_t(hd), size_t(hd) * sizeof(float));
      rows_.push_back(SequenceRows{r, 1, &*drafting_[d]->draft_kv});
      logit_rows_.push_back(r);
      active_.push_back(d);
    }
    const float* part = gathered_.data();
    const DraftOutput out = head_.forward(DraftBatch{ids_, FeatureSource::kSelf, std::span(&part, 1), rows_, logit_rows_, prev_ids_});
    for (size_t r = 0; r < active_.size(); ++r) {
      const size_t d = active_[r];
      pick(*drafting_[d], out.logits + int64_t(r) * vd, step);
      std::memcpy(self_features_.data() + d * size_t(hd), out.features + int64_t(r) * hd, size_t(hd) * sizeof(float));
    }
  }
  if (trees_now_ > 0) propose_trees();
  // The verified trees' rows are in the head's cache now (kept until here: a failed pass is retried).
  for (const ScheduledRows& r : plan)
    if (const auto verified = trees_.find(r.seq->id); verified != trees_.end()) verified->second.kept.clear();
}

void DraftRunner::propose_trees() {
  const int64_t hd = head_.n_embd();
  int64_t max_depth = 0;
  for (size_t t = 0; t < trees_now_; ++t) {
    TreeWork& w = tree_work_[t];
    max_depth = std::max(max_depth, w.depth);
    w.run_nodes.clear();
    w.features.clear();
  }
  auto to_target = [this](int64_t draft_id) {
    return draft_to_target_.empty() ? draft_id : draft_to_target_[size_t(draft_id)];
  };
  for (int64_t level = 1; level < max_depth; ++level) {
    ids_.clear();
    prev_ids_.clear();
    rows_.clear();
    logit_rows_.clear();
    active_.clear();
    for (size_t t = 0; t < trees_now_; ++t) {
      TreeWork& w = tree_work_[t];
      if (w.depth <= level) continue;
      const std::span<const int32_t> frontier = w.builder.next_frontier();
      // The nodes run so far stay in the head's cache (rows after the root, in run order): this pass runs
      // only the frontier as new tree rows on top of them.
      const int64_t n_cached = int64_t(w.run_nodes.size());
      if (n_cached == 0) w.seq->draft_kv->truncate(w.head_length, /*keep_blocks=*/true);  // a retried step's rows
      w.run_nodes.insert(w.run_nodes.end(), frontier.begin(), frontier.end());
      w.n_frontier = frontier.size();
      const auto& nodes = w.builder.nodes();
      if (n_cached == 0) w.row_of_node.clear();  // nodes only grow within a round
      w.row_of_node.resize(nodes.size(), -1);
      for (size_t r = size_t(n_cached); r < w.run_nodes.size(); ++r) w.row_of_node[size_t(w.run_nodes[r])] = int32_t(r);
      // The frontier's rows: each one's parent row (over every run node), token and input feature (its
      // parent's output feature, the root's for the root's children).
      const int64_t hb = int64_t(ids_.size()), n = int64_t(w.run_nodes.size()), n_new = n - n_cached;
      w.tree_parent.resize(size_t(n));
      gathered_.resize(size_t((hb + n_new) * hd));
      for (int64_t r = n_cached; r < n; ++r) {
        const DraftTreeBuilder::Node& node = nodes[size_t(w.run_nodes[size_t(r)])];
        const int32_t parent_row = node.parent < 0 ? -1 : w.row_of_node[size_t(node.parent)];
        w.tree_parent[size_t(r)] = parent_row;
        ids_.push_back(to_target(node.token));
        const float* feature = parent_row < 0 ? w.root_feature.data() : w.features.data() + parent_row * hd;
        std::memcpy(gathered_.data() + (hb + r - n_cached) * hd, feature, size_t(hd) * sizeof(float));
        logit_rows_.push_back(hb + r - n_cached);
      }
      prev_ids_.push_back(w.seq->tokens.back());
      rows_.push_back(SequenceRows{hb, n_new, &*w.seq->draft_kv, w.tree_parent.data(), n_cached});
      active_.push_back(t);
    }
    const float* part = gathered_.data();
    const DraftOutput out =
        head_.forward(DraftBatch{ids_, FeatureSource::kSelf, std::span(&part, 1), rows_, logit_rows_, prev_ids_});
    check_finite_logits(out.logits, out.n_logit_rows, out.n_vocab);
    int64_t logit_row = 0;
    for (size_t a = 0; a < active_.size(); ++a) {
      TreeWork& w = tree_work_[active_[a]];
      const int64_t n_new = rows_[a].n_rows, n = int64_t(w.run_nodes.size());
      w.features.insert(w.features.end(), out.features + rows_[a].row_begin * hd,
                        out.features + (rows_[a].row_begin + n_new) * hd);
      for (int64_t r = n - n_new; r < n; ++r, ++logit_row)
        w.builder.expand(w.run_nodes[size_t(r)], out.logits + logit_row * out.n_vocab, out.n_vocab);
    }
  }
  for (size_t t = 0; t < trees_now_; ++t) {
    TreeWork& w = tree_work_[t];
    Sequence& seq = *w.seq;
    w.builder.select(spec_.tree.total_tokens, tree_tokens_, tree_parents_);
    seq.draft_ids.assign(tree_tokens_.begin(), tree_tokens_.end());
    seq.drafts.resize(tree_tokens_.size());
    for (size_t i = 0; i < tree_tokens_.size(); ++i) seq.drafts[i] = to_target(tree_tokens_[i]);
    PendingTree& pending = trees_[seq.id];
    pending.row_parent.resize(tree_parents_.size() + 1);
    pending.row_parent[0] = -1;  // the root: the last token
    for (size_t i = 0; i < tree_parents_.size(); ++i) pending.row_parent[i + 1] = tree_parents_[i] + 1;
    pending.kept.clear();
  }
}

}  // namespace aerie
