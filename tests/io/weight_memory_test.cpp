// Weights copied into huge-page memory: the same bytes as the mapping, sharded checkpoints, clear errors for
// truncated files, the fallback to the mapping when the copy is refused, and the auto policy.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/mapped_file.h"
#include "io/weight_memory.h"
#include "io/weight_store.h"
#include "tmp_dir.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

using aerie::testing::TmpDir;

void write(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A safetensors file of `n` BF16 tensors "<prefix>.<i>" of shape [rows, 64], seeded pseudo-random bytes
// (finite values: the top exponent bit of each high byte is clear, as the loader refuses NaN and inf in
// small tensors).
std::string safetensors_file(const std::string& prefix, int n, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (int i = 0; i < n; ++i) {
    const uint64_t begin = data.size(), bytes = uint64_t(rows) * 64 * 2;
    for (uint64_t b = 0; b < bytes; ++b) data.push_back(char(rng() & (b % 2 == 1 ? 0xbf : 0xff)));
    header[prefix + "." + std::to_string(i)] = {
        {"dtype", "BF16"}, {"shape", {rows, 64}}, {"data_offsets", {begin, begin + bytes}}};
  }
  std::string text = header.dump();
  while (text.size() % 8) text += ' ';
  std::string out(8, '\0');
  const uint64_t len = text.size();
  std::memcpy(out.data(), &len, 8);
  return out + text + data;
}

WeightLoadOptions huge_pages() {
  WeightLoadOptions options;
  options.memory = WeightMemory::kHugePages;
  return options;
}

void expect_same_tensors(const WeightStore& a, const WeightStore& b) {
  ASSERT_EQ(a.names(), b.names());
  for (const std::string& name : a.names()) {
    const Tensor& x = a.get(name);
    const Tensor& y = b.get(name);
    EXPECT_EQ(x.dtype, y.dtype) << name;
    EXPECT_EQ(x.shape, y.shape) << name;
    ASSERT_EQ(x.nbytes(), y.nbytes()) << name;
    EXPECT_NE(x.data, y.data) << name;
    EXPECT_EQ(std::memcmp(x.data, y.data, x.nbytes()), 0) << name;
  }
}

TEST(WeightMemory, HugePagesHoldTheSameBytesAsTheMapping) {
  TmpDir dir;
  // 3 MiB of tensors, so the copy spans more than one 2 MiB page.
  write(dir.path / "model.safetensors", safetensors_file("w", 6, 4096, 1));
  const WeightStore mapped = WeightStore::open_dir(dir.path);
  const WeightStore copied = WeightStore::open_dir(dir.path, huge_pages());
  EXPECT_EQ(mapped.memory_report().used, WeightMemory::kMapped);
  const WeightMemoryReport& report = copied.memory_report();
  ASSERT_EQ(report.used, WeightMemory::kHugePages) << report.note;
  EXPECT_EQ(report.file_bytes, fs::file_size(dir.path / "model.safetensors"));
  EXPECT_LE(report.huge_page_bytes, 4 * HugePageBuffer::kHugePageBytes);
  expect_same_tensors(mapped, copied);
  // Every tensor of the copy lies in 2 MiB-aligned memory it owns; prefault has nothing left to fault.
  EXPECT_EQ(copied.prefault(), copied.resident_bytes());
  EXPECT_GE(copied.resident_bytes(), copied.total_bytes());
}

TEST(WeightMemory, ShardedCheckpointLoadsIntoHugePages) {
  TmpDir dir;
  nlohmann::json weight_map = nlohmann::json::object();
  for (int s = 0; s < 3; ++s) {
    const std::string shard = "model-0000" + std::to_string(s + 1) + "-of-00003.safetensors";
    const std::string prefix = "layer" + std::to_string(s);
    write(dir.path / shard, safetensors_file(prefix, 2, 1000 + 7 * s, uint32_t(10 + s)));
    for (int i = 0; i < 2; ++i) weight_map[prefix + "." + std::to_string(i)] = shard;
  }
  write(dir.path / "model.safetensors.index.json", nlohmann::json{{"weight_map", weight_map}}.dump());
  const WeightStore mapped = WeightStore::open_dir(dir.path);
  std::vector<LoadProgress> calls;
  WeightLoadOptions options = huge_pages();
  options.progress = [&](const LoadProgress& p) { calls.push_back(p); };
  const WeightStore copied = WeightStore::open_dir(dir.path, options);
  ASSERT_EQ(copied.memory_report().used, WeightMemory::kHugePages) << copied.memory_report().note;
  EXPECT_EQ(copied.size(), 6u);
  expect_same_tensors(mapped, copied);
  // One report per file read (each is under one 64 MiB read) with the bytes so far, then the tensor count.
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[2].bytes_done, copied.memory_report().file_bytes);
  EXPECT_EQ(calls[2].tensors_total, 0);
  EXPECT_EQ(calls[3].tensors_done, 6);
}

