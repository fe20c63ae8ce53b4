// THE kernel API. Every op here has a naive scalar twin in ops/ref (ref::name, same signature minus the
// pool) that tests compare against; the versions here dispatch at run time to AVX-512-BF16 / AVX-512 /
// AVX2 / scalar code (core/cpu_features.h) and use the thread pool.
//
// Conventions: activations are float32, row-major, contiguous. Weights are Tensors in their stored dtype
// (F32, BF16, F16) laid out as PyTorch nn.Linear stores them: [n_out, n_in]. Accumulation is float32.
#pragma once

#include <cstdint>

#include "core/paged_rows.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace aerie::ops {

// y[r, o] = sum_i x[r, i] * w[o, i]  (+ bias[o] when bias is non-null)
//   x: [n_rows, n_in] f32;  w: [n_out, n_in] F32|BF16|F16, or a block type (forwarded to ops/ggml_blocks.h's
//   matmul_blocks);  bias: [n_out] any float dtype or null
//   y: [n_rows, n_out] f32 (overwritten)
// Small n_rows (decode, verification of K drafts) stream each weight row once for all rows, so a
// forward over 8 tokens costs little more than over 1; large n_rows use a GEMM (oneDNN where it wins).
// Below kGemmMinRows each output row is bit-identical whatever n_rows is (batch invariance).
void matmul(const float* x, int64_t n_rows, const Tensor& w, const Tensor* bias, float* y, ThreadPool& pool);

// out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight    (HF LlamaRMSNorm: the normalisation is
// computed in f32, then multiplied by the weight)
//   x, out: [n_rows, n] f32 (may alias); weight: [n] F32|BF16|F16
void rms_norm(const float* x, int64_t n_rows, int64_t n, const Tensor& weight, float eps, float* out, ThreadPool& pool);

// Rotary embedding (RoPE), in place, on a dim-wide slice of each head. For row r, head h and pair i < dim/2,
// with (a, b) the pair's two elements (RopeLayout) and f = attention_factor:
//   angle = float(positions[r]) * inv_freq[i]          (f32, as torch computes it; cos/sin in f32 too)
//   c = cos(angle) * f,  s = sin(angle) * f
//   x1 = p[a], x2 = p[b];  p[a] = x1 c - x2 s;  p[b] = x2 c + x1 s      (p: the head's slice, RopeSlice)
// inv_freq: [dim/2], the model's (llama3- or YaRN-scaled) table, models/rope_freqs.h. attention_factor is
// YaRN's mscale on MLA (1 elsewhere). Every tier gives the reference's bits: cos/sin come from the same libm
// calls and the rotation rounds each product and each sum once (no FMA), so the tier changes no logit.
enum class RopeLayout {
  kInterleaved,  // pairs (x0, x1), (x2, x3), ...: DeepSeek's complex form (MLA with rope_interleave)
  kHalfSplit,    // pairs (x_i, x_{i + dim/2}): HF's rotate_half (Llama; MLA without rope_interleave)
};
inline constexpr int64_t kRopeMaxDim = 1024;  // bound on dim: one row's cos/sin tables live on the stack

// Which values rope rotates: for r < n_rows, h < n_head, the dim floats at
// v + r * row_stride + h * head_stride + offset.
struct RopeSlice {
  int64_t n_rows = 0;
  int64_t row_stride = 0;  // floats from one row to the next
  int64_t n_head = 1;
  int64_t head_stride = 0;  // floats from one head to the next
  int64_t offset = 0;       // first rotated float within a head
  int64_t dim = 0;          // rotated floats per head: even, in (0, kRopeMaxDim]
  RopeLayout layout = RopeLayout::kHalfSplit;
};
// Whole contiguous heads: v is [n_rows, n_head, head_dim] and every value rotates.
inline RopeSlice rope_whole_heads(int64_t n_rows, int64_t n_head, int64_t head_dim, RopeLayout layout) {
  return RopeSlice{n_rows, n_head * head_dim, n_head, head_dim, 0, head_dim, layout};
}
//   positions: [n_rows];  inv_freq: [dim / 2];  threads split the rows.
void rope(float* v, const RopeSlice& slice, const int64_t* positions, const float* inv_freq, float attention_factor,
          ThreadPool& pool);
// Which kernel rope uses ("avx512", "avx2", "scalar"), for tests and logs.
const char* rope_isa();

// out[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)).   out may alias gate.
void silu_mul(const float* gate, const float* up, int64_t n, float* out, ThreadPool& pool);

// Causal grouped-query attention of one sequence's new queries over its KV cache.
//   q:   [n_q, n_head, head_dim] f32;  query i sits at position pos0 + i and sees cache rows [0, pos0 + i]
//   k,v: [n_kv, n_head_kv, head_dim] f32 (n_kv >= pos0 + n_q; row j is position j); head h reads kv head
//        h / (n_head / n_head_kv)
//   out: [n_q, n_head, head_dim] f32
//   scale: multiplies q.k (1/sqrt(head_dim) for Llama)
// Softmax is computed in f32 with the running-max (online) form.
void attention(const float* q, int64_t n_q, int64_t pos0, const float* k, const float* v, int64_t n_kv, int64_t n_head,
               int64_t n_head_kv, int64_t head_dim, float scale, float* out, ThreadPool& pool);
