// BF16-weight matmul with AVX-512-BF16 dot products (vdpbf16ps): each instruction multiplies 32 bf16
// pairs and adds adjacent products into 16 float lanes.
//
// Batch invariance: every output y[r, o] is computed by the same instruction sequence whatever the number
// of rows in the call: one accumulator, the 32-wide chunks of the row in order (hi part, then lo part in
// split mode), a masked last chunk, then one fixed horizontal sum. The micro-kernels below only change
// how many outputs (G weight rows) and activation rows (R) share a pass, never that sequence, so a k-token
// forward gives bit-identical results to k one-token forwards (what speculative verification compares).
//
// Memory: a pass streams G consecutive weight rows (contiguous in memory) once for all R activation rows,
// and with more than one block of rows, the same G rows serve every block while they sit in L1. That is
// what makes verifying K draft tokens cost little more than one decode step: the weights stream from
// memory once, prefetched into L2 a few passes ahead so the stream keeps going while the rows compute.
#include <immintrin.h>

#include <algorithm>

#include "ops/cpu/kernels.h"
#include "ops/cpu/hsum_avx512.h"

namespace aerie::ops::cpu {
namespace {

inline __m512bh load_bh_tail(const uint16_t* p, __mmask32 m) { return (__m512bh)_mm512_maskz_loadu_epi16(m, p); }

// The register loops must be unrolled completely, or GCC keeps acc[][] in memory and stores every
// accumulator each iteration (it did at -O3 without these).
#define AERIE_UNROLL _Pragma("GCC unroll 16")

// Outputs [o, o + G) for the R rows of one packed block:  y[r * y_stride + o + g].
//   xb: one block of PackedRows, [n_chunks][R][P][32];  w: [n_out, n_in] bf16
// kPrefetch: the first row block of a pass prefetches the weights about kPrefetchBytes ahead (1 to 4
// passes) into L2 (into L1, they took the line-fill buffers the demand loads need); later row blocks of
// the same pass find the G rows in L1 and prefetch nothing.
constexpr int64_t kPrefetchBytes = 128 * 1024;
template <int R, int G, int P, bool kPrefetch>
inline void pass(const uint16_t* xb, int64_t n_in, const uint16_t* w, int64_t o, float* y, int64_t y_stride) {
  const uint16_t* wr = w + o * n_in;  // G rows, contiguous
  const int64_t ahead = std::clamp<int64_t>(kPrefetchBytes / (2 * G * n_in), 1, 4) * G * n_in;
  const __mmask32 tail = n_in % 32 == 0 ? __mmask32(~0u) : __mmask32((uint64_t(1) << (n_in % 32)) - 1);
  __m512 acc[R][G];
  AERIE_UNROLL for (int r = 0; r < R; ++r)
    AERIE_UNROLL for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  // One loop for full chunks and the last (masked; x is zero-padded) one.
  for (int64_t i = 0; i < n_in; i += 32, xb += R * P * 32) {
    const __mmask32 m = i + 32 <= n_in ? __mmask32(~0u) : tail;
    __m512bh a[G];
    AERIE_UNROLL for (int g = 0; g < G; ++g) {
      if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(wr + g * n_in + i + ahead), _MM_HINT_T1);
      a[g] = load_bh_tail(wr + g * n_in + i, m);
    }
    AERIE_UNROLL for (int r = 0; r < R; ++r) {
      AERIE_UNROLL for (int p = 0; p < P; ++p) {  // hi, then lo
        const __m512bh xv = (__m512bh)_mm512_loadu_si512(xb + (r * P + p) * 32);
        AERIE_UNROLL for (int g = 0; g < G; ++g) acc[r][g] = _mm512_dpbf16_ps(acc[r][g], a[g], xv);
      }
    }
  }
  AERIE_UNROLL for (int r = 0; r < R; ++r)
    AERIE_UNROLL for (int g = 0; g < G; ++g) y[r * y_stride + o + g] = hsum512(acc[r][g]);
}

// One pass of G weight rows for a block of `rows` (1..kPackRows) activation rows.
template <int G, int P, bool kPrefetch>
inline void pass_rows(int64_t rows, const uint16_t* xb, int64_t n_in, const uint16_t* w, int64_t o, float* y,
                      int64_t y_stride) {
  switch (rows) {
    case 1: return pass<1, G, P, kPrefetch>(xb, n_in, w, o, y, y_stride);
    case 2: return pass<2, G, P, kPrefetch>(xb, n_in, w, o, y, y_stride);
    case 3: return pass<3, G, P, kPrefetch>(xb, n_in, w, o, y, y_stride);
    case 4: return pass<4, G, P, kPrefetch>(xb, n_in, w, o, y, y_stride);
    case 5: return pass<5, G, P, kPrefetch>(xb, n_in, w, o, y, y_stride);
    case 6: return pass<6, G, P, kPrefetch>(xb, n_in, w, o, y, y_stride);
    case 7: return pass<7, G, P, kPrefetch>(xb, n_in, w, o, y, y_stride);
    default: return pass<8, G, P, kPrefetch>(xb, n_in, w, o, y, y_stride);
  }
}

// Outputs [o_begin, o_end) for the R (<= kPackRows) rows of one block: passes of G weight rows, single
// rows for the remainder.
template <int R, int G, int P>
void one_block(const uint16_t* xb, int64_t n_in, const uint16_t* w, int64_t o_begin, int64_t o_end, float* y,
               int64_t y_stride) {
  int64_t o = o_begin;
  for (; o + G <= o_end; o += G) pass<R, G, P, true>(xb, n_in, w, o, y, y_stride);
  for (; o < o_end; ++o) pass<R, 1, P, true>(xb, n_in, w, o, y, y_stride);
}

// Outputs [o, o + G) for every row block in turn, while the G weight rows are in L1: the weights stream
// from memory once, and that stream (prefetched by the first block) runs on while later blocks compute.
template <int G, int P>
inline void all_blocks(const PackedRows& x, const uint16_t* w, int64_t o, float* y, int64_t y_stride,
                       int64_t block_size) {
  pass_rows<G, P, true>(std::min(kPackRows, x.n_rows), x.data, x.n_in, w, o, y, y_stride);
  for (int64_t r = kPackRows; r < x.n_rows; r += kPackRows) {
    pass_rows<G, P, false>(std::min(kPackRows, x.n_rows - r), x.data + r / kPackRows * block_size, x.n_in, w, o,
                           y + r * y_stride, y_stride);
  }
}

// G chosen so that R * G accumulators, the G weight vectors and one x vector fit the 32 registers, with
// enough independent accumulators (vdpbf16ps: ~6 cycles latency, 1-2 per cycle) where compute dominates.
template <int P>
void dispatch(const PackedRows& x, const uint16_t* w, int64_t o_begin, int64_t o_end, float* y, int64_t y_stride) {
  const int64_t n_in = x.n_in;
  switch (x.n_rows) {
    case 1: return one_block<1, 8, P>(x.data, n_in, w, o_begin, o_end, y, y_stride);
    case 2: return one_block<2, 8, P>(x.data, n_in, w, o_begin, o_end, y, y_stride);
    case 3: return one_block<3, 6, P>(x.data, n_in, w, o_begin, o_end, y, y_stride);
    case 4: return one_block<4, 5, P>(x.data, n_in, w, o_begin, o_end, y, y_stride);
    case 5: return one_block<5, 4, P>(x.data, n_in, w, o_begin, o_end, y, y_stride);
    case 6: return one_block<6, 4, P>(x.data, n_in, w, o_begin, o_end, y, y_stride);
    case 7: return one_block<7, 3, P>(x.data, n_in, w, o_begin, o_end, y, y_stride);
    case 8: return one_block<8, 3, P>(x.data, n_in, w, o_begin, o_end, y, y_stride);
    default: break;
  }
  const int64_t block_size = kPackRows * ((n_in + 31) / 32) * 32 * x.parts;  // elements per packed block
  int64_t o = o_begin;
  for (; o + 3 <= o_end; o += 3) all_blocks<3, P>(x, w, o, y, y_stride, block_size);
  for (; o < o_end; ++o) all_blocks<1, P>(x, w, o, y, y_stride, block_size);
}

}  // namespace

