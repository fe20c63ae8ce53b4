#include "engine/adaptive_k.h"

#include <algorithm>

#include "engine/draft_runner.h"

namespace aerie {

namespace {
constexpr double kEngineWideDecay = 0.98;  // per round of any sequence: ~50 rounds of memory
}  // namespace

AdaptiveK::AdaptiveK(int64_t k_max, int64_t max_rows, int64_t max_length)
    : k_max_(std::min(k_max, kMaxAdaptiveK)), max_length_(max_length), costs_(max_rows) {}

void AdaptiveK::observe_round(Sequence& seq, int64_t n_drafts, int64_t n_accepted) {
  states_[seq.id].acceptance.observe(n_drafts, n_accepted);
  engine_wide_.observe(n_drafts, n_accepted, kEngineWideDecay);
}

bool AdaptiveK::any_probe(std::span<const ScheduledRows> plan) const {
  for (const ScheduledRows& r : plan) {
    const auto it = states_.find(r.seq->id);
    if (it != states_.end() && it->second.probe) return true;
  }
  return false;
}

void AdaptiveK::observe_forward(std::span<const ScheduledRows> plan, int64_t rows, double seconds) {
  if (!costs_.measured(rows) || !any_probe(plan)) costs_.observe_forward(rows, seconds);
}

void AdaptiveK::observe_draft(int64_t passes, double seconds, bool prompt_rows, int64_t deferred_rows) {
  if (passes == 0 || prompt_rows) return;
  if (deferred_rows > 0) costs_.observe_catch_up(deferred_rows, seconds);
  else costs_.observe_draft_pass(seconds / double(passes));
}

int64_t AdaptiveK::choose(std::span<const ScheduledRows> plan, std::span<const StepResult> results) {
  seqs_.clear();
  seq_states_.clear();
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& seq = *plan[i].seq;
    seq.draft_limit = -1;  // drafts_allowed() below without this step's choice
    const StepResult& r = results[i];
    if (r.finish == FinishReason::kNone && r.n_new_positions > 0 && !seq.prefilling() && !seq.speculation_off) {
      seqs_.push_back(&seq);
      seq_states_.push_back(&states_[seq.id]);  // made on a sequence's first decode step
    }
  }
  const size_t n = seqs_.size();
  rates_.resize(n * size_t(k_max_));
  spans_.resize(n);
  k_.resize(n);
  double prior0 = AcceptanceEstimate::kPriorAcceptance;
  engine_wide_.rates(prior0, std::span(&prior0, 1));
  for (size_t s = 0; s < n; ++s) {
    const int64_t allowed = drafts_allowed(*seqs_[s], k_max_, max_length_);
    const std::span<double> out(rates_.data() + s * size_t(k_max_), size_t(allowed));
    seq_states_[s]->acceptance.rates(prior0, out);
    spans_[s] = out;
  }
  // Uncalibrated: plain until a step is timed, then probes (one draft) until a verification is timed too.
  const bool calibrated = costs_.n_measured() >= 2;
  if (calibrated) choose_draft_tokens(spans_, costs_, k_, gains_);
  else std::fill(k_.begin(), k_.end(), 0);
  // Probing's price per plain step: one caught-up head row, against a plain step's share of the forward.
  const double probe_overhead = n > 0 && costs_.catch_up_row() > 0
                                    ? costs_.catch_up_row() / (costs_.forward(int64_t(n)) / double(n))
                                    : 0.0;
  int64_t k_step = 0;
  for (size_t s = 0; s < n; ++s) {
    AdaptiveKState& state = *seq_states_[s];
    state.k = costs_.n_measured() > 0 ? apply_probe(state, k_[s], int64_t(spans_[s].size())) : 0;
    if (state.probe && state.probes > AdaptiveKState::kMinProbes && probe_overhead > AdaptiveKState::kMaxProbeOverhead) {
      seqs_[s]->speculation_off = true;  // probing costs more than it could find: plain from now on
      state.k = 0, state.probe = false;
    }
    seqs_[s]->draft_limit = state.k;
    k_step = std::max(k_step, state.k);
  }
  return k_step;
}

}  // namespace aerie
