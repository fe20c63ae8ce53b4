#include "core/cpu_features.h"

#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace aerie {
namespace {

#if defined(__x86_64__) || defined(__i386__)
uint64_t read_xcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = ecx & bit_OSXSAVE;
  if (!osxsave) return f;
  const uint64_t xcr0 = read_xcr0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;
  f.fma = ymm_state && (ecx & bit_FMA);
  f.f16c = ymm_state && (ecx & bit_F16C);
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
    f.avx2 = ymm_state && (ebx & bit_AVX2);
    f.avx512f = zmm_state && (ebx & bit_AVX512F);
    f.avx512bw = zmm_state && (ebx & bit_AVX512BW);
    f.avx512vl = zmm_state && (ebx & bit_AVX512VL);
    f.avx512_vnni = zmm_state && (ecx & (1u << 11));
    const bool tile_state = (xcr0 & (uint64_t(3) << 17)) == (uint64_t(3) << 17);  // XTILECFG, XTILEDATA
    f.amx_bf16 = tile_state && (edx & (1u << 22)) && (edx & (1u << 24));          // AMX-BF16, AMX-TILE
  }
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) {
    f.avx512_bf16 = f.avx512f && (eax & (1u << 5));
  }
  return f;
}
#else
CpuFeatures detect() { return {}; }
#endif

CpuFeatures apply_cap(CpuFeatures f) {
  const char* cap = std::getenv("AERIE_ISA");
  if (cap == nullptr) return f;
  const std::string_view c(cap);
  if (c == "scalar") return CpuFeatures{};
  if (c == "avx2") {
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512_bf16 = f.avx512_vnni = f.amx_bf16 = false;
  } else if (c == "avx512") {
    f.avx512_bf16 = f.amx_bf16 = false;
  }
  return f;
}

}  // namespace

std::string CpuFeatures::describe() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512_bf16, "avx512_bf16");
  add(avx512_vnni, "avx512_vnni");
  add(amx_bf16, "amx_bf16");
  return s.empty() ? "scalar" : s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = apply_cap(detect());
  return features;
}

}  // namespace aerie
