#include "sched/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace aerie {
namespace {

// The scheduling order: priority (lower first), then arrival.
bool in_order(const Sequence* a, const Sequence* b) {
  return a->priority != b->priority ? a->priority < b->priority : a->arrival < b->arrival;
}

bool planned(const std::vector<ScheduledRows>& rows, const Sequence* seq) {
  return std::any_of(rows.begin(), rows.end(), [&](const ScheduledRows& r) { return r.seq == seq; });
}

// Head rows lag the target by one token: head position t pairs the target's feature at t with token t+1,
// so its prefix chain starts with token 0 and hashes tokens 1, 2, ...
}  // namespace

uint64_t draft_root(const Sequence& seq) {
  return BlockPool::chain_hash(seq.prefix_root, std::span(seq.tokens).first(1));
}

Scheduler::Scheduler(const SchedulerConfig& config, BlockPool& pool, BlockPool* draft_pool)
    : config_(config), pool_(pool), draft_pool_(draft_pool) {
  AERIE_CHECK(config.max_batch_tokens >= 1 + config.max_draft_tokens, "max batch tokens ", config.max_batch_tokens,
              " cannot hold one verification of ", config.max_draft_tokens, " drafts");
  AERIE_CHECK(config.max_num_seqs >= 1, "max_num_seqs must be >= 1");
  AERIE_CHECK(config.max_prefill_rows_while_decoding >= 0, "max prefill rows while decoding must be >= 0 (0: no cap), got ",
              config.max_prefill_rows_while_decoding);
}

void Scheduler::add(Sequence* seq) {
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), seq, in_order), seq);
}

void Scheduler::release(Sequence* seq) {
  seq->table.release_all(pool_);
  if (draft_pool_) seq->draft_table.release_all(*draft_pool_);
  seq->n_computed = 0;
  seq->drafts.clear();
  seq->draft_ids.clear();
  seq->draft_parents.clear();
  seq->running = false;
}

void Scheduler::remove(Sequence* seq) {
  release(seq);
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq), waiting_.end());
}

void Scheduler::preempt(Sequence* seq) {
  release(seq);
  ++seq->preemptions;
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  add(seq);
}

void Scheduler::preempt_for_waiting(std::vector<Sequence*>& preempted) {
  while (!waiting_.empty() && !running_.empty()) {
    const Sequence* seq = waiting_.front();
    Sequence* victim = running_.back();
    if (victim->priority <= seq->priority) return;  // equal priorities never preempt each other
    // Blocks for its first chunk, as if nothing of it were cached (a cached prefix only makes room to spare).
    const int64_t rows = std::min<int64_t>(int64_t(seq->tokens.size()), config_.max_batch_tokens);
    const int64_t blocks = (rows + pool_.block_size() - 1) / pool_.block_size();
    const bool no_slot = int64_t(running_.size()) >= config_.max_num_seqs;
    if (!no_slot && pool_.n_available() >= blocks) return;
    preempted.push_back(victim);
    preempt(victim);
  }
}

Sequence* Scheduler::victim_for(const Sequence* seq) const {
  const int32_t partition = seq->table.partition(pool_);
  if (pool_.n_partitions() > 1 && partition >= 0)
    for (auto it = running_.rbegin(); it != running_.rend(); ++it)
      if ((*it)->table.partition(pool_) == partition) return *it;
  return running_.back();
}

bool Scheduler::reserve(Sequence* seq, int64_t n_rows, int32_t partition) {
  if (!seq->table.reserve(pool_, seq->n_computed + n_rows, partition)) return false;
  // The head writes up to n_rows rows with target features, then K-1 rows on its own features.
  if (draft_pool_ && !seq->draft_table.reserve(*draft_pool_, seq->n_computed + n_rows + config_.max_draft_tokens))
    return false;
  return true;
}

int64_t Scheduler::match_prefix(Sequence* seq) {
  const std::span<const int64_t> tokens(seq->tokens);
  int64_t matched = seq->table.match_prefix(pool_, tokens, -1, seq->prefix_root);
  if (draft_pool_ && matched > 0) {
    // The head's blocks must cover the same positions: match its chain (tokens shifted by one), then
    // keep the shorter of the two prefixes.
    const int64_t head_matched = seq->draft_table.match_prefix(*draft_pool_, tokens.subspan(1), matched, draft_root(*seq));
    if (head_matched < matched) {
      seq->table.release_all(pool_);
      matched = head_matched > 0 ? seq->table.match_prefix(pool_, tokens, head_matched, seq->prefix_root) : 0;
      if (matched < head_matched) {  // evicted in between: start both from scratch
        seq->table.release_all(pool_);
        seq->draft_table.release_all(*draft_pool_);
        matched = 0;
      }
    }
  }
  return matched;
}

