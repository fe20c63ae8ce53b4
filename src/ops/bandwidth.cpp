#include "ops/bandwidth.h"

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"

namespace aerie::ops {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kHugePage = size_t(2) << 20;
constexpr int64_t kPrefetchBytes = 4096;  // one page ahead of the reads

// Four independent 512-bit sums over 256-byte steps with the prefetches of one step a page ahead (what
// the AVX-512 matmul kernels do), or a portable loop of eight sums; the total only keeps the reads from
// being optimised away. n: a multiple of 32.
__attribute__((target("avx512f"))) uint64_t read_all_avx512(const uint64_t* p, int64_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  const auto* b = reinterpret_cast<const char*>(p);
  const int64_t bytes = n * 8;
  for (int64_t i = 0; i < bytes; i += 256) {
    const char* ahead = b + std::min(i + kPrefetchBytes, bytes - 256);
    for (int j = 0; j < 4; ++j) _mm_prefetch(ahead + 64 * j, _MM_HINT_T1);
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(b + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(b + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(b + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(b + i + 192));
  }
  alignas(64) uint64_t lanes[8];  // (GCC 12 warns falsely inside _mm512_reduce_add_epi64)
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  uint64_t total = 0;
  for (uint64_t v : lanes) total += v;
  return total;
}

uint64_t read_all_portable(const uint64_t* p, int64_t n) {
  uint64_t acc[8] = {};
  for (int64_t i = 0; i < n; i += 8) {
    __builtin_prefetch(p + std::min(i + kPrefetchBytes / 8, n - 8), 0, 2);
    for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
  }
  uint64_t total = 0;
  for (uint64_t a : acc) total += a;
  return total;
}

}  // namespace

void BandwidthProbe::Unmap::operator()(void* p) const { ::munmap(p, bytes); }

BandwidthProbe::BandwidthProbe(size_t bytes) : data_(nullptr, Unmap{0}), bytes_(std::max(bytes, kPage) / kPage * kPage) {
  // Over-map by one huge page to align the start to 2 MiB (the kernel only gives huge pages to aligned
  // ranges); the unaligned head and tail are unmapped again.
  const size_t span = bytes_ + kHugePage;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  AERIE_CHECK(raw != MAP_FAILED, "bandwidth probe: cannot map ", span, " bytes");
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) ::munmap(raw, aligned - start);
  const uintptr_t end = start + span, used_end = aligned + bytes_;
  if (end > used_end) ::munmap(reinterpret_cast<void*>(used_end), end - used_end);
  void* p = reinterpret_cast<void*>(aligned);
  ::madvise(p, bytes_, MADV_HUGEPAGE);  // advice only: 4 KiB pages when refused
  std::memset(p, 1, bytes_);
  data_ = std::unique_ptr<void, Unmap>(p, Unmap{bytes_});
}

BandwidthProbe::~BandwidthProbe() = default;

uint64_t BandwidthProbe::read_once(ThreadPool& pool) {
  const auto* p = static_cast<const uint64_t*>(data_.get());
  const int64_t n = int64_t(bytes_ / sizeof(uint64_t));
  const bool avx512 = cpu_features().avx512f;
  std::vector<uint64_t> sums(size_t(pool.n_threads()) * 8);  // one slot per thread, a cache line apart
  pool.run([&](int thread, int n_threads) {
    const int64_t per = n / n_threads / 512 * 512;  // whole 4 KiB pages per thread
    const int64_t begin = thread * per, end = thread + 1 == n_threads ? n : begin + per;
    if (end > begin)
      sums[size_t(thread) * 8] = avx512 ? read_all_avx512(p + begin, end - begin) : read_all_portable(p + begin, end - begin);
  });
  uint64_t total = 0;
  for (size_t t = 0; t < sums.size(); t += 8) total += sums[t];
  return total;
}

uint64_t BandwidthProbe::checksum(ThreadPool& pool) { return read_once(pool); }

double BandwidthProbe::measure_gbs(ThreadPool& pool, int passes) {
  double best = 0;
  for (int pass = 0; pass < std::max(passes, 1); ++pass) {
    const auto start = std::chrono::steady_clock::now();
    sink_ = sink_ + read_once(pool);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, double(bytes_) / s / 1e9);
  }
  return best;
}

double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes) {
  BandwidthProbe probe(bytes);
  return probe.measure_gbs(pool, 4);
}

}  // namespace aerie::ops
