// Scheduler: decides, each step, which sequences run and how many rows each gets, within a token budget
// and a cap on running sequences, holding enough KV blocks for them.
//   - decoding sequences first (1 row + their drafts), then prompt chunks (chunked prefill, capped while
//     sequences decode), in order of priority (RequestOptions::priority, lower first), then first come
//     first served; waiting requests are admitted in that order while budget, sequence slots and blocks
//     allow, and one that finds no slot or blocks preempts running sequences of a higher priority value;
//   - admission looks up the prompt in the prefix cache (target and draft head alike) and skips what it
//     finds;
//   - a request with prompt log-probabilities (RequestOptions::prompt_logprobs) skips the prefix cache and
//     its prompt chunks share kPromptLogprobRowsPerStep rows a step;
//   - when blocks run out for a running sequence, the last running sequence in that order (highest
//     priority value, newest among equals) is preempted: its blocks are freed and it waits again, to be
//     recomputed (prompt + what it generated) when there is room.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "kv/block_pool.h"
#include "sched/sequence.h"
#include "sched/progress.h"

namespace aerie {

// The head's prefix chain starts from token 0 (its row t carries token t+1).
uint64_t draft_root(const Sequence& seq);

// Prompt rows of prompt-logprobs sequences in one step. Each such row asks the target for a row of logits,
// [n_vocab] f32 (512 KiB at a 128K vocabulary), which the forward's logits buffer holds for the whole
// batch: 64 rows bound it at 32 MiB beyond what decoding needs, whatever max_batch_tokens is.
inline constexpr int64_t kPromptLogprobRowsPerStep = 64;

struct SchedulerConfig {
  int64_t max_batch_tokens = 512;  // rows per step
  int64_t max_num_seqs = 16;       // running sequences
  int64_t max_draft_tokens = 0;    // K the draft head may propose after a step (head blocks to hold)
  // Prompt rows in a step that also decodes (0: no cap beyond max_batch_tokens). A step's time grows with
  // its rows (prefill is compute-bound), and every decoding sequence waits for the whole step.
  int64_t max_prefill_rows_while_decoding = 0;
  // Every step runs batch-invariant kernels (EngineConfig::deterministic), so every cached block holds the
  // bits a deterministic request would compute itself: such requests may take cached prefixes.
  bool deterministic = false;
};

struct ScheduledRows {
  Sequence* seq = nullptr;
  int64_t n_rows = 0;  // a prompt chunk, or 1 + the sequence's drafts
};

class Scheduler {
 public:
  // draft_pool is null without a draft head.
  Scheduler(const SchedulerConfig& config, BlockPool& pool, BlockPool* draft_pool);

  void add(Sequence* seq);     // waits until admitted
  void remove(Sequence* seq);  // finished or cancelled: frees its blocks, forgets it
  // The rows of the next step (empty when there is nothing to do), valid until the next call. Sequences
  // preempted to make room are appended to `preempted`.
  const std::vector<ScheduledRows>& plan(std::vector<Sequence*>& preempted);
  // Applies a planned sequence's step: appends its tokens, advances its computed positions, cuts the
  // target cache back to them (rejected drafts), rewinds the head's cache to where its target-feature
  // rows end (its blocks kept for this step's draft passes) and registers full blocks in the prefix
  // cache. The only writer of a sequence's progress besides admission and preemption.
  void update(Sequence& seq, const Progress& progress);
  // Takes the drafts proposed for seq's next round, and registers the head's full blocks of positions
  // computed from target features (those below n_computed; the positions after them that the head's
  // own-feature passes wrote are speculative). The only writer of a sequence's drafts.
  void update(Sequence& seq, const ProposedDrafts& proposal);

  int64_t n_running() const { return int64_t(running_.size()); }
  int64_t n_waiting() const { return int64_t(waiting_.size()); }
  const std::vector<Sequence*>& running() const { return running_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }

 private:
  // Blocks for n_rows more; a table without blocks starts in `partition` (-1: the pool's roomiest).
  bool reserve(Sequence* seq, int64_t n_rows, int32_t partition = -1);
  void preempt(Sequence* seq);
  // Before a step is planned: while the first waiting request is more urgent (a lower priority value) than
  // the last running sequence and would find no slot or too few free blocks for its first chunk, that
  // running sequence is preempted.
  void preempt_for_waiting(std::vector<Sequence*>& preempted);
  // Who makes room when seq cannot get blocks: the newest running sequence, among those whose blocks come
  // from seq's partition of the pool when it has several (preempting another partition's frees nothing
  // seq can use). It may be seq itself.
  Sequence* victim_for(const Sequence* seq) const;
  // Takes what the prefix cache holds of seq's tokens. With a partitioned pool (data-parallel attention)
  // it returns the partition seq starts in when it found nothing there, else -1 (see the .cpp).
  int32_t admit_prefix(Sequence* seq);
  // Running sequences per partition of the pool, and the least busy partition (fewest running sequences,
  // then most blocks available).
  const std::vector<int64_t>& partition_load();
  int32_t least_busy_partition(const std::vector<int64_t>& load) const;
  int64_t match_prefix(Sequence* seq);  // positions found in the prefix cache (target and head alike)
  // The rows of seq's next prompt chunk within `budget` and the step's prompt-logprobs rows left.
  int64_t prompt_chunk(const Sequence* seq, int64_t budget, int64_t prompt_logprob_rows) const;
  void release(Sequence* seq);

  SchedulerConfig config_;
  BlockPool& pool_;
  BlockPool* draft_pool_;
  std::vector<ScheduledRows> rows_;  // the last plan
  std::vector<int64_t> partition_load_;
  std::vector<Sequence*> running_;  // in arrival order
  std::deque<Sequence*> waiting_;   // in arrival order
};

}  // namespace aerie