// The same with keys and values read through blocks (the paged KV cache): row j of k / v is
// [n_head_kv, head_dim] in the rows' KvDType (f32, bf16, or fp8 whose scale groups hold whole heads),
// widened to f32 as it is read; no copy of the cache is made. Each query's result depends only on its own
// keys, not on n_q (batch invariance).
void attention(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v, int64_t n_kv,
               int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out, ThreadPool& pool);
// How attention takes q and the softmax weights on this machine: 0 as f32; with AERIE_ATTENTION_BF16=1 on
// AVX-512-BF16 with bf16 keys and head_dim % 32 == 0, as bf16 products (vdpbf16ps, ops/cpu/attention_parts_avx512bf16.h): 1, each rounded to
// bf16 (Bf16Activations::kRounded), or 2, each split into bf16 hi + lo (kSplit, ~16 bits of mantissa).
int attention_bf16_parts(int64_t head_dim, KvDType key_dtype);

// out[r, :] = table[ids[r], :] converted to f32.   table: [n_vocab, n] F32|BF16|F16 or a block type (those
// rows dequantised, ids checked against n_vocab)
void embedding(const Tensor& table, const int64_t* ids, int64_t n_rows, float* out);

// x[i] += y[i]
void add_inplace(float* x, const float* y, int64_t n);

// In-place softmax over each row of [n_rows, n].
void softmax(float* x, int64_t n_rows, int64_t n);

// Index of the largest value (the first one on ties), as torch.argmax does.
int64_t argmax(const float* x, int64_t n);

// How BF16-weight matmuls treat f32 activations on AVX-512-BF16 machines (and, below the GEMM, int8 weights
// with one scale per channel on AVX-512-VNNI: int8 activations per block of 256 when rounded, int16 per row
// when split; ops/int8.h):
//   kRounded (default): activations rounded to one bf16 (what llama.cpp and bf16 PyTorch do), ~1e-2
//     relative error per matmul; the fastest: one dot-product instruction per pair of values;
//   kSplit: each activation is split into two bf16 parts (hi + lo, relative error ~2^-16), so results
//     match float32 math to ~1e-5 at twice the dot-product instructions (reference checks: `aerie logits`,
//     the tests that compare with float32/float64 references; tests/reference_precision.h).
// Set from the environment variable AERIE_BF16_ACTIVATIONS=split|rounded at start-up, the CLI's
// --bf16-activations, or here. The mode is process-wide and applies to every row count alike (never
// rounded for prefill and split for decode): speculative decoding compares a k-row forward with one-row
// forwards, so both must do the same math.
// Cost, Llama-3.2-1B: split prefills at ~half the rounded speed (two GEMMs); decode streams the same bytes
// in either mode; a k-row forward (verification) does twice the dot products split.
enum class Bf16Activations { kSplit, kRounded };
void set_bf16_activations(Bf16Activations mode);
Bf16Activations bf16_activations();

// Matmuls with at least this many rows go to the GEMM library (oneDNN) when it supports the dtype.
inline constexpr int64_t kGemmMinRows = 32;

// Batch-invariant kernels (`--deterministic`, a request's "deterministic"): while a BatchInvariantScope
// that turned them on lives on the calling thread, every matmul takes the row-invariant kernels at any row
// count, never the GEMM library, whose blocking (and so the order of its sums) depends on the number of
// rows. Each output row's bits then depend on that row alone, so a request's tokens do not depend on what
// else shares its steps, on prompt chunking, on preemption (the recomputed prompt gets the decode rows'
// bits) or on speculation. MLA takes its absorbed form for every row (models/mla.h) for the same reason.
// Attention, norms, rope and the element-wise ops are row-invariant always. The price is prefill speed
// (docs/serving.md, "Deterministic mode").
bool batch_invariant();
class BatchInvariantScope {
 public:
  explicit BatchInvariantScope(bool on);
  ~BatchInvariantScope();
  BatchInvariantScope(const BatchInvariantScope&) = delete;
  BatchInvariantScope& operator=(const BatchInvariantScope&) = delete;

 private:
  bool previous_;
};
// Whether a matmul of n_rows rows may go to the GEMM library (the dispatch of every weight format).
inline bool gemm_rows_allowed(int64_t n_rows) { return n_rows >= kGemmMinRows && !batch_invariant(); }

// Which kernel family matmul would use for this weight dtype ("avx512_bf16", "avx512", "avx2",
// "scalar"; for block types matmul_blocks_isa's "avx512_vnni", "avx2", "scalar"); for bench output and logs.
const char* matmul_isa(DType weight_dtype);

}  // namespace aerie::ops
