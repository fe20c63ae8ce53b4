// Engine tests that compare whole outputs of a batch (plain against speculative, with and without a
// logit transform): the batch's prompts and one run of it through a fresh Engine.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "engine/engine.h"
#include "spec/draft_head.h"

namespace aerie::testing {

// n prompts of 7 tokens, each starting with token 1 (the oracle head's x_0), the rest drawn from
// [3, n_vocab) by `seed`.
inline std::vector<std::vector<int64_t>> oracle_prompts(int n, int64_t n_vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int64_t>> out(size_t(n), std::vector<int64_t>{1});
  for (auto& p : out)
    for (int t = 0; t < 6; ++t) p.push_back(3 + int64_t(rng() % uint64_t(n_vocab - 3)));
  return out;
}

// Every prompt of `batch` submitted together to an Engine with room for six sequences and K = 3 (`head`
// null: plain decoding); request i is `options` with seed 1000 + i. Returns each request's tokens; sets
// *accepted to the drafts accepted when given.
inline std::vector<std::vector<int64_t>> run_batch(Model& target, DraftHead* head, ThreadPool& pool,
                                                   const std::vector<std::vector<int64_t>>& batch,
                                                   RequestOptions options, int64_t* accepted = nullptr) {
  EngineConfig c;
  c.kv_cache_memory = uint64_t(1) << 21;
  c.block_size = 8;
  c.max_length = 256;
  c.max_num_seqs = 6;
  c.spec.num_speculative_tokens = 3;
  Engine engine(target, head, c, pool);
  std::vector<std::vector<int64_t>> out(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    options.sampling.seed = 1000 + i;
    engine.submit(batch[i], options, [&out, i](const TokenEvent& e) {
      out[i].insert(out[i].end(), e.tokens.begin(), e.tokens.end());
    });
  }
  engine.run_until_idle();
  if (accepted) *accepted = engine.metrics().spec.accepted_tokens;
  return out;
}

}  // namespace aerie::testing
