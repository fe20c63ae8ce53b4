// What a model offers LoRA adapters (models/lora.h): the projections an adapter may target and their shapes.
// A plain value the model builds from its config, so the adapter loader checks shapes without knowing the
// architecture and a model that takes no adapters says why.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace aerie {

// The projections of a Llama decoder layer, by PEFT's module names (lora_module_name).
enum class LoraModule { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kLoraModules = 7;

// "q_proj", "k_proj", ... (the last component of the module's path in the checkpoint).
const char* lora_module_name(LoraModule module);
// "self_attn" or "mlp": the block the module sits in (model.layers.N.<block>.<name>).
const char* lora_module_block(LoraModule module);

struct LoraProjectionShape {
  int64_t n_out = 0, n_in = 0;
};

struct LoraTargets {
  // Non-empty: this model takes no adapters, and why ("deepseek_v3 models take no LoRA adapters yet").
  std::string refusal;
  int64_t n_layer = 0;
  std::array<LoraProjectionShape, kLoraModules> shapes{};  // by LoraModule
  // The model's q/k rows are GGUF's (each head's two RoPE halves interleaved, llama.cpp's permutation) rather
  // than the published order: the loader permutes an adapter's q_proj / k_proj B rows the same way.
  bool qk_rows_permuted = false;
  int64_t head_dim = 0;  // the heads' width, for that permutation
};

}  // namespace aerie
