// BF16-weight matmul with AVX-512-BF16 dot products (vdpbf16ps): each instruction multiplies 32 bf16
// pairs and adds adjacent products into 16 float lanes. Weight rows stream once per block of up to 8
// activation rows, which is what makes verifying K draft tokens cost little more than one decode step.
#include <immintrin.h>

#include <algorithm>

#include "ops/cpu/kernels.h"

namespace aerie::ops::cpu {
namespace {

// Software prefetch distance in weight elements: each weight row is a few KB, so the hardware prefetcher
// (which stops at 4 KB pages) restarts often; prefetching ~2-8 KB ahead measured 2x faster decode here.
constexpr int64_t kPrefetchSingle = 1024;  // one row streaming: 2 KB ahead

inline __m512bh load_bh(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
inline __m512bh load_bh_tail(const uint16_t* p, __mmask32 m) { return (__m512bh)_mm512_maskz_loadu_epi16(m, p); }

// Rows [0, R) of x against weight rows [o_begin, o_end), two weight rows at a time.
//   y: [R, y_stride]
template <int R, bool kSplit>
void block(const SplitRows& x, int64_t n_in, const uint16_t* w, int64_t o_begin, int64_t o_end, float* y,
           int64_t y_stride) {
  const int64_t n_full = n_in / 32 * 32;
  const __mmask32 tail = __mmask32((uint64_t(1) << (n_in - n_full)) - 1);
  int64_t o = o_begin;
  for (; o + 2 <= o_end; o += 2) {
    const uint16_t* w0 = w + o * n_in;
    const uint16_t* w1 = w0 + n_in;
    __m512 acc0[R], acc1[R];
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    auto step = [&](__m512bh a0, __m512bh a1, int64_t i, bool is_tail) {
      for (int r = 0; r < R; ++r) {
        const __m512bh xh = is_tail ? load_bh_tail(x.hi + r * n_in + i, tail) : load_bh(x.hi + r * n_in + i);
        acc0[r] = _mm512_dpbf16_ps(acc0[r], a0, xh);
        acc1[r] = _mm512_dpbf16_ps(acc1[r], a1, xh);
        if constexpr (kSplit) {
          const __m512bh xl = is_tail ? load_bh_tail(x.lo + r * n_in + i, tail) : load_bh(x.lo + r * n_in + i);
          acc0[r] = _mm512_dpbf16_ps(acc0[r], a0, xl);
          acc1[r] = _mm512_dpbf16_ps(acc1[r], a1, xl);
        }
      }
    };
    for (int64_t i = 0; i < n_full; i += 32) {
      _mm_prefetch(reinterpret_cast<const char*>(w0 + i + 2 * n_in), _MM_HINT_T0);  // the next pair's rows
      _mm_prefetch(reinterpret_cast<const char*>(w1 + i + 2 * n_in), _MM_HINT_T0);
      step(load_bh(w0 + i), load_bh(w1 + i), i, false);
    }
    if (n_full < n_in) step(load_bh_tail(w0 + n_full, tail), load_bh_tail(w1 + n_full, tail), n_full, true);
    for (int r = 0; r < R; ++r) {
      y[r * y_stride + o] = _mm512_reduce_add_ps(acc0[r]);
      y[r * y_stride + o + 1] = _mm512_reduce_add_ps(acc1[r]);
    }
  }
  if (o < o_end) {  // an odd last weight row
    const uint16_t* w0 = w + o * n_in;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_in; i += 32) {
      const bool is_tail = i + 32 > n_in;
      const __m512bh a = is_tail ? load_bh_tail(w0 + i, tail) : load_bh(w0 + i);
      for (int r = 0; r < R; ++r) {
        const __m512bh xh = is_tail ? load_bh_tail(x.hi + r * n_in + i, tail) : load_bh(x.hi + r * n_in + i);
        acc[r] = _mm512_dpbf16_ps(acc[r], a, xh);
        if constexpr (kSplit) {
          const __m512bh xl = is_tail ? load_bh_tail(x.lo + r * n_in + i, tail) : load_bh(x.lo + r * n_in + i);
          acc[r] = _mm512_dpbf16_ps(acc[r], a, xl);
        }
      }
    }
    for (int r = 0; r < R; ++r) y[r * y_stride + o] = _mm512_reduce_add_ps(acc[r]);
  }
}

// One activation row: each weight row is one linear stream, with four independent accumulators.
template <bool kSplit>
void single_row(const SplitRows& x, int64_t n_in, const uint16_t* w, int64_t o_begin, int64_t o_end, float* y) {
  const int64_t n_full = n_in / 128 * 128;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const uint16_t* wr = w + o * n_in;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < n_full; i += 128) {
      _mm_prefetch(reinterpret_cast<const char*>(wr + i + kPrefetchSingle), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(wr + i + kPrefetchSingle + 32), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(wr + i + kPrefetchSingle + 64), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(wr + i + kPrefetchSingle + 96), _MM_HINT_T0);
      for (int u = 0; u < 4; ++u) {
        const __m512bh a = load_bh(wr + i + 32 * u);
        acc[u] = _mm512_dpbf16_ps(acc[u], a, load_bh(x.hi + i + 32 * u));
        if constexpr (kSplit) acc[u] = _mm512_dpbf16_ps(acc[u], a, load_bh(x.lo + i + 32 * u));
      }
    }
    for (int64_t i = n_full; i < n_in; i += 32) {
      const __mmask32 m = n_in - i >= 32 ? __mmask32(~0u) : __mmask32((uint64_t(1) << (n_in - i)) - 1);
      const __m512bh a = load_bh_tail(wr + i, m);
      acc[0] = _mm512_dpbf16_ps(acc[0], a, load_bh_tail(x.hi + i, m));
      if constexpr (kSplit) acc[0] = _mm512_dpbf16_ps(acc[0], a, load_bh_tail(x.lo + i, m));
    }
    y[o] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
  }
}

