// LinearWeight: one projection as the checkpoint stores it, so model code calls one function whatever the
// dtype: a float matrix (F32/BF16/F16, ops::matmul) or an F8_E4M3 matrix with its per-128x128-tile F32
// multipliers `<name>.weight_scale_inv` (ops::matmul_fp8_block, no up-front dequantisation), or an I8
// matrix with its F32 `<name>.weight_scale` [n_out, n_groups] (ops::matmul_int8; quant/quantize.h), or a
// U8 matrix of packed int4 values [n_out, n_in / 2] with `<name>.weight_scale` F32 and `<name>.weight_zero`
// U8 [n_out, n_groups] and, for GPTQ's act-order checkpoints, `<name>.weight_perm` I32 [n_in] (ops/int4.h;
// quant/int4_weights.h), or a GGUF block-quantised matrix (DType::kQ4_K ...: ops/ggml_blocks.h, which
// ops::matmul reads in place). Every projection of every model and draft head goes through here, output
// heads included. Under tensor parallelism a projection may be one rank's row-parallel shard, whose output
// linear() sums over the ranks itself (models/parallel/parallel_linear.h), so a block never reduces.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "io/weight_store.h"

namespace aerie {
namespace dist {
class Communicator;
}

struct LinearWeight {
  const Tensor* weight = nullptr;     // [n_out, n_in]
  const Tensor* scale_inv = nullptr;  // [ceil(n_out/128), ceil(n_in/128)] F32 for FP8 weights, else null
  const Tensor* scale = nullptr;      // [n_out, n_groups] F32 for I8 and int4 weights, else null
  const Tensor* zero = nullptr;       // [n_out, n_groups] U8 for int4 weights (then weight is U8 [n_out, n_in / 2])
  const Tensor* perm = nullptr;       // [n_in] I32 or null: int4 column j holds input perm[j] (GPTQ act order)
  // Row-parallel: weight holds this rank's columns of the projection, and linear() sums y over these ranks
  // (one all-reduce) so that every rank ends with the whole output. Null: y is this process's own.
  dist::Communicator* sum_over_ranks = nullptr;

  int64_t n_out() const { return weight->dim(0); }
  int64_t n_in() const { return is_int4() ? 2 * weight->dim(1) : weight->dim(1); }
  bool is_fp8() const { return scale_inv != nullptr; }
  bool is_int8() const { return scale != nullptr && zero == nullptr; }
  bool is_int4() const { return zero != nullptr; }
  // ", int8 projections" / ", int4 projections" when quantised, else "" (for a model's describe()).
  const char* format_note() const { return is_int4() ? ", int4 projections" : is_int8() ? ", int8 projections" : ""; }
  uint64_t nbytes() const {
    uint64_t bytes = weight->nbytes();
    for (const Tensor* t : {scale_inv, scale, zero, perm}) bytes += t != nullptr ? t->nbytes() : 0;
    return bytes;
  }
};

// A float matrix viewed as a projection (a tied head, a borrowed table).
inline LinearWeight float_linear(const Tensor* weight) { return LinearWeight{weight, nullptr, nullptr}; }

// Binds `<name>.weight` of shape [n_out, n_in]; when it is F8_E4M3 also `<name>.weight_scale_inv`, which
// must be F32 [ceil(n_out/128), ceil(n_in/128)]. FP8 weights need `fp8_allowed` (the config's
// quantization_config). When I8, also `<name>.weight_scale`, F32 [n_out, n_groups] as
// normalize_int8_scales leaves it. When U8, the int4 tensors above. Every mismatch is an aerie::Error
// naming the tensor.
LinearWeight bind_linear(const WeightStore& store, const std::string& name, int64_t n_out, int64_t n_in,
                         bool fp8_allowed);

// Rows [row_begin, row_end) of the weight as f32 [row_end - row_begin, n_in] in `out`, whatever its format
// (FP8 tiles, int8 scales and int4 zero points and scales applied, an int4 act-order permutation undone):
// for code that reads a few rows of a projection itself (MLA's kv_b).
void linear_rows(const LinearWeight& w, int64_t row_begin, int64_t row_end, float* out);

// y = x w^T (+ bias):  x [n_rows, n_in] f32 -> y [n_rows, n_out] f32;  bias [n_out] any float dtype or null.
// A row-parallel w (sum_over_ranks) then sums y over its ranks: every rank must call it with the same n_rows.
void linear(const float* x, int64_t n_rows, const LinearWeight& w, float* y, ThreadPool& pool,
            const Tensor* bias = nullptr);

}  // namespace aerie
