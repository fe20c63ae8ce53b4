// A GGUF model file as a target: the file's metadata becomes the config.json it stands for
// (io/gguf_config.h), its tensors keep their bytes and dtypes (block-quantised types included: ops read them
// in place) and are renamed from llama.cpp's names to the publisher's, so LlamaModel and DeepseekV3Model
// bind them through the same tables as a Hugging Face folder.
//
//   llama (LlamaForCausalLM)            blk.N.attn_q.weight -> model.layers.N.self_attn.q_proj.weight, ...
//     llama.cpp's converter permutes q_proj/k_proj rows within each head (HF rows i and i + head_dim/2 become
//     2i and 2i + 1); the model rotates adjacent pairs instead of halves (LlamaConfig::qk_rows_interleaved),
//     which gives the same q.k for every pair of positions, so nothing is copied to undo it.
//     rope_freqs.weight (Llama 3.1's scaling, per-frequency divisors) -> LlamaConfig::rope_freq_factors.
//   deepseek2 (DeepseekV3ForCausalLM)   blk.N.attn_kv_a_mqa.weight -> ...self_attn.kv_a_proj_with_mqa.weight;
//     the stacked experts ffn_{gate,up,down}_exps [n_expert, ...] are viewed one expert at a time as
//     mlp.experts.E.{gate,up,down}_proj.weight (no copy). Current converters split kv_b_proj per head into
//     attn_k_b [n_head, kv_lora, qk_nope] (W_k transposed) and attn_v_b [n_head, v_head_dim, kv_lora]: viewed
//     2-D as self_attn.k_b_proj / v_b_proj.weight (MlaWeights::k_b / v_b; no Hugging Face name exists), each
//     layer's shapes checked under the file's names first; older files' attn_kv_b is kv_b_proj itself.
//     block_count counts the MTP layer a file keeps (nextn_predict_layers) after the decoder layers, as
//     blk.L.* and blk.L.nextn.{eh_proj, enorm, hnorm, embed_tokens, shared_head_head, shared_head_norm}:
//     model.layers.L.* for the MTP drafter (--draft mtp).
#pragma once

#include <filesystem>
#include <memory>

#include "core/thread_pool.h"
#include "io/gguf.h"
#include "models/model.h"

namespace aerie {

struct LoadOptions;

// Loads a GGUF file (or split GGUF) as a Model. Throws aerie::Error naming the file and the problem: an
// architecture other than llama / deepseek2, a missing tensor, a shape that disagrees with the metadata,
// a ggml type aerie does not read, or load options a GGUF cannot take (--weights int8/int4: the file's
// weights are used as stored).
std::unique_ptr<Model> load_gguf_model(const std::filesystem::path& path, ThreadPool& pool, const LoadOptions& options);

// The GGUF tensors of one architecture renamed to the Hugging Face names in place; the stacked expert
// tensors of deepseek2 viewed per expert. Exposed for tests.
void rename_gguf_tensors(const GgufMetadata& metadata, WeightStore& store);

}  // namespace aerie
