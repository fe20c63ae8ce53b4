// Int4 weights in ops/int4.h's layout, `<name>.weight` U8 [n_out, n_in / 2] packed values beside
// `<name>.weight_scale` F32 and `<name>.weight_zero` U8 [n_out, n_groups] (and `<name>.weight_perm` I32
// [n_in] for act order), bound by models/linear.h. Three sources:
//   - published 4-bit GPTQ and AWQ checkpoints (config.json quantization_config.quant_method "gptq" or
//     "awq"), repacked at load by convert_int4_checkpoint:
//       GPTQ (AutoGPTQ / transformers / GPTQModel): per projection `qweight` I32 [n_in / 8, n_out] (input i
//         in bits 4 (i % 8) of row i / 8), `qzeros` I32 [n_groups, n_out / 8] (output o in bits 4 (o % 8)),
//         `scales` F16 [n_groups, n_out], `g_idx` I32 [n_in] (input i's group). checkpoint_format "gptq"
//         (v1, the default) stores every zero point minus one: zero = stored + 1; "gptq_v2" stores it as is.
//         A g_idx other than i / group_size (desc_act) is kept as a permutation: the columns are repacked
//         in group order and the activations gathered into that order before each matmul.
//       AWQ GEMM (AutoAWQ): `qweight` I32 [n_in, n_out / 8] and `qzeros` I32 [n_groups, n_out / 8] packed
//         along the outputs in AWQ's interleaved order (output 8j + k in bits 4 * {0,4,1,5,2,6,3,7}[k]),
//         `scales` F16 [n_groups, n_out]; zero points as stored.
//     w[o, i] = (q - zero) * scale in both.
//   - published compressed-tensors W4A16 checkpoints (llm-compressor; quant_method "compressed-tensors",
//     format "pack-quantized", one weights scheme in config_groups: num_bits 4, type int, strategy group or
//     channel, symmetric or not; no activation quantisation): per projection `weight_packed` I32
//     [n_out, n_in / 8] (input i in bits 4 (i % 8) of word i / 8, stored as the signed value + 8),
//     `weight_scale` [n_out, n_groups] BF16/F16/F32, `weight_zero_point` I32 [n_out / 8, n_groups] (output o
//     in bits 4 (o % 8) of row o / 8, signed + 8) when asymmetric, `weight_shape` [2] = {n_out, n_in}, act
//     order's `weight_g_idx` I32 [n_in] (kept as a permutation, as GPTQ's). w = (q - zero) * scale on the
//     stored values: a symmetric checkpoint's zero point is 8. The `ignore` list must not name a packed module.
//   Which projections are int4 is the checkpoint's choice, tensor by tensor: what is stored as a float
//   `.weight` (lm_head, DeepSeek's router `mlp.gate`, whole layers left out by modules_to_not_convert or
//   ignore) stays so. The original tensors stay mapped (unread after the repack).
//   - quantisation at load (--weights int4): quantize_projections_int4 replaces every float or FP8-block
//     projection (`*_proj.weight`, `*_proj_with_mqa.weight`, `lm_head.weight`; a tied head gets an int4 copy
//     of the embedding) by asymmetric min/max round-to-nearest per group (ops::quantize_int4). For
//     DeepSeek-V3 that is every attention projection, dense FFN, routed and shared expert, the MTP layer's
//     eh_proj and block, and lm_head; the router, norms, embeddings and the MTP layer's shared_head stay as
//     stored.
// MLA's kv_b_proj is int4 like the rest (published DeepSeek AWQ checkpoints quantise it too): the absorbed
// form reads it a head's rows at a time through linear_rows, which dequantises int4 rows exactly
// (models/linear.h), so it is never widened whole.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "io/weight_store.h"

namespace aerie {

// When `config` (a config.json) has a GPTQ, AWQ or compressed-tensors pack-quantized quantization_config,
// repacks every `<base>.qweight` (`<base>.weight_packed`) as above and returns how many; 0 without one (and
// for compressed-tensors int8, quant/quantize.h). Bits other than 4, another AWQ version or compressed-tensors
// format, a missing or misshapen tensor, a weight_shape that disagrees, a zero point above 16 or a group that
// ops/int4.h cannot run are an aerie::Error naming the key or tensor. Projections are repacked on `pool`'s threads when one is given.
int64_t convert_int4_checkpoint(WeightStore& store, const nlohmann::json& config, ThreadPool* pool = nullptr);

// Quantises the float (and FP8-block) projections as above, `group` inputs per scale (0: one group per output channel;
// else a multiple of 64 dividing n_in, else an aerie::Error naming the tensor). `tied_embedding`: the
// name of the embedding a tied head reads, or "". Returns the number of tensors quantised.
int64_t quantize_projections_int4(WeightStore& store, int64_t group, const std::string& tied_embedding,
                                  ThreadPool* pool = nullptr);

}  // namespace aerie
