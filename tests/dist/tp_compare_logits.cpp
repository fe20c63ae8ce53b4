// tp_compare_logits A.npy B.npy TOLERANCE: exits 0 when the two float32 arrays have the same shape and
// max |a - b| <= TOLERANCE * max |a| (the error relative to the logit scale of A, the single-process run),
// 1 otherwise; prints the figure either way. Used by run_tp_cli_test.sh.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "io/npy.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: tp_compare_logits A.npy B.npy TOLERANCE\n");
    return 2;
  }
  try {
    std::vector<int64_t> shape_a, shape_b;
    const std::vector<float> a = aerie::read_npy_f32(argv[1], &shape_a);
    const std::vector<float> b = aerie::read_npy_f32(argv[2], &shape_b);
    if (shape_a != shape_b || a.empty()) {
      std::fprintf(stderr, "%s and %s differ in shape (or are empty)\n", argv[1], argv[2]);
      return 1;
    }
    double scale = 0.0, error = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
      scale = std::max(scale, double(std::fabs(a[i])));
      error = std::max(error, double(std::fabs(a[i] - b[i])));
    }
    const double relative = error / std::max(scale, 1e-30);
    const double tolerance = std::atof(argv[3]);
    std::printf("%s: max |a - b| / max |a| = %.3g (tolerance %g)\n", argv[2], relative, tolerance);
    return std::isfinite(relative) && relative <= tolerance ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tp_compare_logits: %s\n", e.what());
    return 2;
  }
}
