// StepStats: what one engine step did, as a value. Engine::step() returns it and folds it into the
// engine's EngineMetrics once, at the end of the step (EngineMetrics::record): nothing on the step path
// touches the metrics themselves. The buffers are reused step to step (steady steps allocate nothing).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/request.h"
#include "kv/disk_store_stats.h"
#include "sched/spec_stats.h"

namespace aerie {

// One latency observation and the request it belongs to (its label, for the exemplars).
struct Observation {
  double value = 0;  // seconds
  RequestLabel label;
};

// A request that ended this step.
struct FinishedRequest {
  FinishReason reason = FinishReason::kNone;
  RequestLabel label;
  int32_t adapter = -1;  // its LoRA adapter (RequestOptions::adapter), -1: the base model
  int64_t prompt_tokens = 0, cached_prompt_tokens = 0, generated_tokens = 0;
  // Stop and length only, in seconds (EngineMetrics has what each phase is); time_per_output_token < 0
  // for a request of fewer than two tokens.
  double queue = 0, prefill = 0, decode = 0, inference = 0, e2e = 0, time_per_output_token = -1;
};

struct StepStats {
  bool worked = false;  // something was done: a forward ran, or a request that can never run was failed
  bool ran = false;     // a forward ran
  int64_t submitted = 0, submitted_prompt_tokens = 0;  // requests taken in
  int64_t preemptions = 0;
  int64_t prefilled_tokens = 0, generated_tokens = 0;
  std::vector<int64_t> attention_rows_per_rank;  // [ranks] with data-parallel attention, else empty
  std::vector<int64_t> draft_tokens;  // with a drafter, per decoding sequence: the drafts it verified (K)
  SpecStats spec;                     // this step's rounds over every sequence
  std::vector<Observation> time_to_first_token, inter_token_latency;
  std::vector<FinishedRequest> finished;
  // As of the end of the step.
  int64_t running = 0, waiting = 0, kv_blocks_in_use = 0, kv_blocks_cached = 0;
  int64_t prefix_block_lookups = 0, prefix_block_hits = 0;  // cumulative (the pool's counters)
  DiskStoreStats kv_disk;  // the disk tiers, target's and head's together (zero without --kv-cache-dir)
  std::vector<int64_t> lora_running, lora_waiting;  // [adapters]: requests running and waiting with each

  void clear();
};

}  // namespace aerie