const std::vector<int64_t>& Scheduler::partition_load() {
  partition_load_.assign(size_t(pool_.n_partitions()), 0);
  for (const Sequence* s : running_) {
    const int32_t p = s->table.partition(pool_);
    if (p >= 0) ++partition_load_[size_t(p)];
  }
  return partition_load_;
}

int32_t Scheduler::least_busy_partition(const std::vector<int64_t>& load) const {
  int32_t best = 0;
  for (int32_t p = 1; p < pool_.n_partitions(); ++p)
    if (load[size_t(p)] < load[size_t(best)] ||
        (load[size_t(p)] == load[size_t(best)] && pool_.n_available(p) > pool_.n_available(best)))
      best = p;
  return best;
}

int32_t Scheduler::admit_prefix(Sequence* seq) {
  // A sequence that still owes prompt log-probabilities computes every prompt position itself: positions
  // taken from the prefix cache would have no logits (vLLM skips the lookup for such requests too). Its
  // own full blocks are still registered for others.
  // A deterministic request in an engine that is not takes nothing either (RequestOptions::deterministic).
  const bool own_prefix = seq->wants_prompt_logprobs() || (seq->deterministic && !config_.deterministic);
  int64_t matched = own_prefix ? 0 : match_prefix(seq);
  int32_t start = -1;
  if (pool_.n_partitions() > 1) {
    // Data-parallel attention: a sequence's partition is the rank that runs its attention. It starts in
    // the least busy one, unless it found a cached prefix in a partition running at most one sequence more
    // than that (recomputing the prefix costs less than a rank doing more than its share for the whole
    // request): a shared system prompt must not pull every request onto one rank.
    const std::vector<int64_t>& load = partition_load();
    start = least_busy_partition(load);
    const int32_t found = seq->table.partition(pool_);
    if (found >= 0 && load[size_t(found)] <= load[size_t(start)] + 1) {
      start = -1;
    } else if (found >= 0) {
      seq->table.release_all(pool_);
      if (draft_pool_) seq->draft_table.release_all(*draft_pool_);
      matched = 0;
    }
  }
  if (seq->table.blocks.empty()) seq->table.last_hash = seq->prefix_root;  // the chain its own blocks register under
  if (draft_pool_ && seq->draft_table.blocks.empty()) seq->draft_table.last_hash = draft_root(*seq);
  seq->n_computed = matched;
  if (seq->preemptions == 0) seq->n_cached_prompt = std::min(matched, seq->n_prompt);
  return start;
}

int64_t Scheduler::prompt_chunk(const Sequence* seq, int64_t budget, int64_t prompt_logprob_rows) const {
  const int64_t want = std::min<int64_t>(budget, int64_t(seq->tokens.size()) - seq->n_computed);
  return seq->wants_prompt_logprobs() ? std::min(want, prompt_logprob_rows) : want;
}

