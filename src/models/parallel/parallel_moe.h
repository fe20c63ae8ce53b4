// The MoE block at any rank count (issue 22): how the ranks that share a layer's experts combine, chosen once
// at load, so a decoder layer calls one block whatever the layout (models/deepseek_v3.h).
//   kNone:        one process (or a drafter's own layer): every expert here, moe_ffn as it is;
//   kSumOutputs:  tensor and expert parallelism: every rank routes every row alike and runs only its experts
//                 (MoeWeights::owned) and its part of the shared experts, then one all-reduce sums the
//                 partial outputs — one sum for the routed and the shared experts together;
//   kDispatchRows: data-parallel attention: each rank holds only its own rows, which travel to the owners of
//                 their chosen experts and back (models/parallel/moe_dispatch.h).
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "dist/communicator.h"
#include "models/moe.h"
#include "models/parallel/moe_dispatch.h"

namespace aerie {

enum class ExpertExchange { kNone, kSumOutputs, kDispatchRows };

struct ExpertRanks {
  dist::Communicator* ranks = nullptr;  // null with kNone
  ExpertExchange exchange = ExpertExchange::kNone;
};

// out = MoE(x) over every rank's experts:  x [n_tokens, n_embd] f32 (normalised) -> out [n_tokens, n_embd].
// Under kDispatchRows every rank calls it for every MoE layer, n_tokens = 0 when it holds no rows this step.
void parallel_moe(const float* x, int64_t n_tokens, const MoeWeights& w, const RouterShape& shape,
                  const ExpertRanks& experts, MoeScratch& moe, MoeDispatchScratch& dispatch, float* out,
                  ThreadPool& pool);

}  // namespace aerie
