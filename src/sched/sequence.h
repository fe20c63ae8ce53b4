// Sequence: what the scheduler knows of one request. Its tokens are the prompt followed by what was
// generated; its KV caches (target and draft head) are block tables over the shared pools. The request
// itself (options, callback, sampling state, timing) is the engine's: engine/request_state.h extends this.
//
// Phases: while n_computed < tokens.size() - 1 the sequence is prefilling (a chunk per step, which may run
// to the end of its tokens); once every token but the last is in the cache (n_computed ==
// tokens.size() - 1) it decodes: the last token, plus any drafts, is the next step's input.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_cache.h"

namespace aerie {

struct Sequence {
  uint64_t id = 0;
  uint64_t arrival = 0;  // submission order (first come, first served; preemption takes the newest)
  int64_t priority = 0;  // RequestOptions::priority: lower first, then arrival
  // Of the request's options, what scheduling reads (RequestOptions: prompt_logprobs, deterministic).
  int64_t prompt_logprobs = -1;
  bool deterministic = false;
  // RequestOptions::adapter: the LoRA adapter the target runs this sequence with (-1: the base model), and
  // the root of its blocks' hash chain, which names the adapter (BlockPool::kRootHash for the base) so that
  // the prefix cache never serves KV computed under one adapter to a sequence of another.
  int32_t adapter = -1;
  uint64_t prefix_root = BlockPool::kRootHash;
  std::vector<int64_t> tokens;
  int64_t n_prompt = 0;
  int64_t n_computed = 0;        // target positions in the cache
  int64_t n_cached_prompt = 0;   // of which came from the prefix cache at admission
  int64_t n_prompt_logprobs = 0; // prompt_logprobs entries reported: those of tokens 1..n_prompt_logprobs
  BlockTable table, draft_table;
  std::optional<KvCache> kv, draft_kv;  // views over the tables
  bool running = false;          // admitted (holds blocks)
  bool cancelled = false;
  int64_t preemptions = 0;

  // Speculation: the drafts proposed for the next round, written only by Scheduler::update (the
  // drafter's own state is the engine's: engine/spec_state.h).
  std::vector<int64_t> drafts;       // target ids proposed for the next step
  std::vector<int64_t> draft_ids;    // the same as draft-vocabulary ids
  std::vector<float> q;              // draft distributions (rejection sampling): [K, n_draft_vocab], or a
                                     // tree's per verification row with children (ProposedDrafts::q)
  std::vector<int32_t> draft_parents;  // a draft tree: [1 + K] the parent row of each verification row; empty: a chain

  int64_t n_generated() const { return int64_t(tokens.size()) - n_prompt; }
  bool prefilling() const { return n_computed + 1 < int64_t(tokens.size()); }

  // Prompt log-probabilities: the logits of the row at position p give the entry of token p + 1, so the
  // rows wanted are positions n_prompt_logprobs .. n_prompt - 2 (the last prompt row samples the first
  // output token instead). Entries already reported are never wanted again, so a sequence recomputed after
  // preemption reports none twice.
  bool wants_prompt_logprobs() const { return prompt_logprobs >= 0 && n_prompt_logprobs + 1 < n_prompt; }
  // Of a prompt chunk of n_rows rows from n_computed: the first row (offset in the chunk) whose logits give
  // an entry, and how many consecutive rows do. Example: n_prompt 10, nothing reported, chunk of 6 from
  // position 4 -> {0, 5} (positions 4..8, entries of tokens 5..9; position 9 is the last prompt row).
  struct RowSpan {
    int64_t first = 0, count = 0;
  };
  RowSpan prompt_logprob_rows(int64_t n_rows) const {
    if (!wants_prompt_logprobs()) return {};
    const int64_t begin = std::max(n_computed, n_prompt_logprobs), end = std::min(n_computed + n_rows, n_prompt - 1);
    return end > begin ? RowSpan{begin - n_computed, end - begin} : RowSpan{};
  }
};

}  // namespace aerie
