// Run-time CPU feature detection: kernels are compiled for several targets and chosen here, so one binary
// runs on any x86-64 and uses AVX-512-BF16 where the machine has it.
#pragma once

#include <string>

namespace aerie {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_bf16 = false;
  bool avx512_vnni = false;  // vpdpwssd: the int8-weight kernels
  bool amx_bf16 = false;     // AMX tiles with bf16 (and the OS saving their state): oneDNN's GEMM uses them

  // avx2 + fma + f16c: what the AVX2 kernels need.
  bool has_avx2_tier() const { return avx2 && fma && f16c; }
  // avx512f + bw + vl: what the AVX-512 kernels need.
  bool has_avx512_tier() const { return avx512f && avx512bw && avx512vl; }
  std::string describe() const;
};

// Detected once; the environment variable AERIE_ISA=scalar|avx2|avx512 caps what is used (for tests of
// the portable paths and for comparisons).
const CpuFeatures& cpu_features();

}  // namespace aerie
