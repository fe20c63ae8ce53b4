// Start-up of the KV pool takes no memory: the store and the prefix cache's token table are zeroed on
// demand, so RSS grows only as sequences write positions (a 12 GB pool used to be memset at start, which
// took over a minute on a busy machine and held the memory from the first second).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "kv/block_pool.h"
#include "kv/kv_cache.h"

namespace aerie {
namespace {

// Resident bytes of this process (/proc/self/statm, second field, in pages).
uint64_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * uint64_t(::sysconf(_SC_PAGESIZE)) : 0;
}

constexpr uint64_t kMiB = uint64_t(1) << 20;

TEST(KvMemory, ConstructingALargePoolTouchesNoPages) {
  const uint64_t before = resident_bytes();
  ASSERT_GT(before, 0u);
  // 16 layers x 512 floats x 16384 positions, keys and values: 1 GiB of KV; 1M blocks of 16 positions in
  // the block pool: a 128 MiB token table.
  KvStore store(16, 512, 1024, 16, true, KvDType::kF32);
  BlockPool pool(1 << 20, 16, true);
  EXPECT_EQ(store.bytes(), uint64_t(1) << 30);
  const uint64_t after = resident_bytes();
  // The pool's per-block bookkeeping (refcounts, free list, hash index: ~70 MiB for 1M blocks) is touched;
  // the 1 GiB of KV and the 128 MiB token table are not.
  EXPECT_LT(after - before, 96 * kMiB) << "RSS grew by " << (after - before) / kMiB << " MiB";
  // The memory reads as zero and is real: writing one layer's keys (32 MiB) makes it resident.
  EXPECT_EQ(store.key_bytes(3)[12345], std::byte{0});
  std::memset(store.key_bytes(0), 1, size_t(16384) * 512 * sizeof(float));
  EXPECT_GT(resident_bytes() - after, 30 * kMiB);
}

}  // namespace
}  // namespace aerie
