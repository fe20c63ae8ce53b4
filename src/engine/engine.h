// Engine: many requests served from one set of weights by continuous batching over a paged KV cache,
// with speculative decoding inside the batch. The one implementation of a speculative round: `aerie
// generate`, `bench-accept`, `bench-spec` and `serve` all run it.
//
// One step, schedule -> run -> update:
//   scheduler.plan()          which sequences run and how many rows each (a prompt chunk, or 1 + K drafts)
//   StepInput::build(plan)    the flat ragged batch                                   (step_input.h)
//   target.forward(batch)     logits of the wanted rows, captured hidden states for the head
//   Verifier::run(seq)        per sequence: the first token, or drafts accepted + one target token, with
//                             the request's own sampling parameters, RNG, mask and stop conditions
//                             -> StepResult                                            (verifier.h)
//   scheduler.update(result)  tokens appended, positions advanced, rejected positions cut off (blocks go
//                             back to the pool), full blocks registered for prefix caching
//   KPolicy::choose()         this step's K per sequence: fixed, by batch size or adaptive (k_policy.h)
//   Proposer::propose()       the drafter, fed each sequence's tokens, kept rows' target features and K,
//                             returns its drafts as values (spec/proposer.h): a head's passes (chains, or
//                             with SpecOptions::tree an EAGLE-2 tree per sequence, which the target runs
//                             as tree rows and Verifier::run_tree accepts a path of; KvCache::keep_tree_path
//                             keeps that path's rows), or a token drafter's (n-gram) drafts
//   scheduler.update(drafts)  the drafts land in the sequence, the head's full blocks are registered
//   events                    each request's callback, from inside step()
//
// A failure inside one request's work (its sampling, mask, or a forward it was batched into) finishes
// that request with FinishReason::kError and frees its blocks; the engine goes on with the others.
//
// The engine is single-threaded: submit(), cancel(), step() and the accessors belong to one thread (an
// event callback may submit or cancel). Each step returns what it did as a StepStats value, folded into
// metrics() once at its end. engine/engine_loop.h is the thread-safe facade (a queue, a loop thread,
// cancellation, a metrics snapshot) that the server and an embedder use.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/draft_tokens.h"
#include "engine/k_policy.h"
#include "engine/memory_plan.h"
#include "engine/metrics.h"
#include "engine/request.h"
#include "engine/request_state.h"
#include "engine/spec_state.h"
#include "engine/step_input.h"
#include "engine/step_stats.h"
#include "engine/verifier.h"
#include "kv/disk_kv_tier.h"
#include "models/lora.h"
#include "models/model.h"
#include "sched/scheduler.h"
#include "spec/drafter.h"
#include "spec/proposer.h"
#include "spec/spec_options.h"

