// The SwiGLU feed-forward block, one for every FFN of every model and head: Llama's MLP, DeepSeek-V3's
// dense layers, each routed expert and the shared experts (models/moe.h), and the draft heads' MLPs.
// Its three projections are LinearWeights, so the same code runs whatever the checkpoint stores
// (F32/BF16/F16, FP8 block-scaled, int8, int4).
#pragma once

#include <cstdint>
#include <string>

#include "core/thread_pool.h"
#include "io/weight_store.h"
#include "models/linear.h"
#include "models/lora.h"
#include "models/scratch.h"

namespace aerie {

struct FfnWeights {
  LinearWeight gate;  // gate_proj [n_ff, n_in]
  LinearWeight up;    // up_proj   [n_ff, n_in]
  LinearWeight down;  // down_proj [n_out, n_ff]
  uint64_t nbytes() const { return gate.nbytes() + up.nbytes() + down.nbytes(); }
};

struct FfnScratch {
  ScratchBuffer gate, up;  // [n_tokens, n_ff] each
};

// Binds `prefix` + {gate,up,down}_proj (e.g. "model.layers.3.mlp.", "...mlp.experts.7."), gate and up
// [n_ff, n_embd], down [n_embd, n_ff]; FP8 needs `fp8_allowed` (models/linear.h). A mismatch is an
// aerie::Error naming the tensor.
FfnWeights bind_ffn(const WeightStore& store, const std::string& prefix, int64_t n_ff, int64_t n_embd,
                    bool fp8_allowed);

// out = down(silu(gate(x)) * up(x));  x: [n_tokens, n_in] f32 (n_tokens may be 0), out: [n_tokens, n_out] f32
// `lora` adds the rows' adapters to each projection's output (a Llama MLP; experts take none).
void swiglu_ffn(const float* x, int64_t n_tokens, const FfnWeights& w, FfnScratch& scratch, float* out,
                ThreadPool& pool, LoraAt lora = {});

}  // namespace aerie
