#include "engine/adaptive_k.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "engine/draft_runner.h"

namespace aerie {

namespace {
constexpr double kEngineWideDecay = 0.98;  // per round of any sequence: ~50 rounds of memory

// AERIE_TRACE_ADAPTIVE_K=1: one stderr line per choice (the cost table up to the rows the step could use,
// the first sequence's rates, every K chosen) to see why auto picks what it picks.
bool tracing() {
  static const bool on = [] {
    const char* env = std::getenv("AERIE_TRACE_ADAPTIVE_K");
    return env != nullptr && *env != '\0' && *env != '0';
  }();
  return on;
}

void trace_choice(const StepCosts& costs, std::span<const std::span<const double>> rates,
                  std::span<AdaptiveKState* const> states, std::span<const int64_t> chosen) {
  const int64_t n = int64_t(rates.size());
  int64_t most = n;
  for (const auto& r : rates) most += int64_t(r.size());
  std::fprintf(stderr, "adaptive-k: seqs %lld | forward ms by rows:", (long long)n);
  for (int64_t rows = 1; rows <= most; ++rows)
    std::fprintf(stderr, " %lld%s=%.3f", (long long)rows, costs.measured(rows) ? "" : "~", 1e3 * costs.forward(rows));
  std::fprintf(stderr, " | drafter ms by passes%s:", costs.draft_measured() ? "" : "~");
  for (int64_t passes = 1; passes < most - n + 1 && passes <= kMaxAdaptiveK; ++passes)
    std::fprintf(stderr, " %lld=%.3f", (long long)passes, 1e3 * costs.draft(passes));
  std::fprintf(stderr, " | catch-up row %.3f ms | rates0", 1e3 * costs.catch_up_row());
  if (n > 0)
    for (double a : rates[0]) std::fprintf(stderr, " %.2f", a);
  std::fprintf(stderr, " | chosen");
  for (size_t s = 0; s < states.size(); ++s) std::fprintf(stderr, " %lld", (long long)chosen[s]);
  std::fprintf(stderr, " -> K");
  for (const AdaptiveKState* st : states) std::fprintf(stderr, " %lld%s", (long long)st->k, st->probe ? "p" : "");
  std::fprintf(stderr, "\n");
}
}  // namespace

AdaptiveK::AdaptiveK(int64_t k_max, int64_t max_rows, int64_t max_length, std::shared_ptr<AdaptiveKMemory> memory)
    : k_max_(std::min(k_max, kMaxAdaptiveK)),
      max_length_(max_length),
      memory_(memory ? std::move(memory) : std::make_shared<AdaptiveKMemory>(max_rows)),
      costs_(memory_->costs),
      engine_wide_(memory_->engine_wide) {}

void AdaptiveK::observe_round(Sequence& seq, int64_t n_drafts, int64_t n_accepted) {
  states_[seq.id].acceptance.observe(n_drafts, n_accepted);
  if (tracing()) std::fprintf(stderr, "adaptive-k: seq %llu round %lld/%lld accepted\n", (unsigned long long)seq.id, (long long)n_accepted, (long long)n_drafts);
  engine_wide_.observe(n_drafts, n_accepted, kEngineWideDecay);
}

void AdaptiveK::observe_forward(int64_t rows, double seconds) { costs_.observe_forward(rows, seconds); }

void AdaptiveK::observe_draft(int64_t passes, double seconds, bool prompt_rows, int64_t deferred_rows) {
  if (passes == 0 || prompt_rows) return;
  if (deferred_rows > 0) costs_.observe_catch_up(deferred_rows, seconds);
  else costs_.observe_draft(passes, seconds);
}

void AdaptiveK::choose_engine_wide() {
  // Every sequence of the step at the engine-wide rates (as long as its own), into wide_k_.
  const size_t n = spans_.size();
  wide_rates_.resize(size_t(k_max_));
  engine_wide_.rates(AcceptanceEstimate::kPriorAcceptance, wide_rates_);
  wide_spans_.resize(n);
  for (size_t s = 0; s < n; ++s) wide_spans_[s] = std::span<const double>(wide_rates_).first(spans_[s].size());
  wide_k_.resize(n);
  choose_draft_tokens(wide_spans_, costs_, wide_k_, gains_);
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
  // Uncalibrated: plain until a row count is trusted; from then on the choice, optimistic about the row
  // counts not yet timed (StepCosts::forward), so that it tries the K it would like and so times them.
  const bool calibrated = costs_.n_measured() >= 1;
  if (calibrated) choose_draft_tokens(spans_, costs_, k_, gains_);
  else std::fill(k_.begin(), k_.end(), 0);
  // Probing's price per plain step: one caught-up head row, against a plain step's share of the forward.
  const double probe_overhead = n > 0 && costs_.catch_up_row() > 0
                                    ? costs_.catch_up_row() / (costs_.forward(int64_t(n)) / double(n))
                                    : 0.0;
  // Where probing is dear, K = 0 is off for good when the engine-wide acceptance agrees (spec/adaptive_k.h).
  const bool dear_probes = calibrated && probe_overhead > AdaptiveKState::kMaxProbeOverhead;
  if (dear_probes) choose_engine_wide();
  int64_t k_step = 0;
  for (size_t s = 0; s < n; ++s) {
    AdaptiveKState& state = *seq_states_[s];
    // A sequence with evidence of its own, or a new one (whose head has not yet caught up its prompt) where
    // the engine has evidence from others.
    const int64_t evidence = state.acceptance.rounds == 0 ? engine_wide_.rounds : state.acceptance.rounds;
    if (dear_probes && k_[s] == 0 && wide_k_[s] == 0 && evidence >= AdaptiveKState::kMinEvidence) {
      seqs_[s]->speculation_off = true;  // probing costs more than it could find: plain from now on
      state.k = 0, state.probe = false;
    } else {
      state.k = calibrated ? apply_probe(state, k_[s], int64_t(spans_[s].size())) : 0;
    }
    seqs_[s]->draft_limit = state.k;
    k_step = std::max(k_step, state.k);
  }
  if (tracing()) trace_choice(costs_, spans_, seq_states_, k_);
  return k_step;
}

}  // namespace aerie
