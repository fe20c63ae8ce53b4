// Int8 weights: symmetric, one F32 scale per output channel and group of inputs,
//   w[o, i] = q[o, i] * scale[o, i / group]
// held in one layout whatever the source: `<name>.weight` I8 [n_out, n_in] beside `<name>.weight_scale` F32
// [n_out, n_in / group] (ops/int8.h runs it; models/linear.h binds it). Two sources:
//   - a published compressed-tensors int8 checkpoint (the layout vLLM serves: weight I8, weight_scale per
//     channel [n_out, 1], per group [n_out, n_groups] or per tensor, in F32, BF16 or F16):
//     normalize_int8_scales widens the scales to F32 [n_out, n_groups];
//   - quantisation at load (--weights int8): quantize_projections_int8 replaces every float or FP8-block
//     projection (`*_proj.weight`, DeepSeek's `kv_a_proj_with_mqa.weight`, `lm_head.weight`; FP8 ones are
//     dequantised by their tiles first) by that layout; a tied head gets an int8 copy of the embedding
//     (the embedding itself stays as stored: a lookup reads one row). Routers, norms, embeddings and
//     EAGLE's `fc` stay as stored.
#pragma once

#include <cstdint>
#include <string>

#include "core/thread_pool.h"
#include "io/weight_store.h"

namespace aerie {

// kInt4: quant/int4_weights.h.
enum class WeightFormat { kAsStored, kInt8, kInt4 };

// "as-stored", "int8" or "int4"; anything else is an aerie::Error naming `what`.
WeightFormat parse_weight_format(const std::string& text, const std::string& what);

// Rewrites every I8 `*.weight`'s `*.weight_scale` as F32 [n_out, n_groups]. An I8 weight without a
// scale, a scale whose shape fits no strategy, or a zero point (asymmetric) is an aerie::Error naming the
// tensor. Returns the number of int8 weights.
int64_t normalize_int8_scales(WeightStore& store);

// Quantises the float projections as above, `group` inputs per scale (0: one per output channel; else a
// multiple of 32 dividing n_in). `tied_embedding`: the name of the embedding a tied head reads, or "".
// Returns the number of tensors quantised.
// Rows are quantised on `pool`'s threads when one is given.
int64_t quantize_projections_int8(WeightStore& store, int64_t group, const std::string& tied_embedding,
                                  ThreadPool* pool = nullptr);

}  // namespace aerie
