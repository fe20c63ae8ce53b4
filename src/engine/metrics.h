// Engine metrics: counters and latency histograms (Prometheus-style cumulative buckets).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/step_stats.h"
#include "sched/spec_stats.h"

namespace aerie {

// The latest labelled observation of a histogram bucket (an OpenMetrics exemplar): which request, its
// value, and when (seconds since the Unix epoch).
struct Exemplar {
  RequestLabel label;
  double value = 0;
  double unix_seconds = 0;
};

class Histogram {
 public:
  // Upper bounds in seconds, ascending; an implicit +Inf bucket follows.
  explicit Histogram(std::vector<double> bounds = default_latency_bounds());
  void observe(double value);
  // The same, and with a label the bucket's exemplar becomes this observation.
  void observe(double value, const RequestLabel& label, double unix_seconds);
  int64_t count() const { return count_; }
  double sum() const { return sum_; }
  const std::vector<double>& bounds() const { return bounds_; }
  const std::vector<int64_t>& counts() const { return counts_; }  // per bucket (not cumulative), +Inf last
  // Per bucket as counts(); an empty label where no labelled observation fell.
  const std::vector<Exemplar>& exemplars() const { return exemplars_; }
  // Linear interpolation inside the bucket holding the q-quantile (0 when empty).
  double quantile(double q) const;
  static std::vector<double> default_latency_bounds();
  // 1, 2, 5, 10, 20, 50, ... up to `max` (token counts per request, as vLLM buckets them).
  static std::vector<double> one_two_five_bounds(int64_t max);

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;
  std::vector<Exemplar> exemplars_;
  int64_t count_ = 0;
  double sum_ = 0;
};

struct EngineMetrics {
  int64_t waiting = 0, running = 0;
  int64_t kv_blocks_total = 0, kv_blocks_in_use = 0, kv_blocks_cached = 0;
  int64_t prefix_block_lookups = 0, prefix_block_hits = 0;
  DiskStoreStats kv_disk;  // --kv-cache-dir: the disk tiers' counters (kv/disk_block_store.h)
  int64_t requests_submitted = 0, requests_finished = 0, requests_cancelled = 0, requests_failed = 0, preemptions = 0;
  int64_t prompt_tokens = 0, cached_prompt_tokens = 0, prefilled_tokens = 0, generated_tokens = 0;
  int64_t steps = 0;
  // Data-parallel attention: target rows (prompt chunks, decode and verification rows) scheduled for the
  // sequences of each rank's KV partition, [ranks]; empty otherwise.
  std::vector<int64_t> attention_rows_per_rank;
  SpecStats spec;                // summed over requests
  int64_t finished_stop = 0, finished_length = 0;  // requests_finished by reason
  // With LoRA adapters (EngineConfig::adapters), per adapter in its order: its name, the requests running and
  // waiting with it (as of the last step) and those that ended, whatever the reason. Empty without adapters.
  std::vector<std::string> lora_names;
  std::vector<int64_t> lora_running, lora_waiting, lora_requests_ended;
  Histogram time_to_first_token;  // seconds
  Histogram inter_token_latency;  // seconds between a request's consecutive token events, per token
  // Per request that finished (stop or length), the phases of vLLM's request metrics, in seconds:
  // queue: submission to first scheduled; prefill: first scheduled to first token; decode: first token to
  // the end; inference: prefill + decode; e2e: submission to the end; time per output token: decode over
  // the tokens after the first (requests of two tokens or more).
  Histogram request_queue_time, request_prefill_time, request_decode_time, request_inference_time;
  Histogram e2e_request_latency, time_per_output_token;
  Histogram request_prompt_tokens{Histogram::one_two_five_bounds(1 << 20)};
  Histogram request_generation_tokens{Histogram::one_two_five_bounds(1 << 20)};
  // With a drafter: drafts verified per decoding sequence and step (K; 0 for a plain step), which
  // --num-speculative-tokens auto chooses per sequence.
  Histogram draft_tokens_per_step{{0, 1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32}};
  // Folds one step in (Engine::step, once per step). `unix_seconds`: now, the time of the step's exemplars.
  void record(const StepStats& step, double unix_seconds);
  double prefix_hit_rate() const {
    return prefix_block_lookups > 0 ? double(prefix_block_hits) / double(prefix_block_lookups) : 0.0;
  }
};

}  // namespace aerie