TEST(WeightMemory, TruncatedFileIsAClearErrorWhenCopying) {
  TmpDir dir;
  const std::string bytes = safetensors_file("w", 2, 100, 3);
  write(dir.path / "model.safetensors", bytes.substr(0, bytes.size() - 10));
  std::string message;
  try {
    WeightStore::open_dir(dir.path, huge_pages());
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("model.safetensors"), std::string::npos) << message;
  EXPECT_NE(message.find("truncated file"), std::string::npos) << message;
}

TEST(WeightMemory, RefusedCopyFallsBackToTheMappingWithANote) {
  TmpDir dir;
  write(dir.path / "model.safetensors", safetensors_file("w", 2, 100, 4));
  WeightLoadOptions options = huge_pages();
  options.max_copy_bytes = 1000;
  const WeightStore store = WeightStore::open_dir(dir.path, options);
  const WeightMemoryReport& report = store.memory_report();
  EXPECT_EQ(report.used, WeightMemory::kMapped);
  EXPECT_EQ(report.huge_page_bytes, 0u);
  EXPECT_NE(report.note.find("copy refused"), std::string::npos) << report.note;
  expect_same_tensors(WeightStore::open_dir(dir.path), store);
}

// Both read paths of the copy, on a file whose size is no multiple of a block (O_DIRECT's last read asks
// for a whole block and stops at the end of the file), at a region offset past the start of the buffer.
TEST(WeightMemory, DirectAndBufferedReadsGiveTheFileBytes) {
  TmpDir dir;
  const fs::path path = dir.path / "model.safetensors";
  write(path, safetensors_file("w", 3, 2000, 5) + "tail");
  const MappedFile mapped(path.string());
  ASSERT_NE(mapped.size() % 4096, 0u);
  for (bool direct : {false, true}) {
    std::string why;
    std::shared_ptr<HugePageBuffer> buffer = HugePageBuffer::allocate(2 * HugePageBuffer::kHugePageBytes, &why);
    ASSERT_NE(buffer, nullptr) << why;
    std::memset(buffer->data(), 0xee, buffer->size());
    uint64_t reported = 0;
    const auto copy = MappedFile::read_into(path.string(), mapped.size(), buffer, HugePageBuffer::kHugePageBytes,
                                            direct, [&](uint64_t n) { reported += n; });
    EXPECT_FALSE(copy->mapped());
    ASSERT_EQ(copy->size(), mapped.size());
    EXPECT_EQ(copy->data(), buffer->data() + HugePageBuffer::kHugePageBytes);
    EXPECT_EQ(std::memcmp(copy->data(), mapped.data(), mapped.size()), 0) << "direct " << direct;
    EXPECT_EQ(reported, mapped.size());
    EXPECT_EQ(buffer->data()[0], 0xee);  // nothing written before the region
  }
}