const std::vector<ScheduledRows>& Scheduler::plan(std::vector<Sequence*>& preempted) {
  std::vector<ScheduledRows>& rows = rows_;
  rows.clear();
  preempt_for_waiting(preempted);
  int64_t budget = config_.max_batch_tokens;
  // Decoding sequences first, in order (oldest first among equal priorities): each gets 1 + its drafts, so a
  // long prompt never delays the next token of a running request by more than its capped chunk. One that
  // cannot get blocks preempts the last running sequence (not yet planned: running_ is in scheduling order
  // and is walked in order).
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    if (seq->prefilling()) {
      ++i;
      continue;
    }
    const int64_t want = 1 + int64_t(seq->drafts.size());
    if (want > budget) break;  // a verification is never split
    if (!reserve(seq, want)) {
      Sequence* victim = victim_for(seq);
      preempted.push_back(victim);
      preempt(victim);
      continue;  // the same index: this sequence again with the freed blocks, or the next one
    }
    rows.push_back({seq, want});
    budget -= want;
    ++i;
  }
  // Prompt chunks share what is left, capped while sequences decode (their inter-token latency).
  if (!rows.empty() && config_.max_prefill_rows_while_decoding > 0)
    budget = std::min(budget, config_.max_prefill_rows_while_decoding);
  int64_t prompt_logprob_rows = kPromptLogprobRowsPerStep;  // left this step
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    const int64_t want = seq->prefilling() ? prompt_chunk(seq, budget, prompt_logprob_rows) : 0;
    if (want == 0) {  // decoding, or its prompt chunk waits for the next step's prompt-logprobs rows
      ++i;
      continue;
    }
    if (!reserve(seq, want)) {
      // The newest sequence makes room unless this step already runs it (a decode planned above).
      Sequence* victim = victim_for(seq);
      if (planned(rows, victim)) break;
      preempted.push_back(victim);
      preempt(victim);
      continue;
    }
    rows.push_back({seq, want});
    budget -= want;
    if (seq->wants_prompt_logprobs()) prompt_logprob_rows -= want;
    ++i;
  }
  // Admission in order: priority, then first come first served.
  while (!waiting_.empty() && budget > 0 && int64_t(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    if (seq->wants_prompt_logprobs() && prompt_logprob_rows == 0) break;  // it stays first in line
    const int32_t partition = admit_prefix(seq);
    const int64_t want = prompt_chunk(seq, budget, prompt_logprob_rows);
    // The least busy partition may be short of blocks where another has them.
    if (!reserve(seq, want, partition) && !(partition >= 0 && reserve(seq, want))) {
      release(seq);  // gives back the matched prefix too; it stays first in line
      break;
    }
    waiting_.pop_front();
    seq->running = true;
    running_.insert(std::upper_bound(running_.begin(), running_.end(), seq, in_order), seq);
    rows.push_back({seq, want});
    budget -= want;
    if (seq->wants_prompt_logprobs()) prompt_logprob_rows -= want;
  }
  return rows;
}

void Scheduler::update(Sequence& seq, const Progress& progress) {
  const int64_t p = seq.n_computed;
  seq.tokens.insert(seq.tokens.end(), progress.tokens.begin(), progress.tokens.end());
  seq.n_computed = p + progress.n_new_positions;
  AERIE_CHECK(seq.n_computed <= int64_t(seq.tokens.size()), "scheduler: ", seq.n_computed,
              " positions computed for ", seq.tokens.size(), " tokens");
  if (seq.kv->length() > seq.n_computed) seq.kv->truncate(seq.n_computed);
  // The head's blocks stay reserved: it rewrites these positions in this step's draft passes.
  if (seq.draft_kv && seq.draft_kv->length() > p) seq.draft_kv->truncate(p, /*keep_blocks=*/true);
  seq.drafts.clear();
  seq.draft_parents.clear();
  seq.n_prompt_logprobs += progress.n_prompt_logprobs;
  AERIE_CHECK(seq.n_prompt_logprobs < std::max<int64_t>(seq.n_prompt, 1), "scheduler: ", seq.n_prompt_logprobs,
              " prompt log-probability entries for a prompt of ", seq.n_prompt);
  seq.table.register_full_blocks(pool_, seq.tokens);
}

void Scheduler::update(Sequence& seq, const ProposedDrafts& proposal) {
  seq.drafts.assign(proposal.drafts.begin(), proposal.drafts.end());
  seq.draft_ids.assign(proposal.draft_ids.begin(), proposal.draft_ids.end());
  seq.q.assign(proposal.q.begin(), proposal.q.end());
  seq.draft_parents.assign(proposal.tree_parent.begin(), proposal.tree_parent.end());
  AERIE_CHECK(seq.draft_ids.size() == seq.drafts.size() &&
                  (seq.draft_parents.empty() || seq.draft_parents.size() == seq.drafts.size() + 1),
              "scheduler: a proposal of ", seq.drafts.size(), " drafts with ", seq.draft_ids.size(), " draft ids and ",
              seq.draft_parents.size(), " tree rows");
  if (!seq.draft_kv) return;
  // Head row t carries token t + 1.
  seq.draft_table.register_full_blocks(*draft_pool_, std::span<const int64_t>(seq.tokens).subspan(1),
                                       std::min(seq.n_computed, seq.draft_kv->length()));
}

}  // namespace aerie
