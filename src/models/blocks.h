// Blocks shared by targets and draft heads: grouped-query attention over per-sequence KV caches (here) and
// the SwiGLU FFN (models/ffn.h). Each takes the already-normalised input and returns the block's output
// (the caller adds the residual), so an architecture file reads as the recipe: norm -> block -> residual.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "models/linear.h"
#include "models/lora.h"
#include "models/model.h"
#include "models/scratch.h"
#include "ops/ops.h"

namespace aerie {

struct AttentionWeights {
  LinearWeight q;  // [n_head * head_dim, n_in]
  LinearWeight k;  // [n_head_kv * head_dim, n_in]
  LinearWeight v;  // [n_head_kv * head_dim, n_in]
  LinearWeight o;  // [n_out, n_head * head_dim]
  const Tensor* q_bias = nullptr;  // optional biases (attention_bias)
  const Tensor* k_bias = nullptr;
  const Tensor* v_bias = nullptr;
  const Tensor* o_bias = nullptr;
};

struct AttentionShape {
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  float scale = 0.0f;  // multiplies q.k
  // Which values of a head RoPE pairs: HF Llama's halves, or adjacent pairs (GGUF's permuted q/k rows).
  ops::RopeLayout rope_layout = ops::RopeLayout::kHalfSplit;
};

struct AttentionScratch {
  ScratchBuffer q, k, v, attn;
};

// Causal GQA with RoPE for every sequence of the batch at decoder layer `layer`:
//   x:         [n_tokens, n_in] f32 (normalised input)
//   positions: [n_tokens] (each row's position in its sequence)
//   out:       [n_tokens, n_out] f32
// Writes each row's rotated key and value into its sequence's cache at its position; does not advance
// the caches (the caller does once after the last layer). `lora` adds the rows' adapters to q, k, v and o.
void gqa_attention(const float* x, int64_t n_tokens, std::span<const SequenceRows> sequences, const int64_t* positions,
                   int64_t layer, const AttentionWeights& w, const AttentionShape& shape, const float* inv_freq,
                   AttentionScratch& scratch, float* out, ThreadPool& pool, LoraAt lora = {});

// Traces (io/trace.h, under the caller's trace::Where) what gqa_attention left in `scratch` and `out`: q and
// k after RoPE, v ([n_tokens, heads * head_dim] each), attn_out (after o_proj, [n_tokens, n_out]).
void trace_attention(AttentionScratch& scratch, const AttentionShape& shape, int64_t n_tokens, const float* out,
                     int64_t n_out);

}  // namespace aerie
