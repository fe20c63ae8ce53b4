#include "models/ffn.h"

#include "ops/ops.h"

namespace aerie {

FfnWeights bind_ffn(const WeightStore& store, const std::string& prefix, int64_t n_ff, int64_t n_embd,
                    bool fp8_allowed) {
  return FfnWeights{bind_linear(store, prefix + "gate_proj", n_ff, n_embd, fp8_allowed),
                    bind_linear(store, prefix + "up_proj", n_ff, n_embd, fp8_allowed),
                    bind_linear(store, prefix + "down_proj", n_embd, n_ff, fp8_allowed)};
}

void swiglu_ffn(const float* x, int64_t n_tokens, const FfnWeights& w, FfnScratch& scratch, float* out,
                ThreadPool& pool, LoraAt lora) {
  if (n_tokens == 0) return;  // a data-parallel rank without rows this step
  const int64_t n_ff = w.gate.n_out();
  float* gate = scratch.gate.reserve(n_tokens * n_ff);  // [n_tokens, n_ff]
  float* up = scratch.up.reserve(n_tokens * n_ff);      // [n_tokens, n_ff]
  linear(x, n_tokens, w.gate, gate, pool);
  linear(x, n_tokens, w.up, up, pool);
  lora.add(LoraModule::kGate, x, gate, pool);
  lora.add(LoraModule::kUp, x, up, pool);
  ops::silu_mul(gate, up, n_tokens * n_ff, gate, pool);  // gate <- silu(gate) * up
  linear(gate, n_tokens, w.down, out, pool);
  lora.add(LoraModule::kDown, gate, out, pool);
}

}  // namespace aerie