namespace aerie {

// The prefix cache's tier on disk (kv/disk_kv_tier.h): full blocks written to `dir` as they are registered,
// read back on a prefix-cache miss, found again by a restarted engine. The target's blocks and the draft
// head's share `max_bytes` in proportion to their bytes per position.
struct KvDiskOptions {
  std::string dir;         // empty: no disk tier
  uint64_t max_bytes = 0;  // the files of this model and settings, at most
  // What the KV rows depend on besides the tokens and what the engine itself folds in (KV dtype, geometry,
  // block size, --deterministic): the checkpoint and how it was loaded (kv/disk_identity.h). Required.
  uint64_t identity = 0;
  uint64_t draft_identity = 0;  // the draft head's checkpoint, likewise (with a head that has a KV cache)
  std::function<void(const std::string&)> log;  // log lines (null: stderr)
};

struct EngineConfig {
  int64_t block_size = 16;
  uint64_t kv_cache_memory = 0;  // bytes; 0: what max_num_seqs x max_length need, at most
                                 // kv_cache_fraction of MemAvailable (engine/memory_plan.h)
  double kv_cache_fraction = 0.5;
  KvDType kv_cache_dtype = KvDType::kBF16;  // the target's and the draft head's caches (--kv-cache-dtype)
  int64_t max_length = 0;        // per sequence (prompt + output); 0: the model's max_position_embeddings
  int64_t max_batch_tokens = 512;
  // Prompt rows in a step that also decodes (0: up to max_batch_tokens): bounds the inter-token latency of
  // running requests while new prompts are prefilled (SchedulerConfig).
  int64_t max_prefill_rows_while_decoding = 256;
  int64_t max_num_seqs = 16;
  bool prefix_caching = true;
  SpecOptions spec;              // used when there is a drafter
  DraftTokensByBatchSize k_by_batch_size;
  int64_t max_queue = 1024;      // submit() refuses beyond this many waiting requests
  // --deterministic: every request batch-invariant (RequestOptions::deterministic), every step on the
  // row-invariant kernels; cached prefixes stay usable.
  bool deterministic = false;
  KvDiskOptions kv_disk;  // --kv-cache-dir: the prefix cache's second tier, off by default
  // LoRA adapters a request may select (RequestOptions::adapter), loaded against the target (models/lora.h);
  // null or empty: none. Shared and immutable: the forward reads them as it reads weights.
  std::shared_ptr<const LoraSet> adapters;
};

class Engine {
 public:
  // `draft` may be null (plain decoding). Both must outlive the engine. The models run on `pool`. A token
  // drafter's proposals are verified as argmax proposals whatever config.spec.proposal says (q is one-hot).
  Engine(Model& target, Drafter* draft, const EngineConfig& config, ThreadPool& pool);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Throws aerie::Error for a request that can never run (empty prompt, an id outside the vocabulary,
  // prompt + 1 beyond the max length, bad sampling parameters). Reads only what construction fixed: any
  // thread may call it.
  void check_request(std::span<const int64_t> prompt, const RequestOptions& options) const;
  // Queues a request (it runs from the next step); returns its id: `id` when not 0 (a facade's own ids,
  // unique), else the next free one. Throws as check_request, or when the queue is full.
  uint64_t submit(std::vector<int64_t> prompt, const RequestOptions& options, EventCallback on_event, uint64_t id = 0);
  // Cancels a request wherever it is; its last event (finish_reason kCancelled) comes from the next step.
  void cancel(uint64_t id);

  // One step: what it did (worked: false when there was nothing to do), valid until the next step.
  const StepStats& step();
  void run_until_idle();
  bool idle() const;

  // The metrics; scheduler and KV figures as of the end of the last step.
  const EngineMetrics& metrics() const { return metrics_; }
  const MemoryPlan& memory_plan() const { return plan_; }
  int64_t max_length() const { return plan_.max_length; }
  const BlockPool& pool() const { return *pool_; }
  const BlockPool* draft_pool() const { return draft_pool_.get(); }
  // The disk tiers (null without --kv-cache-dir, or without a head's cache).
  const DiskKvTier* disk_tier() const { return disk_tier_.get(); }
  const DiskKvTier* draft_disk_tier() const { return draft_disk_tier_.get(); }
  // The target's KV cache of a request that holds blocks (null otherwise), as of the end of its last
  // round: for tests and debugging, from the step thread (an event callback) or between steps.
  const KvCache* target_cache(uint64_t id) const;
  const KvCache* draft_cache(uint64_t id) const;  // the head's, likewise

 private:
  bool step_once();
  void drain_inbox();
  // Runs `plan` (all of this step's plan, or a slice whose results are results_[first..]): the target
  // forward, each sequence's decision and scheduler update, then the head's passes. A forward that throws
  // is retried one sequence at a time, so that only the sequence it fails on fails.
  void run(std::span<const ScheduledRows> plan, size_t first);
  // This step's K (KPolicy), then the proposer over plan's sequences that go on (results_[first..]), and
  // their drafts to the scheduler. A proposer that throws is retried one sequence at a time.
  void run_draft(std::span<const ScheduledRows> plan, size_t first);
  static SpecState& spec_of(Sequence& seq) { return request_of(seq).speculation; }
  void fail(size_t i, const std::string& what, const std::exception& e);
  void post_events(const std::vector<ScheduledRows>& plan);
  void finish(Request& seq, FinishReason reason, const std::string& error = "", const StepResult* last = nullptr);
  // A request that ended, into this step's stats.
  void observe_finished(const Request& seq, FinishReason reason);
  // Calls seq's callback with `step`'s tokens (none when null); finished when reason is not kNone.
  void send_event(Request& seq, const StepResult* step, FinishReason reason, const std::string& error);
  // The disk tiers of config_.kv_disk, attached to the pools (constructor).
  void attach_disk_tiers(Model& target);

  Model& target_;
  EngineConfig config_;
  MemoryPlan plan_;
  int64_t max_draft_tokens_ = 0;  // the largest K any batch size gets
  std::unique_ptr<KvStore> store_, draft_store_;
  std::unique_ptr<BlockPool> pool_, draft_pool_;
  // Declared after the stores: destroyed first, each writing what it has queued while the store still exists.
  std::unique_ptr<DiskKvTier> disk_tier_, draft_disk_tier_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Verifier> verifier_;
  std::unique_ptr<Proposer> proposer_;  // null without a drafter (plain decoding)
  std::unique_ptr<KPolicy> k_policy_;   // null without a drafter
  const char* draft_error_ = "";        // a failed proposal's prefix: "draft head: " or "drafter: "

  std::vector<std::unique_ptr<Request>> inbox_;  // submitted, taken in at the next step
  std::vector<uint64_t> cancel_inbox_;
  uint64_t next_id_ = 1;

  // Every request from submit to finish, its speculation state with it; step thread only.
  std::unordered_map<uint64_t, std::unique_ptr<Request>> live_;
  uint64_t arrivals_ = 0;
  EngineMetrics metrics_;
  StepStats stats_;  // the current step's

  // Per-step state, reused (steady-state steps allocate nothing).
  std::vector<Sequence*> preempted_;
  StepInput input_;
  ForwardOutput out_;
  std::vector<StepResult> results_;       // per planned sequence
  std::vector<const int32_t*> tree_parents_;  // per planned sequence: its draft tree's row parents, or null
  std::vector<SpecState*> specs_;         // per planned sequence (run_draft)
  std::vector<char> tree_flags_;          // per planned sequence: whether it drafts a tree
  std::vector<int64_t> k_;                // per planned sequence: its K this step
  std::vector<ProposalRow> proposal_rows_;  // the sequences that go to the proposer
  std::vector<size_t> proposal_plan_;       // their index in the plan
  std::vector<SequenceProposal> proposals_;
  TokenEvent event_;
};

}  // namespace aerie
