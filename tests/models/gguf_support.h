// What the GGUF model tests share: the goldens of tests/data/gguf/goldens and the error measure their
// tolerances are stated in (largest difference over the reference's largest logit).
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "io/npy.h"

namespace aerie::testing {

inline std::vector<float> read_logits(const std::filesystem::path& path) {
  std::vector<int64_t> shape;
  return read_npy_f32(path, &shape);
}

inline double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

// Largest difference over the reference's largest logit.
inline double error_against(const std::vector<float>& a, const std::vector<float>& ref) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - ref[i]));
  return m / max_abs(ref);
}
inline double error_against(const float* a, const std::vector<float>& ref) {
  return error_against(std::vector<float>(a, a + ref.size()), ref);
}

}  // namespace aerie::testing
