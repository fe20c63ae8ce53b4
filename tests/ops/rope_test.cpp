// ops::rope against its ops/ref twin, bit for bit, at every ISA tier (CTest runs this binary as detected and
// with AERIE_ISA=avx2 / scalar): both layouts, whole heads (Llama) and partial slices (MLA's 64-wide rope
// part of a 192-wide query head; the rope key after the latent), padded strides, odd head counts, slice
// widths that are not multiples of any vector width, positions up to 131071 with llama3-scaled frequencies,
// a YaRN-style attention factor, 1 and 3 threads. The reference itself against complex multiplication in
// double and against a rotation worked by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <iterator>
#include <cstring>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "ops/ops.h"
#include "ops/ref/ref_ops.h"
#include "random_data.h"

namespace aerie::ops {
namespace {

using testing::random_floats;

// 1 / theta^(2i / dim), then llama3's rule (factor 8, low/high frequency factors 1/4, original context 8192):
// long waves divided by 8, short ones kept, a smooth blend between (as models/rope_freqs.h computes it).
std::vector<float> llama3_like_inv_freq(int64_t dim) {
  const double factor = 8, low = 1, high = 4, original = 8192;
  std::vector<float> inv_freq(size_t(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float f = 1.0f / std::pow(500000.0f, float(2 * i) / float(dim));
    const double wavelength = 2 * std::numbers::pi / f;
    if (wavelength > original / low) {
      inv_freq[size_t(i)] = float(f / factor);
    } else if (wavelength < original / high) {
      inv_freq[size_t(i)] = f;
    } else {
      const double s = (original / wavelength - low) / (high - low);
      inv_freq[size_t(i)] = float((1 - s) * f / factor + s * f);
    }
  }
  return inv_freq;
}

std::string describe(const RopeSlice& s, float factor) {
  return std::string(s.layout == RopeLayout::kInterleaved ? "interleaved" : "half-split") + " rows " +
         std::to_string(s.n_rows) + "/" + std::to_string(s.row_stride) + " heads " + std::to_string(s.n_head) + "/" +
         std::to_string(s.head_stride) + " slice " + std::to_string(s.offset) + "+" + std::to_string(s.dim) +
         " factor " + std::to_string(factor) + " isa " + rope_isa();
}

// Floats a buffer needs to hold every row of the slice.
size_t buffer_size(const RopeSlice& s) {
  return size_t((s.n_rows - 1) * s.row_stride + (s.n_head - 1) * s.head_stride + s.offset + s.dim);
}

struct Case {
  RopeSlice slice;
  float factor;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    // Whole heads, as Llama's q and k: head_dim 128 and 64, odd head counts.
    out.push_back({rope_whole_heads(7, 5, 128, layout), 1.0f});
    out.push_back({rope_whole_heads(3, 1, 64, layout), 1.0f});
    // MLA's query heads: dn 128 + dr 64 per head, the last 64 rotate; YaRN's factor on cos/sin.
    out.push_back({{.n_rows = 5, .row_stride = 3 * 192, .n_head = 3, .head_stride = 192, .offset = 128, .dim = 64,
                    .layout = layout},
                   1.2079f});
    // MLA's rope key: one 64-wide slice after a 40-wide latent in 104-wide rows.
    out.push_back({{.n_rows = 6, .row_stride = 104, .n_head = 1, .head_stride = 0, .offset = 40, .dim = 64,
                    .layout = layout},
                   1.2079f});
    // Widths whose halves are 1, 3, 9, 17, 33 (tails of 8- and 16-lane steps), in padded rows and heads
    // whose untouched floats must stay as they were.
    for (int64_t dim : {2, 6, 18, 34, 66})
      out.push_back({{.n_rows = 4, .row_stride = 3 * (dim + 7) + 5, .n_head = 3, .head_stride = dim + 7, .offset = 3,
                      .dim = dim, .layout = layout},
                     0.75f});
  }
  return out;
}

TEST(Rope, EveryTierGivesTheReferenceBits) {
  const int64_t positions[] = {0, 1, 2, 17, 4095, 8192, 65535, 131071};  // up to 128K context
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    for (const Case& c : cases()) {
      const RopeSlice& s = c.slice;
      ASSERT_LE(s.n_rows, int64_t(std::size(positions)));
      const std::vector<float> inv_freq = llama3_like_inv_freq(s.dim);
      std::vector<float> v = random_floats(buffer_size(s), uint32_t(s.dim + s.n_head)), expected = v;
      const int64_t* rows = std::end(positions) - s.n_rows;  // the last n_rows positions, ending at 131071
      rope(v.data(), s, rows, inv_freq.data(), c.factor, pool);
      ref::rope(expected.data(), s, rows, inv_freq.data(), c.factor);
      for (size_t i = 0; i < v.size(); ++i)
        ASSERT_EQ(v[i], expected[i]) << "float " << i << ", " << describe(s, c.factor) << ", threads " << threads;
    }
  }
}

TEST(Rope, KernelFollowsTheInstructionSet) {
  const CpuFeatures& f = cpu_features();
  EXPECT_STREQ(rope_isa(), f.has_avx512_tier() ? "avx512" : f.has_avx2_tier() ? "avx2" : "scalar");
}

TEST(Rope, RefusesSlicesItCannotHold) {
  ThreadPool pool(1);
  std::vector<float> v(2 * (kRopeMaxDim + 2));
  const std::vector<float> inv_freq(kRopeMaxDim, 0.5f);
  const int64_t pos[] = {3};
  for (int64_t dim : {int64_t(0), int64_t(7), kRopeMaxDim + 2})
    EXPECT_THROW(rope(v.data(), rope_whole_heads(1, 1, dim, RopeLayout::kHalfSplit), pos, inv_freq.data(), 1.0f, pool),
                 Error)
        << dim;
}

// The definition in complex numbers: each pair (x1, x2) is z = x1 + i x2, and rope turns it into
// z * f * e^(i angle) with angle the f32 product float(pos) * inv_freq (as torch forms it), here in double.
// Interleaved pairs are DeepSeek's view_as_complex; half-split pairs (x_i, x_{i + dim/2}) are what HF's
// q * cos + rotate_half(q) * sin does with cos = cat(c, c).
TEST(RopeReference, IsComplexMultiplicationByTheRotation) {
  for (const Case& c : cases()) {
    const RopeSlice& s = c.slice;
    const std::vector<float> inv_freq = llama3_like_inv_freq(s.dim);
    const int64_t positions[] = {131071, 3, 0, 8191, 1, 100000, 42};
    ASSERT_LE(s.n_rows, int64_t(std::size(positions)));
    const std::vector<float> before = random_floats(buffer_size(s), 7);
    std::vector<float> v = before;
    ref::rope(v.data(), s, positions, inv_freq.data(), c.factor);
    std::vector<bool> rotated(v.size(), false);
    const int64_t half = s.dim / 2;
    for (int64_t r = 0; r < s.n_rows; ++r)
      for (int64_t h = 0; h < s.n_head; ++h) {
        const size_t base = size_t(r * s.row_stride + h * s.head_stride + s.offset);
        for (int64_t i = 0; i < half; ++i) {
          const size_t a = base + size_t(s.layout == RopeLayout::kInterleaved ? 2 * i : i);
          const size_t b = base + size_t(s.layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + half);
          const double angle = double(float(positions[r]) * inv_freq[size_t(i)]);
          const std::complex<double> z =
              std::complex<double>(before[a], before[b]) * double(c.factor) * std::polar(1.0, angle);
          // f32 cos/sin (~1 ulp each) and one rounding per product and sum: a few 1e-7 of the pair's size.
          const double tol = 1e-6 * c.factor * (std::fabs(before[a]) + std::fabs(before[b]));
          ASSERT_NEAR(v[a], z.real(), tol) << describe(s, c.factor) << " row " << r << " head " << h << " pair " << i;
          ASSERT_NEAR(v[b], z.imag(), tol) << describe(s, c.factor) << " row " << r << " head " << h << " pair " << i;
          rotated[a] = rotated[b] = true;
        }
      }
    for (size_t j = 0; j < v.size(); ++j)
      if (!rotated[j]) {
        ASSERT_EQ(v[j], before[j]) << "float " << j << " outside the slice, " << describe(s, c.factor);
      }
  }
}

// Worked by hand: at position 1 with inv_freq 1 the unit pair (1, 0) turns one radian into (cos 1, sin 1);
// with inv_freq pi/2 a quarter turn sends (x1, x2) to (-x2, x1). Interleaved pairs are neighbours, half-split
// pairs are dim/2 apart.
TEST(RopeReference, TurnsPairsByHand) {
  const float inv_freq[] = {1.0f, std::numbers::pi_v<float> / 2};
  const int64_t pos1[] = {1};
  float half_split[4] = {1, 3, 0, 5};  // pairs (1, 0) and (3, 5)
  ref::rope(half_split, rope_whole_heads(1, 1, 4, RopeLayout::kHalfSplit), pos1, inv_freq, 1.0f);
  EXPECT_NEAR(half_split[0], std::cos(1.0), 1e-7);
  EXPECT_NEAR(half_split[2], std::sin(1.0), 1e-7);
  EXPECT_NEAR(half_split[1], -5.0, 1e-6);
  EXPECT_NEAR(half_split[3], 3.0, 1e-6);
  float interleaved[4] = {1, 0, 3, 5};  // pairs (1, 0) and (3, 5), each doubled by the factor
  ref::rope(interleaved, rope_whole_heads(1, 1, 4, RopeLayout::kInterleaved), pos1, inv_freq, 2.0f);
  EXPECT_NEAR(interleaved[0], 2 * std::cos(1.0), 1e-6);
  EXPECT_NEAR(interleaved[1], 2 * std::sin(1.0), 1e-6);
  EXPECT_NEAR(interleaved[2], -10.0, 1e-5);
  EXPECT_NEAR(interleaved[3], 6.0, 1e-5);
}

}  // namespace
}  // namespace aerie::ops
