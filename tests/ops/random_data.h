// Random inputs for the op tests, reproducible from a seed within one build (normal_distribution's
// algorithm is the standard library's, so the values serve comparisons made in the same run, never
// committed figures).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace aerie::testing {

// n draws of N(0, scale^2).
inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace aerie::testing