template <bool kSplit>
void rows_block(const SplitRows& x, int64_t rows, int64_t n_in, const uint16_t* w, int64_t o_begin, int64_t o_end,
                float* y, int64_t y_stride) {
  switch (rows) {
    case 1: return single_row<kSplit>(x, n_in, w, o_begin, o_end, y);
    case 2: return block<2, kSplit>(x, n_in, w, o_begin, o_end, y, y_stride);
    case 3: return block<3, kSplit>(x, n_in, w, o_begin, o_end, y, y_stride);
    case 4: return block<4, kSplit>(x, n_in, w, o_begin, o_end, y, y_stride);
    case 5: return block<5, kSplit>(x, n_in, w, o_begin, o_end, y, y_stride);
    case 6: return block<6, kSplit>(x, n_in, w, o_begin, o_end, y, y_stride);
    case 7: return block<7, kSplit>(x, n_in, w, o_begin, o_end, y, y_stride);
    default: return block<8, kSplit>(x, n_in, w, o_begin, o_end, y, y_stride);
  }
}

}  // namespace

void matmul_bf16_avx512bf16(const SplitRows& x, int64_t n_rows, const Tensor& w, int64_t o_begin, int64_t o_end,
                            float* y) {
  const int64_t n_out = w.dim(0), n_in = w.dim(1);
  const auto* wp = static_cast<const uint16_t*>(w.data);
  // Blocks of up to 8 rows; outputs in chunks of 64 so a chunk's weights (64 rows) are reused from cache
  // by the next row block instead of streaming from memory again.
  constexpr int64_t kChunk = 64;
  for (int64_t ob = o_begin; ob < o_end; ob += kChunk) {
    const int64_t oe = std::min(o_end, ob + kChunk);
    for (int64_t r = 0; r < n_rows; r += 8) {
      const SplitRows xr{x.hi + r * n_in, x.lo ? x.lo + r * n_in : nullptr};
      const int64_t rows = std::min<int64_t>(8, n_rows - r);
      if (x.lo) {
        rows_block<true>(xr, rows, n_in, wp, ob, oe, y + r * n_out, n_out);
      } else {
        rows_block<false>(xr, rows, n_in, wp, ob, oe, y + r * n_out, n_out);
      }
    }
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