TEST(WeightMemory, ReadingAFileOfAnotherSizeIsAClearError) {
  TmpDir dir;
  const fs::path path = dir.path / "model.safetensors";
  write(path, safetensors_file("w", 1, 10, 6));
  std::string why;
  std::shared_ptr<HugePageBuffer> buffer = HugePageBuffer::allocate(1, &why);
  ASSERT_NE(buffer, nullptr) << why;
  try {
    MappedFile::read_into(path.string(), fs::file_size(path) + 100, buffer, 0, false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("size changed while loading"), std::string::npos) << e.what();
  }
}

TEST(WeightMemory, CopyBypassesThePageCacheWhenCopyAndCacheDoNotBothFit) {
  constexpr uint64_t kGB = 1000000000;
  EXPECT_FALSE(copy_bypasses_page_cache(2 * kGB, {"madvise", 22 * kGB, 13 * kGB}));
  EXPECT_TRUE(copy_bypasses_page_cache(16 * kGB, {"madvise", 22 * kGB, 20 * kGB}));
}

TEST(WeightMemory, AutoPolicy) {
  constexpr uint64_t kGB = 1000000000;
  struct Case {
    WeightMemory requested;
    uint64_t weight_bytes;
    MemorySystem system;
    WeightMemory expected;
  };
  const Case cases[] = {
      {WeightMemory::kAuto, 16 * kGB, {"madvise", 22 * kGB}, WeightMemory::kHugePages},
      {WeightMemory::kAuto, 16 * kGB, {"always", 22 * kGB}, WeightMemory::kHugePages},
      {WeightMemory::kAuto, 16 * kGB, {"never", 22 * kGB}, WeightMemory::kMapped},
      {WeightMemory::kAuto, 16 * kGB, {"", 22 * kGB}, WeightMemory::kMapped},
      {WeightMemory::kAuto, 16 * kGB, {"madvise", 19 * kGB}, WeightMemory::kMapped},  // over 80% of available
      {WeightMemory::kAuto, kAutoHugePagesMinBytes - 1, {"madvise", 22 * kGB}, WeightMemory::kMapped},
      {WeightMemory::kAuto, kAutoHugePagesMinBytes, {"madvise", 22 * kGB}, WeightMemory::kHugePages},
      {WeightMemory::kMapped, 16 * kGB, {"always", 64 * kGB}, WeightMemory::kMapped},
      {WeightMemory::kHugePages, 100, {"never", 0}, WeightMemory::kHugePages},
  };
  for (const Case& c : cases) {
    const WeightMemoryChoice choice = choose_weight_memory(c.requested, c.weight_bytes, c.system);
    EXPECT_EQ(choice.memory, c.expected) << weight_memory_name(c.requested) << " " << c.weight_bytes << " "
                                         << c.system.transparent_huge_pages << " " << c.system.mem_available_bytes;
    EXPECT_EQ(choice.note.empty(), c.requested != WeightMemory::kAuto || c.expected == WeightMemory::kHugePages);
  }
}

TEST(WeightMemory, ParsesNames) {
  for (WeightMemory m : {WeightMemory::kAuto, WeightMemory::kMapped, WeightMemory::kHugePages})
    EXPECT_EQ(parse_weight_memory(weight_memory_name(m), "--weight-memory"), m);
  EXPECT_THROW(parse_weight_memory("huge", "--weight-memory"), Error);
}

TEST(WeightMemory, BufferIsAlignedAndCountsItsHugePages) {
  std::string why;
  const std::unique_ptr<HugePageBuffer> buffer = HugePageBuffer::allocate(5 << 20, &why);
  ASSERT_NE(buffer, nullptr) << why;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % HugePageBuffer::kHugePageBytes, 0u);
  EXPECT_EQ(buffer->size(), 6u << 20);
  std::memset(buffer->data(), 1, buffer->size());
  // The kernel may decline huge pages (fragmented memory, THP off); never more than the buffer.
  EXPECT_LE(buffer->huge_page_bytes(), buffer->size());
}

}  // namespace
}  // namespace aerie
