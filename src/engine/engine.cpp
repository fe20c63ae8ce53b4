#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>

#include "core/error.h"
#include "core/mix64.h"
#include "kv/disk_block_store.h"
#include "kv/disk_identity.h"
#include "ops/ops.h"

namespace aerie {
namespace {

using Clock = std::chrono::steady_clock;

struct Geometry {
  int64_t n_layer, row_width, scale_width;
  bool values;
  uint64_t bytes_per_position;
};

Geometry geometry_of(const KvCache& probe) {
  return {probe.n_layer(), probe.row_width(), probe.scale_width(), probe.has_values(), probe.bytes_per_position()};
}

}  // namespace

Engine::Engine(Model& target, Drafter* drafter, const EngineConfig& config, ThreadPool& pool)
    : target_(target), config_(config) {
  (void)pool;  // the models were loaded onto it; the engine itself runs on the calling thread
  if (config.adapters) check_lora_fits(*config.adapters, target.lora_targets());
  if (drafter) {
    ProposerConfig pc;
    pc.spec = config.spec;
    pc.target_vocab = target.n_vocab();
    // Steps at K = 0, whose rows a head holds back, come only from adaptive K or a K-by-batch-size schedule.
    const bool k_may_be_zero = config.spec.adaptive_k ||
                               std::any_of(config.k_by_batch_size.ranges.begin(), config.k_by_batch_size.ranges.end(),
                                           [](const DraftTokensByBatchSize::Range& r) { return r.k == 0; });
    pc.target_n_embd = k_may_be_zero ? target.n_embd() : 0;
    proposer_ = drafter->make_proposer(pc);
    // A token drafter's proposal is deterministic: q is one-hot, verified by target match.
    if (proposer_->one_hot()) config_.spec.proposal = DraftProposal::kArgmax;
  }
  const KvDType dtype = config.kv_cache_dtype;
  const Geometry tg = geometry_of(target.make_kv_cache(1, dtype));
  Geometry dg{0, 0, 0, false, 0};
  const std::optional<KvCache> head_probe = proposer_ ? proposer_->make_kv_cache(1, dtype) : std::nullopt;
  if (head_probe) dg = geometry_of(*head_probe);
  MemoryPlanInput in;
  in.budget_bytes = config.kv_cache_memory;
  in.budget_fraction = config.kv_cache_fraction;
  in.target_bytes_per_position = tg.bytes_per_position;
  in.draft_bytes_per_position = dg.bytes_per_position;
  in.kv_dtype = dtype;
  in.block_size = config.block_size;
  in.max_num_seqs = config.max_num_seqs;
  in.max_length = config.max_length > 0 ? config.max_length : target.max_position_embeddings();
  in.min_useful_length = std::min<int64_t>(64, in.max_length);
  plan_ = plan_memory(in);
  // Data-parallel attention: each rank keeps its own partition of the plan's size (kv/block_pool.h), and this
  // process writes only its own.
  const int partitions = target.kv_partitions();
  AERIE_CHECK(partitions >= 1, "a target with ", partitions, " KV partitions");
  if (partitions > 1) {
    plan_.n_blocks *= partitions;
    plan_.n_tokens *= partitions;
    plan_.summary += str_cat("; that on each of ", partitions, " ranks (data-parallel attention: ",
                             plan_.n_blocks, " blocks in all)");
  }
  store_ = std::make_unique<KvStore>(tg.n_layer, tg.row_width, plan_.n_blocks, config.block_size, tg.values, dtype,
                                     tg.scale_width);
  pool_ = std::make_unique<BlockPool>(int32_t(plan_.n_blocks), int32_t(config.block_size), config.prefix_caching,
                                      partitions);
  store_->set_local_partition(partitions, target.kv_partition());
  int64_t max_rows = 0;  // drafts a verification carries, and head rows past the root a round writes
  if (proposer_) {
    k_policy_ = std::make_unique<KPolicy>(config.spec, config.k_by_batch_size, config.max_batch_tokens, plan_.max_length);
    max_rows = k_policy_->max_k();
    if (config.spec.tree.enabled()) {
      AERIE_CHECK(proposer_->drafts_trees(), "draft trees (--spec-tree-top-k) need an EAGLE-1 or EAGLE-3 head (MHA, "
                  "or MLA on DeepSeek-V3) or DeepSeek-V3's MTP layer; ", proposer_->describe(), " drafts chains only: leave --spec-tree-top-k out");
      const DraftTreeShape& tree = config.spec.tree;
      max_rows = std::max({max_rows, tree.total_tokens, tree.top_k * (tree.depth - 1)});
    }
    draft_error_ = head_probe ? "draft head: " : "drafter: ";
  }
  if (head_probe) {
    draft_store_ = std::make_unique<KvStore>(dg.n_layer, dg.row_width, plan_.n_blocks, config.block_size, dg.values,
                                             dtype, dg.scale_width);
    draft_pool_ = std::make_unique<BlockPool>(int32_t(plan_.n_blocks), int32_t(config.block_size), config.prefix_caching);
  }
  if (!config.kv_disk.dir.empty()) attach_disk_tiers(target);
  SchedulerConfig sc;
  sc.max_batch_tokens = config.max_batch_tokens;
  sc.max_num_seqs = config.max_num_seqs;
  sc.max_prefill_rows_while_decoding = config.max_prefill_rows_while_decoding;
  sc.max_draft_tokens = max_draft_tokens_ = max_rows;
  sc.deterministic = config.deterministic;
  scheduler_ = std::make_unique<Scheduler>(sc, *pool_, draft_pool_.get());
  VerifierConfig vc;
  vc.eos = target.eos_token_ids();
  vc.max_length = plan_.max_length;
  vc.n_draft_vocab = proposer_ ? proposer_->n_draft_vocab() : 0;
  if (proposer_) vc.draft_to_target.assign(proposer_->draft_to_target().begin(), proposer_->draft_to_target().end());
  vc.spec = config_.spec;
  vc.has_draft = proposer_ != nullptr;
  verifier_ = std::make_unique<Verifier>(std::move(vc), target.n_vocab());
  // Per-sequence step buffers at their bounds now: under adaptive K the first long acceptance or deep tree
  // of a run comes when the clock says, and a steady step must not allocate. (The proposals' draft
  // distributions, SequenceProposal::q, still grow to their high-water mark: rows of the whole draft
  // vocabulary each; each request's own q is reserved when it starts, below.)
  results_.resize(size_t(std::max<int64_t>(config.max_num_seqs, 1)));
  for (StepResult& r : results_) {
    r.tokens.reserve(size_t(max_rows) + 1);
    r.tree_path.reserve(size_t(max_rows) + 1);
  }
  if (proposer_) {
    proposals_.resize(results_.size());
    for (SequenceProposal& p : proposals_) {
      p.drafts.reserve(size_t(max_rows));
      p.draft_ids.reserve(size_t(max_rows));
      p.tree_parent.reserve(size_t(max_rows) + 1);
    }
  }
  metrics_.kv_blocks_total = plan_.n_blocks;
  if (config.adapters && config.adapters->size() > 0) {
    const size_t n = size_t(config.adapters->size());
    for (const LoraAdapter& a : config.adapters->adapters) metrics_.lora_names.push_back(a.name);
    metrics_.lora_running.assign(n, 0);
    metrics_.lora_waiting.assign(n, 0);
    metrics_.lora_requests_ended.assign(n, 0);
    stats_.lora_running.assign(n, 0);
    stats_.lora_waiting.assign(n, 0);
  }
  if (partitions > 1) {
    metrics_.attention_rows_per_rank.assign(size_t(partitions), 0);
    stats_.attention_rows_per_rank.assign(size_t(partitions), 0);
  }
  if (proposer_) {
    stats_.spec.proposed_at.reserve(size_t(max_draft_tokens_));
    stats_.spec.accepted_at.reserve(size_t(max_draft_tokens_));
  }
}

Engine::~Engine() {
  // The disk tiers get every block still in RAM that they could not take when it was registered (their
  // write queue was full): a restart finds the whole of each cached prefix.
  for (auto [tier, pool] :
       {std::pair{disk_tier_.get(), pool_.get()}, std::pair{draft_disk_tier_.get(), draft_pool_.get()}}) {
    if (tier == nullptr) continue;
    tier->set_waiting(true);
    try {
      pool->offer_all_to_tier();
    } catch (const std::exception& e) {  // a destructor must not throw; the blocks are only a cache
      std::fprintf(stderr, "aerie: KV disk cache: %s\n", e.what());
    }
  }
}

void Engine::attach_disk_tiers(Model& target) {
  const KvDiskOptions& disk = config_.kv_disk;
  AERIE_CHECK(config_.prefix_caching, "--kv-cache-dir needs prefix caching");
  // Under tensor or data parallelism other ranks hold parts of each block, which a file here would miss.
  AERIE_CHECK(&target.local() == &target && target.kv_partitions() == 1,
              "--kv-cache-dir does not work with --tensor-parallel, --expert-parallel or --data-parallel");
  AERIE_CHECK(disk.identity != 0, "the KV disk cache needs the model's identity (KvDiskOptions::identity)");
  AERIE_CHECK(!draft_store_ || disk.draft_identity != 0,
              "the KV disk cache needs the draft head's identity (KvDiskOptions::draft_identity)");
  // Everything the stored bytes depend on that the engine decides: the KV layout and the kernels' mode.
  auto identity = [&](const char* which, uint64_t model, const KvStore& store) {
    IdentityHasher h;
    h.add(which).add(model).add(disk.identity).add(kv_dtype_name(store.dtype()));
    h.add(uint64_t(store.n_layer())).add(uint64_t(store.row_width())).add(uint64_t(store.has_values()));
    h.add(uint64_t(store.scale_width())).add(uint64_t(store.block_size())).add(uint64_t(config_.deterministic));
    return h.value();
  };
  // The target's and the head's blocks share the budget as they share a position's bytes.
  const double target_bytes = double(store_->block_bytes());
  const double draft_bytes = draft_store_ ? double(draft_store_->block_bytes()) : 0.0;
  const uint64_t target_share = uint64_t(double(disk.max_bytes) * target_bytes / (target_bytes + draft_bytes));
  const uint64_t target_file = DiskBlockStore::file_bytes(store_->block_size(), store_->block_bytes());
  const uint64_t draft_file = draft_store_
                                  ? DiskBlockStore::file_bytes(draft_store_->block_size(), draft_store_->block_bytes())
                                  : 0;
  AERIE_CHECK(target_share >= target_file && disk.max_bytes - target_share >= draft_file, "--kv-cache-disk-bytes ",
              disk.max_bytes, " cannot hold one block: a block's file is ", target_file, " bytes",
              draft_store_ ? str_cat(" (and the draft head's ", draft_file, ")") : "");
  DiskStoreConfig dc;
  dc.dir = disk.dir;
  dc.log = disk.log;
  const uint64_t target_id = identity("target", 0, *store_);
  const uint64_t draft_id = draft_store_ ? identity("draft head", disk.draft_identity, *draft_store_) : 0;
  dc.identity = target_id;
  if (draft_store_) dc.siblings = {draft_id};
  dc.max_bytes = target_share;
  // Room for two steps' worth of newly registered blocks (a prompt chunk of max_batch_tokens) at least.
  const size_t step_blocks = size_t(config_.max_batch_tokens / store_->block_size() + 2);
  dc.max_queue_bytes = std::max(dc.max_queue_bytes, 2 * step_blocks * store_->block_bytes());
  disk_tier_ = std::make_unique<DiskKvTier>(*store_, dc);
  pool_->set_tier(disk_tier_.get());
  if (!draft_store_) return;
  dc.identity = draft_id;
  dc.siblings = {target_id};
  dc.max_bytes = disk.max_bytes - target_share;
  draft_disk_tier_ = std::make_unique<DiskKvTier>(*draft_store_, dc);
  draft_pool_->set_tier(draft_disk_tier_.get());
}

void Engine::check_request(std::span<const int64_t> prompt, const RequestOptions& options) const {
  AERIE_CHECK(!prompt.empty(), "the prompt is empty");
  for (int64_t id : prompt)
    AERIE_CHECK(id >= 0 && id < target_.n_vocab(), "token id ", id, " is outside the vocabulary [0, ", target_.n_vocab(), ")");
  AERIE_CHECK(int64_t(prompt.size()) < plan_.max_length, "the prompt has ", prompt.size(),
              " tokens; the max length is ", plan_.max_length);
  AERIE_CHECK(options.max_tokens >= 0, "max_tokens must be >= 0");
  AERIE_CHECK(options.prompt_logprobs >= -1, "prompt_logprobs must be -1 (off) or >= 0, got ", options.prompt_logprobs);
  validate(options.sampling);
  validate(options.penalties);
  const int32_t n_adapters = config_.adapters ? config_.adapters->size() : 0;
  AERIE_CHECK(options.adapter >= -1 && options.adapter < n_adapters, "LoRA adapter ", options.adapter,
              " is not loaded (", n_adapters, " adapters)");
}

uint64_t Engine::submit(std::vector<int64_t> prompt, const RequestOptions& options, EventCallback on_event, uint64_t id) {
  check_request(prompt, options);
  AERIE_CHECK(int64_t(inbox_.size()) + scheduler_->n_waiting() < config_.max_queue, "the request queue is full (",
              config_.max_queue, " waiting)");
  if (id == 0) id = next_id_;
  AERIE_CHECK(live_.count(id) == 0 && std::none_of(inbox_.begin(), inbox_.end(), [&](const auto& s) { return s->id == id; }),
              "request id ", id, " is in use");
  next_id_ = std::max(next_id_, id + 1);
  auto seq = std::make_unique<Request>();
  seq->options = options;
  seq->prompt_logprobs = options.prompt_logprobs;
  seq->deterministic = options.deterministic;
  seq->adapter = options.adapter;
  if (options.adapter >= 0)
    seq->prefix_root = mix64(BlockPool::kRootHash ^ config_.adapters->adapters[size_t(options.adapter)].identity);
  seq->priority = options.priority;
  if (options.constraint) seq->constraint = options.constraint->clone();
  seq->on_event = std::move(on_event);
  seq->n_prompt = int64_t(prompt.size());
  seq->thinking = options.starts_in_thinking;
  seq->tokens = std::move(prompt);
  seq->submitted = Clock::now();
  seq->id = id;
  seq->rng = Rng(options.sampling.seed ^ (seq->id * 0x9E3779B97F4A7C15ull * uint64_t(options.sampling.seed == 0)));
  inbox_.push_back(std::move(seq));
  return id;
}

void Engine::cancel(uint64_t id) { cancel_inbox_.push_back(id); }

bool Engine::idle() const { return inbox_.empty() && cancel_inbox_.empty() && live_.empty(); }

void Engine::drain_inbox() {
  std::vector<std::unique_ptr<Request>> incoming;
  std::vector<uint64_t> cancels;
  incoming.swap(inbox_);  // a callback below may submit or cancel: those wait for the next step
  cancels.swap(cancel_inbox_);
  for (auto& seq : incoming) {
    seq->arrival = arrivals_++;
    // Room for every token it may hold, so that steps never grow it.
    seq->tokens.reserve(size_t(seq->n_prompt + std::min(plan_.max_length - seq->n_prompt, seq->options.max_tokens)) + 1);
    // Block tables for the max length (the head's holds K positions more).
    const size_t max_blocks = size_t((plan_.max_length + max_draft_tokens_ + config_.block_size - 1) / config_.block_size);
    seq->table.blocks.reserve(max_blocks);
    seq->draft_table.blocks.reserve(max_blocks);
    seq->kv.emplace(*store_, seq->table, *pool_);
    if (draft_store_) seq->draft_kv.emplace(*draft_store_, seq->draft_table, *draft_pool_);
    if (proposer_) {
      // Room for what its rounds fill, so that no later step allocates.
      seq->drafts.reserve(size_t(max_draft_tokens_));
      seq->draft_ids.reserve(size_t(max_draft_tokens_));
      seq->draft_parents.reserve(size_t(max_draft_tokens_) + 1);
      // Drafts drawn for rejection sampling: their distributions, a chain's K rows or a tree's rows with
      // children (at most 1 + its nodes), of the draft vocabulary. Untouched pages cost nothing.
      if (accept_rule(seq->options.sampling, config_.spec, true) == AcceptRule::kRejection)
        seq->q.reserve(size_t(max_draft_tokens_ + 1) * size_t(proposer_->n_draft_vocab()));
      seq->spec.proposed_at.reserve(size_t(max_draft_tokens_));
      seq->spec.accepted_at.reserve(size_t(max_draft_tokens_));
      seq->speculation.proposer = proposer_->start(int64_t(seq->tokens.capacity()));
    }
    Request* raw = seq.get();
    live_.emplace(raw->id, std::move(seq));
    ++stats_.submitted;
    stats_.submitted_prompt_tokens += raw->n_prompt;
    if (raw->options.max_tokens == 0 && raw->options.prompt_logprobs < 0) {  // else it runs its prompt
      raw->cancelled = false;
      finish(*raw, FinishReason::kLength);
      continue;
    }
    scheduler_->add(raw);
  }
  for (uint64_t id : cancels) {
    auto it = live_.find(id);
    if (it != live_.end()) finish(*it->second, FinishReason::kCancelled);
  }
}

void Engine::send_event(Request& seq, const StepResult* step, FinishReason reason, const std::string& error) {
  if (!seq.on_event) return;
  event_.request_id = seq.id;
  event_.tokens.clear();
  event_.logprobs.clear();
  event_.prompt_logprobs.clear();
  if (step) {
    event_.tokens.assign(step->tokens.begin(), step->tokens.end());
    event_.logprobs.assign(step->logprobs.begin(), step->logprobs.end());
    event_.prompt_logprobs.assign(step->prompt_logprobs.begin(), step->prompt_logprobs.end());
  }
  event_.finished = reason != FinishReason::kNone;
  event_.finish_reason = reason;
  event_.error.assign(error);
  event_.prompt_tokens = seq.n_prompt;
  event_.cached_prompt_tokens = seq.n_cached_prompt;
  event_.generated_tokens = seq.n_generated();
  event_.spec = &seq.spec;
  seq.on_event(event_);
}

void Engine::finish(Request& seq, FinishReason reason, const std::string& error, const StepResult* last) {
  if (reason == FinishReason::kError)
    std::fprintf(stderr, "aerie: request %llu failed: %s\n", (unsigned long long)seq.id, error.c_str());
  observe_finished(seq, reason);
  send_event(seq, last, reason, error);
  scheduler_->remove(&seq);
  live_.erase(seq.id);  // its speculation state goes with it
}

void Engine::observe_finished(const Request& seq, FinishReason reason) {
  FinishedRequest& f = stats_.finished.emplace_back();
  f.reason = reason;
  f.label = seq.options.label;
  f.adapter = seq.adapter;
  f.prompt_tokens = seq.n_prompt;
  f.cached_prompt_tokens = seq.n_cached_prompt;
  f.generated_tokens = seq.n_generated();
  if (reason == FinishReason::kCancelled || reason == FinishReason::kError) return;
  const auto now = Clock::now();
  auto seconds = [](auto from, auto to) { return std::chrono::duration<double>(to - from).count(); };
  // A request finished without running (max_tokens 0) counts as scheduled and answered at once.
  const auto scheduled = seq.scheduled_seen ? seq.first_scheduled : now;
  const auto first_token = seq.first_token_seen ? seq.first_token_at : now;
  f.queue = seconds(seq.submitted, scheduled);
  f.prefill = seconds(scheduled, first_token);
  f.decode = seconds(first_token, now);
  f.inference = seconds(scheduled, now);
  f.e2e = seconds(seq.submitted, now);
  if (seq.n_generated() > 1) f.time_per_output_token = seconds(first_token, now) / double(seq.n_generated() - 1);
}

void Engine::fail(size_t i, const std::string& what, const std::exception& e) {
  StepResult& result = results_[i];
  result.finish = FinishReason::kError;
  result.error = what + e.what();
}

void Engine::run(std::span<const ScheduledRows> plan, size_t first) {
  const auto t0 = Clock::now();
  // Draft trees: each tree's row parents for the target's tree attention (null: a chain).
  tree_parents_.assign(plan.size(), nullptr);
  for (size_t i = 0; i < plan.size(); ++i)
    if (!plan[i].seq->draft_parents.empty()) tree_parents_[i] = plan[i].seq->draft_parents.data();
  input_.build(plan, tree_parents_);
  const std::vector<int> none;
  try {
    out_ = target_.forward(input_.batch(proposer_ ? proposer_->target_layers() : none, config_.adapters.get()));
  } catch (const FatalError&) {
    throw;  // no request's fault, and retrying one by one cannot help
  } catch (const std::exception& e) {
    if (plan.size() == 1) return fail(first, "target forward: ", e);
    // Which sequence made the batch fail is unknown: run each alone from where it was, so that only the
    // one it fails on fails.
    for (const ScheduledRows& r : plan)
      if (r.seq->kv->length() > r.seq->n_computed) r.seq->kv->truncate(r.seq->n_computed, /*keep_blocks=*/true);
    for (size_t i = 0; i < plan.size(); ++i) run(plan.subspan(i, 1), first + i);
    return;
  }
  int64_t prefilled = 0, generated = 0, rows = 0;
  bool decode_only = true;  // a step whose forward times verification (or plain decoding) by its rows
  for (size_t i = 0; i < plan.size(); ++i) {
    Request& seq = request_of(*plan[i].seq);
    StepResult& result = results_[first + i];
    const bool prefilling = seq.prefilling();
    decode_only = decode_only && !prefilling;
    rows += plan[i].n_rows;
    try {
      const float* logits = out_.logits + input_.logit_begin[i] * out_.n_vocab;
      if (tree_parents_[i] && !prefilling) {
        verifier_->run_tree(seq, logits, result);
        seq.kv->keep_tree_path(seq.n_computed, result.tree_path);  // the accepted path's rows, moved into line
        if (k_policy_)  // before the scheduler's update drops the tree
          k_policy_->observe_tree_round(seq.id, spec_of(seq), seq.draft_parents, result.tree_path,
                                        seq.options.sampling.greedy());
      } else {
        verifier_->run(seq, plan[i].n_rows, logits, result);
      }
      scheduler_->update(seq, Progress{result.tokens, result.n_new_positions, int64_t(result.prompt_logprobs.size())});
    } catch (const std::exception& e) {
      result.clear();
      fail(first + i, "", e);
      continue;
    }
    if (prefilling) prefilled += plan[i].n_rows;
    generated += int64_t(result.tokens.size());
    if (!prefilling && proposer_) {
      if (result.n_drafts == 0) ++seq.spec.plain_rounds, ++stats_.spec.plain_rounds;
      stats_.draft_tokens.push_back(result.n_drafts);
    }
    if (k_policy_ && result.n_drafts > 0 && !tree_parents_[i]) k_policy_->observe_round(seq.id, spec_of(seq), result.n_drafts, result.n_accepted);
    if (result.n_drafts > 0) {
      seq.spec.record(result.n_drafts, result.n_accepted);
      seq.spec.relaxed_accepted += result.n_relaxed;
      stats_.spec.record(result.n_drafts, result.n_accepted);
      stats_.spec.relaxed_accepted += result.n_relaxed;
    }
  }
  stats_.prefilled_tokens += prefilled;
  stats_.generated_tokens += generated;
  const auto t1 = Clock::now();
  const double forward_s = std::chrono::duration<double>(t1 - t0).count();
  const bool adaptive = k_policy_ && k_policy_->adaptive();
  if (adaptive && decode_only) k_policy_->observe_forward(rows, forward_s);
  // The head's first pass this step may also run prompt rows or rows deferred at K = 0 (not steady).
  int64_t deferred_rows = 0;
  if (adaptive)
    for (const ScheduledRows& r : plan) deferred_rows += proposer_->deferred_rows(*spec_of(*r.seq).proposer);
  if (proposer_) run_draft(plan, first);
  const auto t2 = Clock::now();
  // Step time, charged to each sequence's speculation figures (the time its tokens waited on).
  const double verify_s = forward_s;
  const double draft_s = std::chrono::duration<double>(t2 - t1).count();
  if (adaptive) {
    size_t passes = 0;  // the drafter's passes: as many as the deepest chain
    int64_t head_prompt_rows = 0;  // prompt rows the head ran (a prompt chunk, not deferred, not switched off)
    for (const ScheduledRows& r : plan) {
      passes = std::max(passes, r.seq->drafts.size());
      const SpecState& spec = spec_of(*r.seq);
      if (r.seq->draft_kv && r.seq->n_computed <= r.seq->n_prompt && !spec.off && proposer_->deferred_rows(*spec.proposer) == 0)
        head_prompt_rows += r.n_rows;
    }
    k_policy_->observe_draft(int64_t(passes), draft_s, !decode_only, deferred_rows, head_prompt_rows);
  }
  for (const ScheduledRows& r : plan) {
    request_of(*r.seq).spec.verify_seconds += verify_s;
    request_of(*r.seq).spec.draft_seconds += draft_s;
  }
}

void Engine::run_draft(std::span<const ScheduledRows> plan, size_t first) {
  const std::span<const StepResult> results = std::span<const StepResult>(results_).subspan(first, plan.size());
  specs_.resize(plan.size());
  tree_flags_.resize(plan.size());
  k_.resize(plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    Request& seq = request_of(*plan[i].seq);
    specs_[i] = &spec_of(seq);
    tree_flags_[i] = drafts_tree(config_.spec, seq.constraint != nullptr, seq.options.penalties.active());
  }
  int64_t n_decoding = 0;  // K by batch size counts every running sequence that decodes
  for (const Sequence* s : scheduler_->running()) n_decoding += s->prefilling() ? 0 : 1;
  const int64_t step_k = k_policy_->choose(plan, results, specs_, tree_flags_, n_decoding, k_);
  proposal_rows_.clear();
  proposal_plan_.clear();
  for (size_t i = 0; i < plan.size(); ++i) {
    Request& seq = request_of(*plan[i].seq);
    const StepResult& r = results[i];
    if (r.finish != FinishReason::kNone || r.n_new_positions == 0 || specs_[i]->off) continue;
    ProposalRow row;
    row.state = specs_[i]->proposer.get();
    row.tokens = seq.tokens;
    row.n_computed = seq.n_computed;
    row.n_new = r.n_new_positions;
    row.feature_row = input_.row_begin[i];
    row.feature_path = r.tree_path;
    row.head_cache = seq.draft_kv ? &*seq.draft_kv : nullptr;
    row.k = k_[i];
    row.tree = tree_flags_[i];
    row.sampled = accept_rule(seq.options.sampling, config_.spec, true) == AcceptRule::kRejection;
    row.sampling = &seq.options.sampling;
    row.rng = &seq.rng;
    row.constraint = seq.constraint.get();
    specs_[i]->head_fed = specs_[i]->head_fed || row.head_cache != nullptr;
    proposal_rows_.push_back(row);
    proposal_plan_.push_back(i);
  }
  if (proposal_rows_.empty()) return;
  if (proposals_.size() < proposal_rows_.size()) proposals_.resize(proposal_rows_.size());
  const std::span<SequenceProposal> out = std::span(proposals_).first(proposal_rows_.size());
  bool proposed = false;
  try {
    proposer_->propose(ProposalInput{proposal_rows_, &out_, step_k}, out);
    proposed = true;
  } catch (const std::exception& e) {
    if (proposal_rows_.size() == 1) {
      fail(first + proposal_plan_[0], draft_error_, e);
      return;
    }
  }
  for (size_t j = 0; j < proposal_rows_.size(); ++j) {
    const size_t i = proposal_plan_[j];
    Request& seq = request_of(*plan[i].seq);
    if (!proposed) {
      // The batch failed: this sequence alone, its head cache rewound to where this step's head rows (the
      // deferred ones included) begin, so that only the one it fails on fails.
      const ProposalRow& row = proposal_rows_[j];
      const int64_t start = row.n_computed - row.n_new - proposer_->deferred_rows(*row.state);
      if (row.head_cache && row.head_cache->length() > start) row.head_cache->truncate(start, /*keep_blocks=*/true);
      try {
        proposer_->propose(ProposalInput{std::span(&row, 1), &out_, step_k}, out.subspan(j, 1));
      } catch (const std::exception& e) {
        fail(first + i, draft_error_, e);
        continue;
      }
    }
    const SequenceProposal& p = out[j];
    if (p.gave_up) specs_[i]->off = true;  // too far behind: plain from now on
    try {
      scheduler_->update(seq, ProposedDrafts{p.drafts, p.draft_ids, p.q, p.tree_parent});
    } catch (const std::exception& e) {
      fail(first + i, "", e);
    }
  }
}

void Engine::post_events(const std::vector<ScheduledRows>& plan) {
  const auto now = Clock::now();
  for (size_t i = 0; i < plan.size(); ++i) {
    Request& seq = request_of(*plan[i].seq);
    const StepResult& result = results_[i];
    if (!result.tokens.empty()) {
      if (!seq.first_token_seen) {
        stats_.time_to_first_token.push_back({std::chrono::duration<double>(now - seq.submitted).count(), seq.options.label});
        seq.first_token_at = now;
      } else {
        const double gap = std::chrono::duration<double>(now - seq.last_token_at).count() / double(result.tokens.size());
        stats_.inter_token_latency.insert(stats_.inter_token_latency.end(), result.tokens.size(),
                                          Observation{gap, seq.options.label});
      }
      seq.first_token_seen = true;
      seq.last_token_at = now;
    }
    if (result.finish != FinishReason::kNone) {
      finish(seq, result.finish, result.error, &result);
    } else if (!result.tokens.empty() || !result.prompt_logprobs.empty()) {
      send_event(seq, &result, FinishReason::kNone, "");
    }
  }
}

const StepStats& Engine::step() {
  stats_.clear();
  stats_.worked = step_once();
  stats_.running = scheduler_->n_running();
  stats_.waiting = scheduler_->n_waiting();
  if (!stats_.lora_running.empty()) {  // per adapter: a pass over the scheduled sequences
    std::fill(stats_.lora_running.begin(), stats_.lora_running.end(), 0);
    std::fill(stats_.lora_waiting.begin(), stats_.lora_waiting.end(), 0);
    for (const Sequence* s : scheduler_->running())
      if (s->adapter >= 0) ++stats_.lora_running[size_t(s->adapter)];
    for (const Sequence* s : scheduler_->waiting())
      if (s->adapter >= 0) ++stats_.lora_waiting[size_t(s->adapter)];
  }
  stats_.kv_blocks_in_use = pool_->n_in_use();
  stats_.kv_blocks_cached = pool_->n_cached_idle();
  stats_.prefix_block_lookups = pool_->lookups();
  stats_.prefix_block_hits = pool_->hits();
  if (disk_tier_) {
    DiskStoreStats d = disk_tier_->disk().stats();
    if (draft_disk_tier_) d += draft_disk_tier_->disk().stats();
    stats_.kv_disk = d;
  }
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  metrics_.record(stats_, std::chrono::duration<double>(since_epoch).count());
  return stats_;
}

bool Engine::step_once() {
  drain_inbox();
  preempted_.clear();
  const std::vector<ScheduledRows>& plan = scheduler_->plan(preempted_);
  if (!preempted_.empty()) {
    // Recomputed from scratch when it runs again, the head's cache included.
    for (Sequence* seq : preempted_) {
      SpecState& spec = spec_of(*seq);
      if (spec.proposer) proposer_->restart(*spec.proposer);
      spec.off = spec.head_fed = false;
    }
    stats_.preemptions += int64_t(preempted_.size());
  }
  if (plan.empty()) {
    if (scheduler_->n_running() == 0 && scheduler_->n_waiting() > 0) {
      // Nothing runs and the oldest waiting request still does not fit: it never will.
      std::vector<Request*> stuck;
      for (auto& [id, seq] : live_)
        if (!seq->running) stuck.push_back(seq.get());
      std::sort(stuck.begin(), stuck.end(), [](auto* a, auto* b) { return a->arrival < b->arrival; });
      finish(*stuck.front(), FinishReason::kError, "the request needs more KV cache blocks than the engine has");
      return true;
    }
    return false;
  }
  if (results_.size() < plan.size()) results_.resize(plan.size());
  const auto scheduled_at = Clock::now();
  for (size_t i = 0; i < plan.size(); ++i) {
    results_[i].clear();
    Request& seq = request_of(*plan[i].seq);
    if (!seq.scheduled_seen) seq.first_scheduled = scheduled_at, seq.scheduled_seen = true;
  }
  if (pool_->n_partitions() > 1) {  // data-parallel attention: whose rank runs each sequence's target rows
    for (const ScheduledRows& r : plan) {
      const int32_t p = r.seq->table.partition(*pool_);
      if (p >= 0) stats_.attention_rows_per_rank[size_t(p)] += r.n_rows;
    }
  }
  // Batch-invariant kernels for the whole step (target and head forwards) when any of its requests asks.
  bool invariant = config_.deterministic;
  for (const ScheduledRows& r : plan) invariant = invariant || r.seq->deterministic;
  const ops::BatchInvariantScope invariant_kernels(invariant);
  run(plan, 0);
  post_events(plan);
  stats_.ran = true;
  return true;
}

void Engine::run_until_idle() {
  while (step().worked || !idle()) {
  }
}

const KvCache* Engine::target_cache(uint64_t id) const {
  const auto it = live_.find(id);
  return it != live_.end() && it->second->running ? &*it->second->kv : nullptr;
}

const KvCache* Engine::draft_cache(uint64_t id) const {
  const auto it = live_.find(id);
  const Sequence* seq = it != live_.end() ? it->second.get() : nullptr;
  return seq && seq->running && seq->draft_kv ? &*seq->draft_kv : nullptr;
}

}  // namespace aerie
