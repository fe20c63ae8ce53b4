#include "engine/metrics.h"

#include <algorithm>

namespace aerie {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0), exemplars_(bounds_.size() + 1) {}

std::vector<double> Histogram::default_latency_bounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2.5, 5, 10, 30, 60};
}

std::vector<double> Histogram::one_two_five_bounds(int64_t max) {
  std::vector<double> out;
  for (int64_t scale = 1; scale <= max; scale *= 10)
    for (int64_t step : {1, 2, 5})
      if (step * scale <= max) out.push_back(double(step * scale));
  return out;
}

void Histogram::observe(double value) { observe(value, RequestLabel(), 0); }

void Histogram::observe(double value, const RequestLabel& label, double unix_seconds) {
  const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[i];
  ++count_;
  sum_ += value;
  if (!label.empty()) exemplars_[i] = Exemplar{label, value, unix_seconds};
}

double Histogram::quantile(double q) const {
  if (count_ == 0) return 0.0;
  const double target = q * double(count_);
  double seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i] == 0) continue;
    if (seen + double(counts_[i]) >= target) {
      const double lo = i == 0 ? 0.0 : bounds_[i - 1];
      const double hi = i < bounds_.size() ? bounds_[i] : bounds_.back() * 2;
      return lo + (hi - lo) * (target - seen) / double(counts_[i]);
    }
    seen += double(counts_[i]);
  }
  return bounds_.back();
}

void StepStats::clear() {
  worked = ran = false;
  submitted = submitted_prompt_tokens = preemptions = prefilled_tokens = generated_tokens = 0;
  std::fill(attention_rows_per_rank.begin(), attention_rows_per_rank.end(), 0);
  draft_tokens.clear();
  // Zero counts, sizes kept (SpecStats::record grows them to the longest chain once).
  spec.rounds = spec.draft_tokens = spec.accepted_tokens = spec.relaxed_accepted = spec.plain_rounds = 0;
  std::fill(spec.proposed_at.begin(), spec.proposed_at.end(), 0);
  std::fill(spec.accepted_at.begin(), spec.accepted_at.end(), 0);
  time_to_first_token.clear();
  inter_token_latency.clear();
  finished.clear();
}

void EngineMetrics::record(const StepStats& step, double now) {
  requests_submitted += step.submitted;
  prompt_tokens += step.submitted_prompt_tokens;
  preemptions += step.preemptions;
  prefilled_tokens += step.prefilled_tokens;
  generated_tokens += step.generated_tokens;
  if (step.ran) ++steps;
  for (size_t r = 0; r < step.attention_rows_per_rank.size() && r < attention_rows_per_rank.size(); ++r)
    attention_rows_per_rank[r] += step.attention_rows_per_rank[r];
  for (int64_t k : step.draft_tokens) draft_tokens_per_step.observe(double(k));
  spec.add(step.spec);
  for (const Observation& o : step.time_to_first_token) time_to_first_token.observe(o.value, o.label, now);
  for (const Observation& o : step.inter_token_latency) inter_token_latency.observe(o.value, o.label, now);
  std::copy(step.lora_running.begin(), step.lora_running.end(), lora_running.begin());
  std::copy(step.lora_waiting.begin(), step.lora_waiting.end(), lora_waiting.begin());
  for (const FinishedRequest& f : step.finished) {
    cached_prompt_tokens += f.cached_prompt_tokens;
    if (f.adapter >= 0 && size_t(f.adapter) < lora_requests_ended.size()) ++lora_requests_ended[size_t(f.adapter)];
    if (f.reason == FinishReason::kCancelled) {
      ++requests_cancelled;
      continue;
    }
    if (f.reason == FinishReason::kError) {
      ++requests_failed;
      continue;
    }
    ++requests_finished;
    ++(f.reason == FinishReason::kStop ? finished_stop : finished_length);
    request_queue_time.observe(f.queue, f.label, now);
    request_prefill_time.observe(f.prefill, f.label, now);
    request_decode_time.observe(f.decode, f.label, now);
    request_inference_time.observe(f.inference, f.label, now);
    e2e_request_latency.observe(f.e2e, f.label, now);
    if (f.time_per_output_token >= 0) time_per_output_token.observe(f.time_per_output_token, f.label, now);
    request_prompt_tokens.observe(double(f.prompt_tokens), f.label, now);
    request_generation_tokens.observe(double(f.generated_tokens), f.label, now);
  }
  running = step.running;
  waiting = step.waiting;
  kv_blocks_in_use = step.kv_blocks_in_use;
  kv_blocks_cached = step.kv_blocks_cached;
  prefix_block_lookups = step.prefix_block_lookups;
  prefix_block_hits = step.prefix_block_hits;
  kv_disk = step.kv_disk;
}

}  // namespace aerie
