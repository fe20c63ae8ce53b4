#include "engine/draft_runner.h"

#include <algorithm>
#include <cstring>

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
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& seq = *plan[i].seq;
    if (new_positions[i] == 0 || seq.speculation_off) continue;
    // Rows: the deferred ones (steps at K = 0), then this step's.
    const int64_t deferred = seq.deferred_rows, rows = deferred + new_positions[i];
    const int64_t hb = int64_t(ids_.size());
    const int64_t start = seq.n_computed - rows;  // target position of the first row
    for (int64_t r = 0; r < rows; ++r) ids_.push_back(seq.tokens[size_t(start + r + 1)]);
    for (size_t j = 0; j < n_parts; ++j) {
      float* dst = gathered_.data() + j * size_t(m * width) + size_t(hb * width);
      for (int64_t r = 0; r < deferred; ++r)
        std::memcpy(dst + r * width, seq.deferred_features.data() + size_t(r) * row_floats + j * size_t(width),
                    size_t(width) * sizeof(float));
      std::memcpy(dst + deferred * width, target_out.hidden[j].data + row_begin[i] * width,
                  size_t(new_positions[i] * width) * sizeof(float));
    }
    rows_.push_back(SequenceRows{hb, rows, &*seq.draft_kv});
    prev_ids_.push_back(seq.tokens[size_t(start)]);
    const int64_t k = seq.prefilling() ? 0 : drafts_allowed(seq, k_step, max_length_);
    if (k > 0) {
      logit_rows_.push_back(hb + rows - 1);
      drafting_.push_back(&seq);
      drafting_k_.push_back(k);
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
    pick(*drafting_[d], first.logits + int64_t(d) * vd, 0);
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
}

}  // namespace aerie
