#include "io/weight_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace aerie {
namespace {

// The bracketed word of /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never").
std::string read_thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(in, line)) return "";
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return line.substr(open + 1, close - open - 1);
}

// A "Key:   123 kB" line of /proc/meminfo, in bytes; 0 when absent.
uint64_t read_meminfo(const std::string& wanted) {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == wanted) return kib * 1024;
  }
  return 0;
}

std::string gb(uint64_t bytes) { return str_cat(double(bytes / 10000000) / 100.0, " GB"); }

}  // namespace

WeightMemory parse_weight_memory(const std::string& text, const std::string& what) {
  if (text == "auto") return WeightMemory::kAuto;
  if (text == "mapped") return WeightMemory::kMapped;
  if (text == "hugepages") return WeightMemory::kHugePages;
  throw Error(str_cat(what, " must be auto, mapped or hugepages, got '", text, "'"));
}

const char* weight_memory_name(WeightMemory memory) {
  switch (memory) {
    case WeightMemory::kMapped: return "mapped";
    case WeightMemory::kHugePages: return "hugepages";
    case WeightMemory::kAuto: return "auto";
  }
  return "?";
}

MemorySystem probe_memory_system() {
  return MemorySystem{read_thp_mode(), read_meminfo("MemAvailable:"), read_meminfo("MemFree:")};
}

bool copy_bypasses_page_cache(uint64_t weight_bytes, const MemorySystem& system) {
  return 2 * weight_bytes > system.mem_free_bytes;
}

WeightMemoryChoice choose_weight_memory(WeightMemory requested, uint64_t weight_bytes, const MemorySystem& system) {
  if (requested != WeightMemory::kAuto) return {requested, ""};
  const std::string& thp = system.transparent_huge_pages;
  if (thp != "always" && thp != "madvise")
    return {WeightMemory::kMapped, str_cat("transparent huge pages are ", thp.empty() ? "unavailable" : thp)};
  if (weight_bytes < kAutoHugePagesMinBytes)
    return {WeightMemory::kMapped, str_cat("weights under ", gb(kAutoHugePagesMinBytes))};
  if (double(weight_bytes) > kAutoHugePagesMaxShareOfAvailable * double(system.mem_available_bytes))
    return {WeightMemory::kMapped, str_cat(gb(weight_bytes), " of weights leave too little of ",
                                           gb(system.mem_available_bytes), " available memory for a copy")};
  return {WeightMemory::kHugePages, ""};
}

std::unique_ptr<HugePageBuffer> HugePageBuffer::allocate(size_t bytes, std::string* why) {
  const size_t size = (std::max<size_t>(bytes, 1) + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  // Over-allocate by one huge page, then unmap the unaligned head and the tail, so the buffer starts on a
  // 2 MiB boundary (mmap only promises 4 KiB) and every 2 MiB of it can be one huge page.
  const size_t reserve = size + kHugePageBytes;
  void* p = ::mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    *why = str_cat("mmap of ", gb(reserve), " failed: ", std::strerror(errno));
    return nullptr;
  }
  const auto raw = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (raw + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > raw) ::munmap(p, aligned - raw);
  if (const size_t tail = raw + reserve - (aligned + size); tail > 0)
    ::munmap(reinterpret_cast<void*>(aligned + size), tail);
  auto* data = reinterpret_cast<uint8_t*>(aligned);
  if (::madvise(data, size, MADV_HUGEPAGE) != 0) {
    *why = str_cat("madvise(MADV_HUGEPAGE) failed: ", std::strerror(errno));
    ::munmap(data, size);
    return nullptr;
  }
  return std::unique_ptr<HugePageBuffer>(new HugePageBuffer(data, size));
}

HugePageBuffer::~HugePageBuffer() { ::munmap(data_, size_); }

uint64_t HugePageBuffer::huge_page_bytes() const { return anon_huge_page_bytes(data_, size_); }

bool HugePageBuffer::collapse() const {
  // glibc's <sys/mman.h> may predate it; kernels before 6.1 answer EINVAL.
  constexpr int kMadvCollapse = 25;
  return ::madvise(data_, size_, kMadvCollapse) == 0;
}

uint64_t anon_huge_page_bytes(const void* begin, size_t bytes) {
  std::ifstream in("/proc/self/smaps");
  const auto lo = reinterpret_cast<uintptr_t>(begin), hi = lo + bytes;
  uint64_t total = 0, overlap = 0;  // overlap: bytes of the current mapping inside [lo, hi)
  std::string line;
  while (std::getline(in, line)) {
    uintptr_t start = 0, end = 0;
    // A mapping's first line: "7f12a0000000-7f12a0200000 rw-p 00000000 00:00 0 ..."; field lines have a
    // colon-terminated key instead of an address range.
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " ", &start, &end) == 2 &&
        line.find(':') > line.find(' ')) {
      overlap = (start < hi && end > lo) ? std::min(end, hi) - std::max(start, lo) : 0;
      continue;
    }
    uint64_t kib = 0;
    if (overlap > 0 && std::sscanf(line.c_str(), "AnonHugePages: %" SCNu64 " kB", &kib) == 1)
      total += std::min<uint64_t>(kib * 1024, overlap);
  }
  return total;
}

}  // namespace aerie
