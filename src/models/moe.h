// DeepSeek-V3's routed mixture of experts with its noaux_tc router; every expert, routed or shared, is the
// one SwiGLU FFN of models/ffn.h.
//
// Router (per token; scores = sigmoid(gate logits), biased = scores + e_score_correction_bias):
//   1. the n_expert experts form n_group equal groups; a group's score is the sum of its two largest biased
//      scores; the topk_group best groups are kept (ties: lower group index first);
//   2. among the kept groups' experts, the n_expert_used with the largest biased scores are chosen
//      (ties: lower expert index first), in that order;
//   3. weights are the chosen experts' UNBIASED scores (the bias only steers selection), divided by their
//      sum (+1e-20) when norm_topk_prob, times routed_scaling_factor.
// Output = sum over chosen experts of weight * expert(x) + shared_experts(x).
// Checked against transformers' DeepseekV3TopkRouter / DeepseekV3MoE and DeepSeek's inference/model.py Gate.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "dist/shard.h"
#include "models/ffn.h"
#include "models/scratch.h"

namespace aerie {

struct RouterShape {
  int64_t n_expert = 0;       // n_routed_experts
  int64_t n_expert_used = 0;  // num_experts_per_tok
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
};

// One token, as above. scores: [n_expert] (after the sigmoid); bias: [n_expert] or null.
// experts, weights: [n_expert_used], experts in the order chosen.
void route_token(const float* scores, const float* bias, const RouterShape& shape, int32_t* experts, float* weights);

struct MoeWeights {
  LinearWeight router;                  // mlp.gate.weight [n_expert, n_embd] (a float matrix)
  const Tensor* router_bias = nullptr;  // mlp.gate.e_score_correction_bias [n_expert] (F32), or null
  std::vector<FfnWeights> experts;      // mlp.experts.{e}.*  [n_expert]
  bool has_shared = false;
  FfnWeights shared;                    // mlp.shared_experts.* (n_ff = moe_intermediate_size * n_shared_experts)
  // Expert parallelism (issue 22): this rank runs only the routed experts in `owned` (every rank routes
  // every token the same way), and the shared experts only when shared_here (whole on one rank, or each rank
  // its slice of their n_ff); the ranks' outputs are then summed by
  // models/parallel/parallel_moe.h. One process: all, here.
  dist::Range owned;                    // of [0, n_expert), set when bound
  bool shared_here = true;
};

struct MoeScratch {
  ScratchBuffer logits, x_expert, y_expert, shared_out;
  std::vector<float> bias;              // [n_expert] router bias as f32
  std::vector<int32_t> chosen;          // [n_tokens, n_expert_used]
  std::vector<float> chosen_weight;     // [n_tokens, n_expert_used]
  std::vector<int64_t> expert_begin;    // [n_expert + 1] offsets into by_expert
  std::vector<int64_t> by_expert;       // [n_tokens * n_expert_used] (token, slot) pairs grouped by expert
  std::vector<int64_t> expert_fill;     // [n_expert] next free slot of each expert in by_expert
  // [n_expert] (token, expert) rows routed to each expert, owned or not, summed over every layer and step
  // that used this scratch: the expert load (DeepseekV3Model::expert_load).
  std::vector<int64_t> routed_rows;
  FfnScratch ffn;
};

// The MoE block: routes every token, then runs each expert that any token chose ONCE over all of its
// tokens (rows gathered, outputs scattered back weighted), so one step reads each chosen expert's weights
// once however many tokens chose it. Per token the routed outputs are summed in ascending expert index,
// then the shared experts' output is added. Under expert parallelism only w.owned's experts (and the shared
// ones where w.shared_here) run: `out` is this rank's partial sum.
//   x: [n_tokens, n_embd] f32 (normalised), out: [n_tokens, n_embd] f32
void moe_ffn(const float* x, int64_t n_tokens, const MoeWeights& w, const RouterShape& shape, MoeScratch& scratch,
             float* out, ThreadPool& pool);

// The parts of moe_ffn, for a caller that moves rows between ranks in between (models/parallel/moe_dispatch.h):
// moe_route fills scratch.chosen and scratch.chosen_weight ([n_tokens, n_expert_used] each) from x.
void moe_route(const float* x, int64_t n_tokens, const MoeWeights& w, const RouterShape& shape, MoeScratch& scratch,
               ThreadPool& pool);
// rows[e] += the pairs of chosen [n_pairs] that name expert e (rows grows to n_expert).
void count_routed_rows(const int32_t* chosen, int64_t n_pairs, int64_t n_expert, std::vector<int64_t>& rows);
// out[r] = sum, in ascending expert index, of weight[r, j] * expert_e(x[r]) over the slots j of row r whose
// expert e = chosen[r, j] is one of w.owned (any other value, -1 included, is skipped).
//   x: row r at x + r * x_stride (n_embd floats); chosen, weight: [n_rows, k]; out: [n_rows, n_embd]
void moe_run_experts(const float* x, int64_t x_stride, int64_t n_rows, const int32_t* chosen, const float* weight,
                     int64_t k, const MoeWeights& w, MoeScratch& scratch, float* out, ThreadPool& pool);

}  // namespace aerie
