// Where the weights live. Mapped: views into memory-mapped files (page cache, 4 KiB pages; instant to
// open, shared with other processes). Huge pages: the files read into anonymous memory advised for
// transparent huge pages (2 MiB pages), so a decode step that streams every weight walks 512x fewer page
// table entries. It costs a copy at load time and private memory the size of the weights, and pays only
// where page walks limit decode: on the 2-core development VM (kernel 6.18) decode measured the same both
// ways (Llama-3.2-1B 2.5 GB and Llama-3.1-8B 16 GB, within the run-to-run noise of a few %) while the
// first copy into fresh memory took 10-40 s, so the command line maps unless asked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace aerie {

enum class WeightMemory {
  kMapped,     // view the files in place
  kHugePages,  // copy into anonymous memory advised for transparent huge pages
  kAuto,       // kHugePages when it pays and fits (choose_weight_memory), else kMapped
};

// "auto", "mapped", "hugepages"; parse throws aerie::Error naming `what` for anything else.
WeightMemory parse_weight_memory(const std::string& text, const std::string& what);
const char* weight_memory_name(WeightMemory memory);

// What a load used, for the "loaded ..." line.
struct WeightMemoryReport {
  WeightMemory used = WeightMemory::kMapped;  // kMapped or kHugePages, never kAuto
  uint64_t file_bytes = 0;                    // bytes of the weight files
  uint64_t huge_page_bytes = 0;               // of the copy, bytes in 2 MiB pages (AnonHugePages)
  double copy_seconds = 0;                    // time spent reading the files into memory
  std::string note;                           // why auto chose mapped, or why a copy was refused
};

// The state of the machine the policy looks at.
struct MemorySystem {
  std::string transparent_huge_pages;  // "always", "madvise", "never", or "" when the kernel has none
  uint64_t mem_available_bytes = 0;    // MemAvailable (free memory plus reclaimable page cache)
  uint64_t mem_free_bytes = 0;         // MemFree (taken by nothing, not even page cache)
};
MemorySystem probe_memory_system();

// Below this size auto maps: the copy's time is the only certain effect on small models (whose 4 KiB page
// table entries, 2 MB per GB, stay in the caches).
inline constexpr uint64_t kAutoHugePagesMinBytes = uint64_t(1) << 30;
// Auto copies only while the weights take at most this share of MemAvailable, leaving room for the KV
// cache, activations and the rest of the system.
inline constexpr double kAutoHugePagesMaxShareOfAvailable = 0.8;

struct WeightMemoryChoice {
  WeightMemory memory = WeightMemory::kMapped;  // kMapped or kHugePages
  std::string note;                             // why, when auto or a limit turned down huge pages
};
// The policy, a pure function: kMapped and kHugePages are kept as asked; kAuto becomes kHugePages when
// transparent huge pages are "always" or "madvise", the weights are at least kAutoHugePagesMinBytes and at
// most kAutoHugePagesMaxShareOfAvailable of MemAvailable.
WeightMemoryChoice choose_weight_memory(WeightMemory requested, uint64_t weight_bytes, const MemorySystem& system);

// Whether a copy of `weight_bytes` should read with O_DIRECT, past the page cache: when the copy and the
// file's page cache would not both fit in free memory. The kernel then has to reclaim page cache while it
// faults in the copy, which leaves free memory in 4 KiB fragments; measured copying a 16 GB file with
// 15 GB of it cached on a 24 GB machine: buffered reads 34 s with 76% of the copy in huge pages (and
// MADV_COLLAPSE failing for lack of memory), O_DIRECT 13 s with 100%. When both fit, buffered reads from a
// warm cache are faster (2.5 GB: 0.4 s against 1.1 s).
bool copy_bypasses_page_cache(uint64_t weight_bytes, const MemorySystem& system);

// Anonymous private memory, 2 MiB aligned, advised MADV_HUGEPAGE before any page is touched (RAII).
class HugePageBuffer {
 public:
  static constexpr size_t kHugePageBytes = size_t(2) << 20;
  // nullptr (and *why set) when mmap or madvise fails; nothing is touched, so this never runs out of memory
  // itself: the pages are faulted in by whoever writes them.
  static std::unique_ptr<HugePageBuffer> allocate(size_t bytes, std::string* why);
  ~HugePageBuffer();
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }  // `bytes` rounded up to whole huge pages
  // Bytes of this buffer the kernel holds in huge pages now (AnonHugePages of /proc/self/smaps).
  uint64_t huge_page_bytes() const;
  // Moves what the kernel faulted in as 4 KiB pages (free memory was fragmented, typically by page cache)
  // into 2 MiB pages now, compacting as needed (MADV_COLLAPSE, Linux 6.1+). Best effort: returns false when
  // the kernel could not or does not support it.
  bool collapse() const;

 private:
  HugePageBuffer(uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t* data_;
  size_t size_;
};

// AnonHugePages of the mappings that overlap [begin, begin + bytes), each counted up to its overlap;
// 0 when /proc/self/smaps cannot be read.
uint64_t anon_huge_page_bytes(const void* begin, size_t bytes);

}  // namespace aerie
