// Engine: many requests served from one set of weights by continuous batching over a paged KV cache,
// with speculative decoding inside the batch.
//
// Each step() plans one ragged batch (sched/scheduler.h): prompt chunks and decode/verification rows of
// running sequences together; one target forward; per sequence sampling or acceptance of its drafts with
// its own parameters and RNG; rollback of rejected positions (blocks go back to the pool); then the draft
// head runs once over every sequence's new rows (target features) and K-1 more times, one row per
// sequence, to propose the next drafts. Token events go to each request's callback from inside step().
//
// submit() and cancel() may be called from any thread; step() from one thread at a time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/memory_plan.h"
#include "engine/metrics.h"
#include "models/model.h"
#include "sched/request.h"
#include "sched/scheduler.h"
#include "spec/draft_head.h"
#include "spec/spec_options.h"
#include "spec/verify.h"

namespace aerie {

// "1-4:3,5-16:2,17-:0": K by the number of decoding sequences (0 = plain decoding at that size).
struct DraftTokensByBatchSize {
  struct Range {
    int64_t lo, hi, k;  // hi < 0: unbounded
  };
  std::vector<Range> ranges;
  static DraftTokensByBatchSize parse(const std::string& text);
  int64_t k_for(int64_t batch_size, int64_t fallback) const;
};

struct EngineConfig {
  int64_t block_size = 16;
  uint64_t kv_cache_memory = 0;  // bytes; 0: kv_cache_fraction of MemAvailable
  double kv_cache_fraction = 0.5;
  int64_t max_length = 0;        // per sequence (prompt + output); 0: the model's max_position_embeddings
  int64_t max_batch_tokens = 512;
  int64_t max_num_seqs = 16;
  bool prefix_caching = true;
  SpecOptions spec;              // used when there is a draft head
  DraftTokensByBatchSize k_by_batch_size;
  int64_t max_queue = 1024;      // submit() refuses beyond this many waiting requests
};

class Engine {
 public:
  // `draft` may be null (plain decoding). Both must outlive the engine.
  Engine(Model& target, DraftHead* draft, const EngineConfig& config, ThreadPool& pool);
  ~Engine();

  // Queues a request; returns its id. Throws aerie::Error for a request that can never run (empty prompt,
  // prompt + 1 beyond the max length, bad sampling parameters) or when the queue is full.
  uint64_t submit(std::vector<int64_t> prompt, const RequestOptions& options, EventCallback on_event);
  // Cancels a request wherever it is; its last event (finish_reason kCancelled) comes from the next step.
  void cancel(uint64_t id);

  // One step; false when there was nothing to do.
  bool step();
  void run_until_idle();
  bool idle() const;
  // Blocks until submit() or cancel() has queued something, or the timeout passes (for a serving loop
  // that sleeps while idle).
  void wait_for_work(std::chrono::milliseconds timeout);

  // A copy of the metrics; scheduler and KV figures as of the end of the last step. Thread-safe.
  EngineMetrics metrics() const;
  const MemoryPlan& memory_plan() const { return plan_; }
  int64_t max_length() const { return plan_.max_length; }
  const BlockPool& pool() const { return *pool_; }
  // The target's KV cache of a request that holds blocks (null otherwise), as of the end of its last
  // round: for tests and debugging, from the step thread (an event callback) or between steps.
  const KvCache* target_cache(uint64_t id) const;

 private:
  bool step_once();
  void snapshot_state();
  void drain_inbox();
  void finish(Sequence& seq, FinishReason reason, const std::string& error = "", const std::vector<int64_t>& tokens = {},
              const std::vector<TokenLogprobs>* logprobs = nullptr);
  AcceptRule rule_for(const Sequence& seq) const;
  int64_t next_k(const Sequence& seq, int64_t k_step) const;
  // Appends token to the sequence and to this step's events (slot = its place in the plan); `logits` is
  // the target row it was chosen from (for log-probabilities).
  void emit_token(Sequence& seq, int64_t token, const float* logits, size_t slot, bool& done);
  void token_logprobs(const float* logits, int64_t token, int64_t n_top, TokenLogprobs& out);
  void run_target(const std::vector<ScheduledRows>& plan);
  void run_draft(const std::vector<ScheduledRows>& plan);
  void pick_draft(Sequence& seq, const float* logits, int64_t i);
  // Structured output: `n_rows` logit rows of a constrained sequence copied and masked (row j with the
  // constraint walked along the first j drafts), or `logits` itself when the sequence is unconstrained.
  const float* masked_rows(Sequence& seq, const float* logits, int64_t n_rows, int64_t vocab);

  Model& target_;
  DraftHead* draft_;
  EngineConfig config_;
  ThreadPool& pool_threads_;
  MemoryPlan plan_;
  std::unique_ptr<KvStore> store_, draft_store_;
  std::unique_ptr<BlockPool> pool_, draft_pool_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<int64_t> draft_to_target_;
  std::vector<int64_t> eos_;

  mutable std::mutex inbox_mutex_;
  std::condition_variable inbox_cv_;
  std::vector<std::unique_ptr<Sequence>> inbox_;
  std::vector<uint64_t> cancel_inbox_;
  uint64_t next_id_ = 1;

  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> live_;  // step thread only
  uint64_t arrivals_ = 0;
  EngineMetrics metrics_;
  mutable std::mutex metrics_mutex_;

  // Per-step buffers, reused.
  std::vector<int64_t> ids_, logit_rows_;
  std::vector<SequenceRows> rows_;
  std::vector<int64_t> row_begin_;       // per planned sequence: first row in the target batch
  std::vector<int64_t> logit_begin_;     // per planned sequence: first logit row
  std::vector<int64_t> accepted_rows_;   // per planned sequence: rows whose features feed the head
  std::vector<std::vector<int64_t>> fresh_;  // per planned sequence: tokens emitted this step
  std::vector<std::vector<TokenLogprobs>> fresh_logprobs_;  // per planned sequence, when asked for
  std::vector<int32_t> logprob_order_;
  std::vector<uint8_t> done_;            // per planned sequence
  std::vector<float> gathered_;          // head features gathered, per part
  std::vector<const float*> parts_;
  std::vector<int64_t> head_ids_, head_logit_rows_;
  std::vector<SequenceRows> head_rows_;
  std::vector<Sequence*> drafting_;
  std::vector<int64_t> drafting_k_;
  std::vector<float> self_features_;     // [n drafting, n_embd_head]
  std::vector<size_t> active_;
  VerifyScratch verify_scratch_;
  SamplerScratch sampler_scratch_;
  std::vector<float> probs_;
  std::vector<float> masked_;            // masked logit rows of one constrained sequence
  std::vector<uint8_t> allowed_;         // its token mask
  ForwardOutput out_;
};

}  // namespace aerie
