// Int8 weights times int8 activations with AVX-512-VNNI vpdpbusd (64 byte products per instruction, twice
// vpdpwssd's 32), the Bf16Activations::kRounded path of ops::matmul_int8.
//
// Activations: each row in blocks of kQ8Block inputs, each block with its own scale (llama.cpp's Q8_K
// granularity): s_b = max |x| over the block / 127, xq = round-half-to-even(x / s_b) in [-127, 127], so each
// activation is within half a step (s_b / 2) of its value. vpdpbusd multiplies unsigned bytes by signed
// ones; the weights are made unsigned in registers (w ^ 0x80 = q + 128), so per block
//   S = sum (q + 128) * xq = sum q * xq + 128 * X,   X = sum xq (the row's, per block, from packing)
// and the row's total over a weight group is  sum_b s_b * S_b - sum_b s_b * 128 * X_b; the second sum only
// depends on the row and the group, so packing stores corr[r, b] = s_b * 128 * X_b and the kernel
// subtracts the group's sum of them once per output. Per output: per block the 16 int32 lanes (4 products
// each, at most 4 * 4 * 255 * 127 after a block: no overflow) are converted and multiplied by s_b into 16
// float lanes; at the end of a weight group hsum, minus the correction, times the group's scale.
//
// Batch invariant: each output's instruction sequence does not depend on the number of rows (a row's
// packing reads only that row; passes only choose which outputs share a weight load).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "ops/cpu/hsum_avx512.h"
#include "ops/cpu/int8_kernels.h"

namespace aerie::ops::cpu {
namespace {

constexpr int64_t kChunk = 64;                     // bytes per vpdpbusd
constexpr int64_t kChunksPerBlock = kQ8Block / kChunk;
constexpr int64_t kPrefetchBytes = 64 * 1024;
constexpr int64_t kMaxRowsPerPass = 6;

#define AERIE_UNROLL _Pragma("GCC unroll 16")

struct Args {
  const int8_t* q;
  const float* scale;
  int64_t n_in, n_groups, blocks_per_group, n_blocks;
  const Q8Rows* x;
  float* y;
  int64_t y_stride;
};

// Outputs [o, o + G) for R rows (row0.. of the call; rows row_in_block.. of block `pack_block`).
template <int R, int G, bool kPrefetch>
inline void pass(const Args& a, int64_t pack_block, int64_t block_rows, int64_t row_in_block, int64_t row0,
                 int64_t o) {
  const int8_t* wr = a.q + o * a.n_in;
  const int64_t n_in = a.n_in;
  const int64_t ahead = std::clamp<int64_t>(kPrefetchBytes / (G * n_in), 1, 4) * G * n_in;
  const int64_t n_chunks = a.n_blocks * kChunksPerBlock;
  const int8_t* xb = a.x->data + pack_block * kPackRows * n_chunks * kChunk + row_in_block * kChunk;
  const int64_t chunk_stride = block_rows * kChunk;
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  float total[R][G];
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) total[r][g] = 0.0f;
  int64_t i = 0, block = 0;
  for (int64_t gi = 0; gi < a.n_groups; ++gi) {
    __m512 fsum[R][G];
    AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) fsum[r][g] = _mm512_setzero_ps();
    float corr[R];
    AERIE_UNROLL for (int r = 0; r < R; ++r) corr[r] = 0.0f;
    const int64_t block_end = std::min(a.n_blocks, block + a.blocks_per_group);
    for (; block < block_end; ++block) {
      __m512i acc[R][G];
      AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_si512();
      for (int64_t c = 0; c < kChunksPerBlock; ++c, i += kChunk, xb += chunk_stride) {
        if (i >= n_in) continue;  // a partial last block: its padding is zero on the activation side
        const __mmask64 m = i + kChunk <= n_in ? ~__mmask64(0) : (__mmask64(1) << (n_in - i)) - 1;
        __m512i w[G];
        AERIE_UNROLL for (int g = 0; g < G; ++g) {
          if constexpr (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(wr + g * n_in + i + ahead), _MM_HINT_T1);
          // Masked-off bytes read as 0 ^ 0x80 = 128 (weight 0); their activations are 0.
          w[g] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, wr + g * n_in + i), flip);
        }
        AERIE_UNROLL for (int r = 0; r < R; ++r) {
          const __m512i xv = _mm512_loadu_si512(xb + r * kChunk);
          AERIE_UNROLL for (int g = 0; g < G; ++g) acc[r][g] = _mm512_dpbusd_epi32(acc[r][g], w[g], xv);
        }
      }
      AERIE_UNROLL for (int r = 0; r < R; ++r) {
        const int64_t row = row0 + r;
        const __m512 s = _mm512_set1_ps(a.x->block_scale[row * a.n_blocks + block]);
        corr[r] += a.x->block_corr[row * a.n_blocks + block];
        AERIE_UNROLL for (int g = 0; g < G; ++g) fsum[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][g]), s, fsum[r][g]);
      }
    }
    AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g)
      total[r][g] += (hsum512(fsum[r][g]) - corr[r]) * a.scale[(o + g) * a.n_groups + gi];
  }
  AERIE_UNROLL for (int r = 0; r < R; ++r) AERIE_UNROLL for (int g = 0; g < G; ++g)
    a.y[(row0 + r) * a.y_stride + o + g] = total[r][g];
}

