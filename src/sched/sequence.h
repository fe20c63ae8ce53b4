// Sequence: the engine's state for one request. Its tokens are the prompt followed by what was generated;
// its KV caches (target and draft head) are block tables over the shared pools.
//
// Phases: while n_computed < tokens.size() - 1 the sequence is prefilling (a chunk per step, which may run
// to the end of its tokens); once every token but the last is in the cache (n_computed ==
// tokens.size() - 1) it decodes: the last token, plus any drafts, is the next step's input.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_cache.h"
#include "sched/request.h"

namespace aerie {

struct Sequence {
  uint64_t id = 0;
  uint64_t arrival = 0;  // submission order (first come, first served; preemption takes the newest)
  RequestOptions options;
  EventCallback on_event;
  std::vector<int64_t> tokens;
  int64_t n_prompt = 0;
  int64_t n_computed = 0;        // target positions in the cache
  int64_t n_cached_prompt = 0;   // of which came from the prefix cache at admission
  BlockTable table, draft_table;
  std::optional<KvCache> kv, draft_kv;  // views over the tables
  Rng rng{0};
  std::unique_ptr<TokenConstraint> constraint;  // this request's structured-output state (options' clone)
  std::unique_ptr<TokenConstraint> draft_constraint;  // the same walked along this step's drafts
  bool running = false;          // admitted (holds blocks)
  bool cancelled = false;
  int64_t preemptions = 0;

  // Speculation.
  std::vector<int64_t> drafts;       // target ids proposed for the next step
  std::vector<int64_t> draft_ids;    // the same as draft-vocabulary ids
  std::vector<float> q;              // [K, n_draft_vocab] draft distributions (rejection sampling)
  // Steps at K = 0 run no head pass: the target features of their new rows wait here, [rows, n_parts *
  // n_embd] (the head's cache ends `deferred_rows` positions before the target's), and go into the head's
  // next pass. Past the engine's limit the sequence stops speculating instead (speculation_off).
  std::vector<float> deferred_features;
  int64_t deferred_rows = 0;
  bool speculation_off = false;
  SpecStats spec;

  // Timing.
  std::chrono::steady_clock::time_point submitted, first_scheduled, first_token_at, last_token_at;
  bool scheduled_seen = false;
  bool first_token_seen = false;

  int64_t n_generated() const { return int64_t(tokens.size()) - n_prompt; }
  bool prefilling() const { return n_computed + 1 < int64_t(tokens.size()); }
};

}  // namespace aerie
