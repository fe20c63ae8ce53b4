// RoPE kernels (ops::rope's contract), one per instruction-set tier: the heads of one row, given that row's
// cos/sin tables. ops/rope.cpp builds the tables (the same libm calls on every tier) and splits the rows.
#pragma once

#include <cstdint>

#include "ops/ops.h"

namespace aerie::ops::cpu {

// One row's tables in the form every tier applies, for element j of a head's slice:
//   out[j] = x[j] * cos_t[j] + x[partner(j)] * sin_t[j]
// partner(j) = j ^ 1 (interleaved) or j +- dim/2 (half-split); sin_t holds -s on a pair's first element and
// +s on its second, so x1 c + x2 (-s) gives x1 c - x2 s bit for bit.   cos_t, sin_t: [dim]
// v points at the row's first head's slice (offset applied); head h's slice starts at v + h * head_stride.
void rope_heads_avx512(float* v, int64_t n_head, int64_t head_stride, int64_t dim, RopeLayout layout,
                       const float* cos_t, const float* sin_t);
void rope_heads_avx2(float* v, int64_t n_head, int64_t head_stride, int64_t dim, RopeLayout layout,
                     const float* cos_t, const float* sin_t);

}  // namespace aerie::ops::cpu