// Every row for outputs [o, o + G): blocks of up to kPackRows rows, each in as few passes of at most
// kMaxRowsPerPass rows as it takes, rows spread evenly; the first pass prefetches. R x G accumulators +
// R x G float sums + G weight vectors + one x vector within 32 registers: R <= 6 at G = 2.
template <int G>
void all_rows(const Args& a, int64_t o) {
  const Q8Rows& x = *a.x;
  for (int64_t b = 0; b * kPackRows < x.n_rows; ++b) {
    const int64_t block_rows = std::min(kPackRows, x.n_rows - b * kPackRows);
    const int64_t n_passes = (block_rows + kMaxRowsPerPass - 1) / kMaxRowsPerPass;
    const int64_t per_pass = (block_rows + n_passes - 1) / n_passes;
    for (int64_t r = 0; r < block_rows; r += per_pass) {
      const int64_t rows = std::min(per_pass, block_rows - r);
      const int64_t row0 = b * kPackRows + r;
      const bool first = b == 0 && r == 0;
#define AERIE_CASE(N)                                        \
  case N:                                                    \
    if (first) {                                             \
      pass<N, G, true>(a, b, block_rows, r, row0, o);        \
    } else {                                                 \
      pass<N, G, false>(a, b, block_rows, r, row0, o);       \
    }                                                        \
    break;
      switch (rows) {
        AERIE_CASE(1) AERIE_CASE(2) AERIE_CASE(3) AERIE_CASE(4) AERIE_CASE(5)
        default: AERIE_CASE(6)
      }
#undef AERIE_CASE
    }
  }
}

}  // namespace

int64_t q8_rows_size(int64_t n_rows, int64_t n_in) {
  const int64_t n_pack = (n_rows + kPackRows - 1) / kPackRows;
  return n_pack * kPackRows * ((n_in + kQ8Block - 1) / kQ8Block) * kQ8Block;
}

void pack_rows_q8(const float* x, int64_t n_rows, int64_t n_in, int8_t* out, float* block_scale, float* block_corr) {
  const int64_t n_blocks = (n_in + kQ8Block - 1) / kQ8Block;
  const int64_t n_chunks = n_blocks * kChunksPerBlock;
  for (int64_t p = 0; p * kPackRows < n_rows; ++p) {
    const int64_t rows = std::min(kPackRows, n_rows - p * kPackRows);
    int8_t* pack = out + p * kPackRows * n_chunks * kChunk;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = p * kPackRows + r;
      const float* xr = x + row * n_in;
      for (int64_t b = 0; b < n_blocks; ++b) {
        __m512 mx = _mm512_setzero_ps();
        for (int64_t i = b * kQ8Block; i < std::min(n_in, (b + 1) * kQ8Block); i += 16) {
          const __mmask16 m = i + 16 <= n_in ? __mmask16(0xFFFF) : __mmask16((1u << (n_in - i)) - 1);
          mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_maskz_loadu_ps(m, xr + i)));
        }
        const float s = _mm512_reduce_max_ps(mx) / 127.0f;
        const __m512 inv = _mm512_set1_ps(s > 0.0f ? 1.0f / s : 0.0f);
        __m512i sum = _mm512_setzero_si512();
        for (int64_t c = 0; c < kChunksPerBlock; ++c) {
          int8_t* dst = pack + ((b * kChunksPerBlock + c) * rows + r) * kChunk;
          for (int quarter = 0; quarter < 4; ++quarter) {
            const int64_t i = b * kQ8Block + c * kChunk + quarter * 16;
            const __mmask16 m = i + 16 <= n_in ? __mmask16(0xFFFF) : i >= n_in ? 0 : __mmask16((1u << (n_in - i)) - 1);
            // Round to nearest even; |x / s| <= 127 up to float rounding: clamp.
            const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, xr + i), inv),
                                                         _mm512_set1_ps(-127.0f)),
                                           _mm512_set1_ps(127.0f));
            const __m512i xi = _mm512_cvtps_epi32(v);
            sum = _mm512_add_epi32(sum, xi);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + quarter * 16), _mm512_cvtsepi32_epi8(xi));
          }
        }
        block_scale[row * n_blocks + b] = s;
        block_corr[row * n_blocks + b] = s * 128.0f * float(_mm512_reduce_add_epi32(sum));
      }
    }
  }
}

void matmul_int8_q8_avx512vnni(const Q8Rows& x, const int8_t* q, const float* scale, int64_t n_groups, int64_t o_begin,
                               int64_t o_end, float* y, int64_t y_stride) {
  const int64_t n_blocks = (x.n_in + kQ8Block - 1) / kQ8Block;
  const Args a{q, scale, x.n_in, n_groups, n_groups == 1 ? n_blocks : x.n_in / n_groups / kQ8Block, n_blocks, &x,
               y, y_stride};
  int64_t o = o_begin;
  for (; o + 2 <= o_end; o += 2) all_rows<2>(a, o);
  for (; o < o_end; ++o) all_rows<1>(a, o);
}

}  // namespace aerie::ops::cpu