int64_t packed_rows_size(int64_t n_rows, int64_t n_in, int parts) {
  const int64_t n_blocks = (n_rows + kPackRows - 1) / kPackRows;
  return n_blocks * kPackRows * ((n_in + 31) / 32) * 32 * parts;
}

void pack_rows_avx512(const float* x, int64_t n_rows, int64_t n_in, int parts, uint16_t* out) {
  const int64_t n_chunks = (n_in + 31) / 32;
  for (int64_t b = 0; b * kPackRows < n_rows; ++b) {
    const int64_t rows = std::min(kPackRows, n_rows - b * kPackRows);
    uint16_t* block = out + b * kPackRows * n_chunks * 32 * parts;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + (b * kPackRows + r) * n_in;
      for (int64_t c = 0; c < n_chunks; ++c) {
        uint16_t* hi = block + ((c * rows + r) * parts) * 32;
        for (int half = 0; half < 2; ++half) {  // 16 floats at a time
          const int64_t i = c * 32 + half * 16;
          const __mmask16 m = i + 16 <= n_in ? __mmask16(0xFFFF) : i >= n_in ? 0 : __mmask16((1u << (n_in - i)) - 1);
          const __m512 v = _mm512_maskz_loadu_ps(m, xr + i);
          const __m256bh h = _mm512_cvtneps_pbh(v);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + half * 16), (__m256i)h);
          if (parts == 2) {  // hi back to f32 is exact (a shift); the remainder rounds to bf16 again
            const __m512 hv = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)h), 16));
            const __m256bh l = _mm512_cvtneps_pbh(_mm512_sub_ps(v, hv));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + 32 + half * 16), (__m256i)l);
          }
        }
      }
    }
  }
}

void matmul_bf16_avx512bf16(const PackedRows& x, const Tensor& w, int64_t o_begin, int64_t o_end, float* y) {
  const auto* wp = static_cast<const uint16_t*>(w.data);
  if (x.parts == 2) {
    dispatch<2>(x, wp, o_begin, o_end, y, w.dim(0));
  } else {
    dispatch<1>(x, wp, o_begin, o_end, y, w.dim(0));
  }
}

void split_rows_avx512(const float* x, int64_t n, uint16_t* hi, uint16_t* lo) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m256bh h = _mm512_cvtneps_pbh(v);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + i), (__m256i)h);
    if (lo != nullptr) {
      // hi back to f32 is exact (a shift); the remainder rounds to bf16 again.
      const __m512 hv = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)h), 16));
      const __m256bh l = _mm512_cvtneps_pbh(_mm512_sub_ps(v, hv));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo + i), (__m256i)l);
    }
  }
  for (; i < n; ++i) {
    const uint16_t h = f32_to_bf16(x[i]);
    hi[i] = h;
    if (lo != nullptr) lo[i] = f32_to_bf16(x[i] - bf16_to_f32(h));
  }
}

}  // namespace aerie::ops::cpu
