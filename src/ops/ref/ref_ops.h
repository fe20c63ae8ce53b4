// Naive scalar twins of every op in ops/ops.h (same arguments, no thread pool): the definitions the
// optimized kernels are tested against. Clarity over speed; float32 math, double where a sum is long.
#pragma once

#include <cstdint>

#include "core/paged_rows.h"
#include "core/tensor.h"
#include "ops/ops.h"

namespace aerie::ops::ref {

// Element i of a float weight tensor (F32, BF16, F16) as float.
float load_float(const Tensor& t, int64_t i);

void matmul(const float* x, int64_t n_rows, const Tensor& w, const Tensor* bias, float* y);
void rms_norm(const float* x, int64_t n_rows, int64_t n, const Tensor& weight, float eps, float* out);
// Textbook form of ops.h's formula: cos/sin per value, x1 c - x2 s and x2 c + x1 s.
void rope(float* v, const RopeSlice& slice, const int64_t* positions, const float* inv_freq, float attention_factor);
void silu_mul(const float* gate, const float* up, int64_t n, float* out);
void attention(const float* q, int64_t n_q, int64_t pos0, const float* k, const float* v, int64_t n_kv,
               int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out);
// Paged rows of any KvDType, each value widened one at a time (PagedRows::load). bf16_parts (as
// ops::attention_bf16_parts says the kernel does): 1 or 2 takes each q value and each unnormalised softmax
// weight exp(s - max) as bf16 (1) or bf16 hi + lo (2) before its products; the normaliser keeps the weights
// unrounded. Arithmetic in double.
void attention(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v, int64_t n_kv,
               int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out, int bf16_parts = 0);
void embedding(const Tensor& table, const int64_t* ids, int64_t n_rows, float* out);
void softmax(float* x, int64_t n_rows, int64_t n);
int64_t argmax(const float* x, int64_t n);

}  // namespace aerie::ops::ref
