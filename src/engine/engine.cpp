#include "engine/engine.h"

#include <algorithm>
#include <limits>
#include <cmath>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "ops/ops.h"

namespace aerie {
namespace {

using Clock = std::chrono::steady_clock;

struct Geometry {
  int64_t n_layer, row_width;
  bool values;
};

Geometry geometry_of(const KvCache& probe) { return {probe.n_layer(), probe.row_width(), probe.has_values()}; }

uint64_t bytes_per_position(const Geometry& g) { return KvStore::bytes_per_position(g.n_layer, g.row_width, g.values); }

}  // namespace

DraftTokensByBatchSize DraftTokensByBatchSize::parse(const std::string& text) {
  DraftTokensByBatchSize out;
  std::stringstream in(text);
  std::string item;
  auto number = [&](const std::string& s) -> int64_t {
    size_t used = 0;
    int64_t v = -1;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    AERIE_CHECK(used == s.size() && v >= 0, "draft tokens by batch size: '", s, "' in '", text, "' is not a count");
    return v;
  };
  while (std::getline(in, item, ',')) {
    const size_t colon = item.find(':'), dash = item.find('-');
    AERIE_CHECK(colon != std::string::npos && dash != std::string::npos && dash < colon,
                "draft tokens by batch size: expected LO-HI:K or LO-:K, got '", item, "'");
    Range r;
    r.lo = number(item.substr(0, dash));
    const std::string hi = item.substr(dash + 1, colon - dash - 1);
    r.hi = hi.empty() ? -1 : number(hi);
    r.k = number(item.substr(colon + 1));
    AERIE_CHECK(r.hi < 0 || r.hi >= r.lo, "draft tokens by batch size: empty range '", item, "'");
    out.ranges.push_back(r);
  }
  return out;
}

int64_t DraftTokensByBatchSize::k_for(int64_t batch_size, int64_t fallback) const {
  for (const Range& r : ranges)
    if (batch_size >= r.lo && (r.hi < 0 || batch_size <= r.hi)) return r.k;
  return fallback;
}

Engine::Engine(Model& target, DraftHead* draft, const EngineConfig& config, ThreadPool& pool)
    : target_(target), draft_(draft), config_(config), pool_threads_(pool) {
  const Geometry tg = geometry_of(target.make_kv_cache(1));
  Geometry dg{0, 0, false};
  if (draft) dg = geometry_of(draft->make_kv_cache(1));
  MemoryPlanInput in;
  in.budget_bytes = config.kv_cache_memory;
  in.budget_fraction = config.kv_cache_fraction;
  in.target_bytes_per_position = bytes_per_position(tg);
  in.draft_bytes_per_position = draft ? bytes_per_position(dg) : 0;
  in.block_size = config.block_size;
  in.max_length = config.max_length > 0 ? config.max_length : target.max_position_embeddings();
  in.min_useful_length = std::min<int64_t>(64, in.max_length);
  plan_ = plan_memory(in);
  store_ = std::make_unique<KvStore>(tg.n_layer, tg.row_width, plan_.n_blocks, config.block_size, tg.values);
  pool_ = std::make_unique<BlockPool>(int32_t(plan_.n_blocks), int32_t(config.block_size), config.prefix_caching);
  int64_t max_k = 0;
  if (draft) {
    draft_store_ = std::make_unique<KvStore>(dg.n_layer, dg.row_width, plan_.n_blocks, config.block_size, dg.values);
    draft_pool_ = std::make_unique<BlockPool>(int32_t(plan_.n_blocks), int32_t(config.block_size), config.prefix_caching);
    validate(config.spec);
    max_k = config.spec.num_speculative_tokens;
    for (const auto& r : config.k_by_batch_size.ranges) max_k = std::max(max_k, r.k);
    AERIE_CHECK(max_k <= 32, "draft tokens by batch size: K must be at most 32, got ", max_k);
    if (draft->reduced_vocab()) {
      draft_to_target_.resize(size_t(draft->n_vocab()));
      for (int64_t d = 0; d < draft->n_vocab(); ++d) {
        const int64_t t = draft->to_target(d);
        AERIE_CHECK(t >= 0 && t < target.n_vocab(), "draft head maps draft id ", d, " to target id ", t,
                    " outside the target vocabulary [0, ", target.n_vocab(), ")");
        draft_to_target_[size_t(d)] = t;
      }
    } else {
      AERIE_CHECK(draft->n_vocab() == target.n_vocab(), "draft head vocabulary ", draft->n_vocab(),
                  " differs from the target's ", target.n_vocab(), " and the head has no draft-to-target map");
    }
  }
  SchedulerConfig sc;
  sc.max_batch_tokens = config.max_batch_tokens;
  sc.max_num_seqs = config.max_num_seqs;
  sc.max_draft_tokens = max_k;
  scheduler_ = std::make_unique<Scheduler>(sc, *pool_, draft_pool_.get());
  eos_ = target.eos_token_ids();
  probs_.resize(size_t(target.n_vocab()));
  metrics_.kv_blocks_total = plan_.n_blocks;
}

Engine::~Engine() = default;

uint64_t Engine::submit(std::vector<int64_t> prompt, const RequestOptions& options, EventCallback on_event) {
  AERIE_CHECK(!prompt.empty(), "the prompt is empty");
  for (int64_t id : prompt)
    AERIE_CHECK(id >= 0 && id < target_.n_vocab(), "token id ", id, " is outside the vocabulary [0, ", target_.n_vocab(), ")");
  AERIE_CHECK(int64_t(prompt.size()) < plan_.max_length, "the prompt has ", prompt.size(),
              " tokens; the max length is ", plan_.max_length);
  AERIE_CHECK(options.max_tokens >= 0, "max_tokens must be >= 0");
  validate(options.sampling);
  auto seq = std::make_unique<Sequence>();
  seq->options = options;
  if (options.constraint) seq->constraint = options.constraint->clone();
  seq->on_event = std::move(on_event);
  seq->n_prompt = int64_t(prompt.size());
  seq->tokens = std::move(prompt);
  seq->submitted = Clock::now();
  std::lock_guard<std::mutex> lock(inbox_mutex_);
  AERIE_CHECK(int64_t(inbox_.size()) + scheduler_->n_waiting() < config_.max_queue, "the request queue is full (",
              config_.max_queue, " waiting)");
  seq->id = next_id_++;
  seq->rng = Rng(options.sampling.seed ^ (seq->id * 0x9E3779B97F4A7C15ull * uint64_t(options.sampling.seed == 0)));
  inbox_.push_back(std::move(seq));
  inbox_cv_.notify_all();
  return next_id_ - 1;
}

void Engine::cancel(uint64_t id) {
  std::lock_guard<std::mutex> lock(inbox_mutex_);
  cancel_inbox_.push_back(id);
  inbox_cv_.notify_all();
}

void Engine::wait_for_work(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(inbox_mutex_);
  inbox_cv_.wait_for(lock, timeout, [this] { return !inbox_.empty() || !cancel_inbox_.empty(); });
}

bool Engine::idle() const {
  std::lock_guard<std::mutex> lock(inbox_mutex_);
  return inbox_.empty() && cancel_inbox_.empty() && live_.empty();
}

void Engine::drain_inbox() {
  std::vector<std::unique_ptr<Sequence>> incoming;
  std::vector<uint64_t> cancels;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    incoming.swap(inbox_);
    cancels.swap(cancel_inbox_);
  }
  for (auto& seq : incoming) {
    seq->arrival = arrivals_++;
    seq->kv.emplace(*store_, seq->table, *pool_);
    if (draft_) seq->draft_kv.emplace(*draft_store_, seq->draft_table, *draft_pool_);
    Sequence* raw = seq.get();
    live_.emplace(seq->id, std::move(seq));
    {
      std::lock_guard<std::mutex> lock(metrics_mutex_);
      ++metrics_.requests_submitted;
      metrics_.prompt_tokens += raw->n_prompt;
    }
    if (raw->options.max_tokens == 0) {
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

void Engine::finish(Sequence& seq, FinishReason reason, const std::string& error, const std::vector<int64_t>& tokens,
                    const std::vector<TokenLogprobs>* logprobs) {
  TokenEvent event;
  event.request_id = seq.id;
  event.tokens = tokens;
  if (logprobs) event.logprobs = *logprobs;
  event.finished = true;
  event.finish_reason = reason;
  event.error = error;
  event.prompt_tokens = seq.n_prompt;
  event.cached_prompt_tokens = seq.n_cached_prompt;
  event.generated_tokens = seq.n_generated();
  event.spec = &seq.spec;
  if (seq.on_event) seq.on_event(event);
  scheduler_->remove(&seq);
  {
    std::lock_guard<std::mutex> lock(metrics_mutex_);
    if (reason == FinishReason::kCancelled) ++metrics_.requests_cancelled;
    else ++metrics_.requests_finished;
    metrics_.cached_prompt_tokens += seq.n_cached_prompt;
  }
  live_.erase(seq.id);
}

AcceptRule Engine::rule_for(const Sequence& seq) const {
  if (draft_ && config_.spec.synthetic_acceptance >= 0.0) return AcceptRule::kSynthetic;
  if (seq.options.sampling.greedy()) return AcceptRule::kGreedy;
  if (!draft_) return AcceptRule::kTargetMatch;  // no drafts: a plain draw from the target
  return config_.spec.proposal == DraftProposal::kSampled ? AcceptRule::kRejection : AcceptRule::kTargetMatch;
}

int64_t Engine::next_k(const Sequence& seq, int64_t k_step) const {
  const int64_t remaining = seq.options.max_tokens - seq.n_generated();
  const int64_t room = plan_.max_length - seq.n_computed - 1;
  return std::max<int64_t>(0, std::min({k_step, remaining - 1, room}));
}

void Engine::token_logprobs(const float* logits, int64_t token, int64_t n_top, TokenLogprobs& out) {
  const int64_t vocab = target_.n_vocab();
  float mx = logits[0];
  for (int64_t t = 1; t < vocab; ++t) mx = std::max(mx, logits[t]);
  double sum = 0.0;
  for (int64_t t = 0; t < vocab; ++t) sum += std::exp(double(logits[t] - mx));
  const float lse = mx + float(std::log(sum));
  out.logprob = logits[token] - lse;
  out.top.clear();
  if (n_top <= 0) return;
  logprob_order_.resize(size_t(vocab));
  for (int64_t t = 0; t < vocab; ++t) logprob_order_[size_t(t)] = int32_t(t);
  const int64_t n = std::min(n_top, vocab);
  std::partial_sort(logprob_order_.begin(), logprob_order_.begin() + n, logprob_order_.end(), [logits](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = logprob_order_[size_t(i)];
    out.top.emplace_back(t, logits[t] - lse);
  }
}

void Engine::emit_token(Sequence& seq, int64_t token, const float* logits, size_t slot, bool& done) {
  std::vector<int64_t>& fresh = fresh_[slot];
  seq.tokens.push_back(token);
  fresh.push_back(token);
  if (seq.options.logprobs >= 0) {
    std::vector<TokenLogprobs>& lp = fresh_logprobs_[slot];
    lp.emplace_back();
    token_logprobs(logits, token, seq.options.logprobs, lp.back());
  }
  const auto& stops = seq.options.stop_token_ids;
  const bool is_eos = !seq.options.ignore_eos && std::find(eos_.begin(), eos_.end(), token) != eos_.end();
  if (is_eos || std::find(stops.begin(), stops.end(), token) != stops.end()) {
    done = true;
  } else if (seq.constraint && (!seq.constraint->accept(token) || seq.constraint->finished())) {
    // The structured output is complete (or, in synthetic-acceptance benchmarks, a draft broke it).
    done = true;
  } else if (seq.n_generated() >= seq.options.max_tokens || int64_t(seq.tokens.size()) >= plan_.max_length) {
    done = true;
  }
}

void Engine::run_target(const std::vector<ScheduledRows>& plan) {
  ids_.clear();
  rows_.clear();
  logit_rows_.clear();
  row_begin_.assign(plan.size(), 0);
  logit_begin_.assign(plan.size(), 0);
  accepted_rows_.assign(plan.size(), 0);
  if (fresh_.size() < plan.size()) {
    fresh_.resize(plan.size());
    fresh_logprobs_.resize(plan.size());
  }
  done_.assign(plan.size(), 0);
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& seq = *plan[i].seq;
    const int64_t n = plan[i].n_rows;
    row_begin_[i] = int64_t(ids_.size());
    logit_begin_[i] = int64_t(logit_rows_.size());
    if (seq.prefilling()) {
      ids_.insert(ids_.end(), seq.tokens.begin() + seq.n_computed, seq.tokens.begin() + seq.n_computed + n);
      if (seq.n_computed + n == int64_t(seq.tokens.size())) logit_rows_.push_back(row_begin_[i] + n - 1);
    } else {
      ids_.push_back(seq.tokens.back());
      ids_.insert(ids_.end(), seq.drafts.begin(), seq.drafts.end());
      for (int64_t r = 0; r < n; ++r) logit_rows_.push_back(row_begin_[i] + r);
    }
    rows_.push_back(SequenceRows{row_begin_[i], n, &*seq.kv});
  }
  const std::vector<int> none;
  const std::vector<int>& capture = draft_ ? draft_->target_layers() : none;
  out_ = target_.forward(StepBatch{ids_, rows_, logit_rows_, capture});
  const int64_t vocab = out_.n_vocab;

  int64_t prefilled = 0, generated = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& seq = *plan[i].seq;
    const int64_t n = plan[i].n_rows;
    std::vector<int64_t>& fresh = fresh_[i];
    fresh.clear();
    fresh_logprobs_[i].clear();
    bool done = false;
    const float* logits = out_.logits + logit_begin_[i] * vocab;
    if (seq.prefilling()) {
      seq.n_computed += n;
      prefilled += n;
      if (seq.n_computed == int64_t(seq.tokens.size())) {
        const float* masked = masked_rows(seq, logits, 1, vocab);
        const int64_t y = sample_token(masked, vocab, seq.options.sampling, seq.rng, probs_.data(), sampler_scratch_);
        emit_token(seq, y, logits, i, done);
      }
      accepted_rows_[i] = n;
    } else {
      const int64_t p = seq.n_computed, k = int64_t(seq.drafts.size());
      const DraftDistributions q{seq.q.empty() ? nullptr : seq.q.data(), draft_ ? draft_->n_vocab() : 0,
                                 seq.draft_ids, draft_to_target_};
      const float* masked = masked_rows(seq, logits, k + 1, vocab);
      const VerifyResult verdict = verify_drafts(rule_for(seq), masked, vocab, seq.drafts, seq.options.sampling, seq.rng,
                                                 verify_scratch_, q, config_.spec.synthetic_acceptance);
      const int64_t a = verdict.n_accepted;
      seq.spec.record(k, a);
      if (k > 0) {
        std::lock_guard<std::mutex> lock(metrics_mutex_);
        metrics_.spec.record(k, a);
      }
      // Token j of this round comes from verification row j. A stop token among the accepted drafts ends
      // the round early: e <= a + 1 tokens are emitted.
      for (int64_t j = 0; j < a && !done; ++j) emit_token(seq, seq.drafts[size_t(j)], logits + j * vocab, i, done);
      if (!done) emit_token(seq, verdict.next_token, logits + a * vocab, i, done);
      const int64_t e = int64_t(fresh.size());
      // The cache keeps x_P and the drafts that were emitted, d_1..d_{e-1}: every token but the last, the
      // invariant of a decoding sequence (positions of accepted drafts after a stop token are dropped).
      seq.kv->truncate(p + e);
      seq.n_computed = p + e;
      // The head's blocks stay reserved: it rewrites these positions in this step's draft passes.
      if (seq.draft_kv && seq.draft_kv->length() > p) seq.draft_kv->truncate(p, /*keep_blocks=*/true);
      accepted_rows_[i] = e;
      seq.drafts.clear();
    }
    seq.table.register_full_blocks(*pool_, seq.tokens);
    generated += int64_t(fresh.size());
    done_[i] = done ? 1 : 0;
  }
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  metrics_.prefilled_tokens += prefilled;
  metrics_.generated_tokens += generated;
}

const float* Engine::masked_rows(Sequence& seq, const float* logits, int64_t n_rows, int64_t vocab) {
  if (!seq.constraint) return logits;
  masked_.assign(logits, logits + n_rows * vocab);
  // Row j is the distribution after the first j drafts: walk a copy of the state along them. A draft the
  // constraint refuses gets probability 0 in its own row, so verification stops there and later rows are
  // never read.
  std::unique_ptr<TokenConstraint> walker;
  const TokenConstraint* state = seq.constraint.get();
  for (int64_t j = 0; j < n_rows; ++j) {
    state->allowed_tokens(allowed_);
    if (std::find(allowed_.begin(), allowed_.end(), uint8_t(1)) == allowed_.end()) {
      // A dead end (no token of this vocabulary continues the output): end the sequence rather than draw
      // from nothing.
      for (int64_t e : eos_)
        if (e >= 0 && e < int64_t(allowed_.size())) allowed_[size_t(e)] = 1;
    }
    apply_token_mask(masked_.data() + j * vocab, vocab, allowed_);
    if (j + 1 == n_rows) break;
    if (!walker) walker = seq.constraint->clone();
    if (!walker->accept(seq.drafts[size_t(j)])) break;
    state = walker.get();
  }
  return masked_.data();
}

void Engine::pick_draft(Sequence& seq, const float* logits, int64_t i) {
  const int64_t vd = draft_->n_vocab();
  if (seq.constraint) {
    // Structured output: the head proposes only what the constraint allows after the previous drafts (any
    // proposal keeps verification lossless; this one is not refused outright by the masked target).
    if (i == 0 || !seq.draft_constraint) seq.draft_constraint = seq.constraint->clone();
    seq.draft_constraint->allowed_tokens(allowed_);
    masked_.assign(logits, logits + vd);
    bool any = false;
    for (int64_t d = 0; d < vd; ++d) {
      const int64_t t = draft_to_target_.empty() ? d : draft_to_target_[size_t(d)];
      const bool ok = t < int64_t(allowed_.size()) && allowed_[size_t(t)];
      if (!ok) masked_[size_t(d)] = -std::numeric_limits<float>::infinity();
      any = any || ok;
    }
    if (any) logits = masked_.data();  // else (nothing allowed in the draft vocabulary) propose unmasked
  }
  int64_t d;
  if (rule_for(seq) == AcceptRule::kRejection) {
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

void Engine::run_draft(const std::vector<ScheduledRows>& plan) {
  if (!draft_) return;
  int64_t decoding = 0;
  for (Sequence* s : scheduler_->running()) decoding += s->prefilling() ? 0 : 1;
  const int64_t k_step = config_.k_by_batch_size.k_for(decoding, config_.spec.num_speculative_tokens);

  const size_t n_parts = out_.hidden.size();
  const int64_t width = out_.n_embd;
  int64_t m = 0;
  for (size_t i = 0; i < plan.size(); ++i) m += done_[i] ? 0 : accepted_rows_[i];
  if (m == 0) return;
  gathered_.resize(size_t(m) * size_t(width) * n_parts);
  parts_.resize(n_parts);
  for (size_t j = 0; j < n_parts; ++j) parts_[j] = gathered_.data() + j * size_t(m * width);
  head_ids_.clear();
  head_rows_.clear();
  head_logit_rows_.clear();
  drafting_.clear();
  drafting_k_.clear();
  for (size_t i = 0; i < plan.size(); ++i) {
    if (done_[i] || accepted_rows_[i] == 0) continue;
    Sequence& seq = *plan[i].seq;
    const int64_t rows = accepted_rows_[i];
    const int64_t hb = int64_t(head_ids_.size());
    const int64_t start = seq.n_computed - rows;  // target position of the first row
    for (int64_t r = 0; r < rows; ++r) head_ids_.push_back(seq.tokens[size_t(start + r + 1)]);
    for (size_t j = 0; j < n_parts; ++j)
      std::memcpy(gathered_.data() + j * size_t(m * width) + size_t(hb * width),
                  out_.hidden[j].data + row_begin_[i] * width, size_t(rows * width) * sizeof(float));
    head_rows_.push_back(SequenceRows{hb, rows, &*seq.draft_kv});
    const int64_t k = seq.prefilling() ? 0 : next_k(seq, k_step);
    if (k > 0) {
      head_logit_rows_.push_back(hb + rows - 1);
      drafting_.push_back(&seq);
      drafting_k_.push_back(k);
      seq.drafts.resize(size_t(k));
      seq.draft_ids.resize(size_t(k));
      if (rule_for(seq) == AcceptRule::kRejection) seq.q.resize(size_t(k * draft_->n_vocab()));
    }
  }
  const DraftOutput first = draft_->forward(DraftBatch{head_ids_, FeatureSource::kTarget, parts_, head_rows_, head_logit_rows_});
  for (size_t i = 0; i < plan.size(); ++i) {
    if (done_[i] || accepted_rows_[i] == 0) continue;
    Sequence& seq = *plan[i].seq;
    seq.draft_table.register_full_blocks(*draft_pool_, std::span<const int64_t>(seq.tokens).subspan(1));
  }
  const int64_t hd = first.n_embd, vd = first.n_vocab;
  self_features_.resize(drafting_.size() * size_t(hd));
  for (size_t d = 0; d < drafting_.size(); ++d) {
    pick_draft(*drafting_[d], first.logits + int64_t(d) * vd, 0);
    std::memcpy(self_features_.data() + d * size_t(hd), first.features + head_logit_rows_[d] * hd,
                size_t(hd) * sizeof(float));
  }
  // Further draft steps: one row per sequence still drafting, on the head's own features.
  const int64_t max_k = drafting_k_.empty() ? 0 : *std::max_element(drafting_k_.begin(), drafting_k_.end());
  for (int64_t step = 1; step < max_k; ++step) {
    head_ids_.clear();
    head_rows_.clear();
    head_logit_rows_.clear();
    gathered_.resize(drafting_.size() * size_t(hd));
    std::vector<size_t>& active = active_;
    active.clear();
    for (size_t d = 0; d < drafting_.size(); ++d) {
      if (drafting_k_[d] <= step) continue;
      const int64_t r = int64_t(head_ids_.size());
      head_ids_.push_back(drafting_[d]->drafts[size_t(step - 1)]);
      std::memcpy(gathered_.data() + size_t(r * hd), self_features_.data() + d * size_t(hd), size_t(hd) * sizeof(float));
      head_rows_.push_back(SequenceRows{r, 1, &*drafting_[d]->draft_kv});
      head_logit_rows_.push_back(r);
      active.push_back(d);
    }
    const float* part = gathered_.data();
    const DraftOutput out = draft_->forward(
        DraftBatch{head_ids_, FeatureSource::kSelf, std::span(&part, 1), head_rows_, head_logit_rows_});
    for (size_t r = 0; r < active.size(); ++r) {
      const size_t d = active[r];
      pick_draft(*drafting_[d], out.logits + int64_t(r) * vd, step);
      std::memcpy(self_features_.data() + d * size_t(hd), out.features + int64_t(r) * hd, size_t(hd) * sizeof(float));
    }
  }
}

bool Engine::step() {
  const bool worked = step_once();
  snapshot_state();
  return worked;
}

bool Engine::step_once() {
  drain_inbox();
  std::vector<Sequence*> preempted;
  const std::vector<ScheduledRows> plan = scheduler_->plan(preempted);
  if (!preempted.empty()) {
    std::lock_guard<std::mutex> lock(metrics_mutex_);
    metrics_.preemptions += int64_t(preempted.size());
  }
  if (plan.empty()) {
    if (scheduler_->n_running() == 0 && scheduler_->n_waiting() > 0) {
      // Nothing runs and the oldest waiting request still does not fit: it never will.
      std::vector<Sequence*> stuck;
      for (auto& [id, seq] : live_)
        if (!seq->running) stuck.push_back(seq.get());
      std::sort(stuck.begin(), stuck.end(), [](auto* a, auto* b) { return a->arrival < b->arrival; });
      finish(*stuck.front(), FinishReason::kError, "the request needs more KV cache blocks than the engine has");
      return true;
    }
    return false;
  }
  const auto t0 = Clock::now();
  run_target(plan);
  const auto t1 = Clock::now();
  run_draft(plan);
  const auto t2 = Clock::now();
  // Step time, charged to each sequence's speculation figures (the time its tokens waited on).
  const double verify_s = std::chrono::duration<double>(t1 - t0).count();
  const double draft_s = std::chrono::duration<double>(t2 - t1).count();
  for (const ScheduledRows& r : plan) {
    r.seq->spec.verify_seconds += verify_s;
    r.seq->spec.draft_seconds += draft_s;
  }

  const auto now = Clock::now();
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& seq = *plan[i].seq;
    const std::vector<int64_t>& fresh = fresh_[i];
    if (!fresh.empty()) {
      std::lock_guard<std::mutex> lock(metrics_mutex_);
      if (!seq.first_token_seen) {
        metrics_.time_to_first_token.observe(std::chrono::duration<double>(now - seq.submitted).count());
      } else {
        const double gap = std::chrono::duration<double>(now - seq.last_token_at).count() / double(fresh.size());
        for (size_t t = 0; t < fresh.size(); ++t) metrics_.inter_token_latency.observe(gap);
      }
    }
    if (!fresh.empty()) {
      seq.first_token_seen = true;
      seq.last_token_at = now;
    }
    if (done_[i]) {
      const int64_t last = seq.tokens.back();
      const auto& stops = seq.options.stop_token_ids;
      const bool stop = (!seq.options.ignore_eos && std::find(eos_.begin(), eos_.end(), last) != eos_.end()) ||
                        std::find(stops.begin(), stops.end(), last) != stops.end() ||
                        (seq.constraint && seq.constraint->finished());
      finish(seq, stop ? FinishReason::kStop : FinishReason::kLength, "", fresh, &fresh_logprobs_[i]);
    } else if (!fresh.empty() && seq.on_event) {
      TokenEvent event;
      event.request_id = seq.id;
      event.tokens = fresh;
      event.logprobs = fresh_logprobs_[i];
      event.prompt_tokens = seq.n_prompt;
      event.cached_prompt_tokens = seq.n_cached_prompt;
      event.generated_tokens = seq.n_generated();
      event.spec = &seq.spec;
      seq.on_event(event);
    }
  }
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  ++metrics_.steps;
  return true;
}

void Engine::run_until_idle() {
  while (step() || !idle()) {
  }
}

void Engine::snapshot_state() {
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  metrics_.running = scheduler_->n_running();
  metrics_.waiting = scheduler_->n_waiting();
  metrics_.kv_blocks_in_use = pool_->n_in_use();
  metrics_.kv_blocks_cached = pool_->n_cached_idle();
  metrics_.prefix_block_lookups = pool_->lookups();
  metrics_.prefix_block_hits = pool_->hits();
}

const KvCache* Engine::target_cache(uint64_t id) const {
  const auto it = live_.find(id);
  return it != live_.end() && it->second->running ? &*it->second->kv : nullptr;
}

EngineMetrics Engine::metrics() const {
  // Scheduler and pool figures are as of the end of the last step (step() copies them), so any thread
  // may call this while a step runs.
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  return metrics_;
}

}  // namespace aerie
