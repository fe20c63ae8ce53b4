// Int8-weight kernels (ops/int8.h's contract), for output columns [o_begin, o_end) and every row:
// y[r * y_stride + o]. q: [n_out, n_in] int8 with n_in = x.n_in; scale: [n_out, n_groups].
#pragma once

#include <cstdint>

#include "ops/cpu/kernels.h"

namespace aerie::ops::cpu {

// AVX-512-BF16: the int8 rows widened to bf16 in registers, activations packed as for the BF16 kernel.
void matmul_int8_avx512bf16(const PackedRows& x, const int8_t* q, const float* scale, int64_t n_groups,
                            int64_t o_begin, int64_t o_end, float* y, int64_t y_stride);
// out[i] = bf16(q[i]) (exact), n a multiple of 32 or not.
void widen_int8_bf16(const int8_t* q, int64_t n, uint16_t* out);

}  // namespace aerie::ops::cpu
