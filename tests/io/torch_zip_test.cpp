// torch.save zip state dicts (tests/data/io/state_dict.bin, written by tools/gen/io/make_torch_zip_data.py with
// torch 1.13): values, dtypes, strided and shared storages, and clear errors on damaged archives.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/error.h"
#include "io/weight_store.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

const fs::path kBin = fs::path(AERIE_TEST_DATA_DIR) / "io" / "state_dict.bin";

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path scratch_path(const std::string& name) {
  return fs::temp_directory_path() / ("aerie_zip_" + std::to_string(::getpid()) + "_" + name + ".bin");
}

std::string open_error(const std::string& bytes, const std::string& name) {
  const fs::path path = scratch_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  std::string error;
  try {
    WeightStore::open_file(path);
  } catch (const Error& e) {
    error = e.what();
  }
  fs::remove(path);
  return error;
}

TEST(TorchZip, ReadsEveryTensorExactly) {
  const WeightStore store = WeightStore::open_file(kBin);
  EXPECT_EQ(store.size(), 7u);
  const Tensor& f32 = store.get("f32", {2, 3});
  for (int i = 0; i < 6; ++i) EXPECT_EQ(f32.as<float>()[i], 0.5f * float(i));
  const Tensor& bf16 = store.get("bf16", {8});
  ASSERT_EQ(bf16.dtype, DType::kBF16);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(bf16_to_f32(bf16.as<uint16_t>()[i]), float(i - 4));
  const Tensor& f16 = store.get("f16", {4});
  for (int i = 0; i < 4; ++i) EXPECT_EQ(f16_to_f32(f16.as<uint16_t>()[i]), float(i) / 4);
  const Tensor& i64 = store.get("i64", {4});
  EXPECT_EQ(i64.as<int64_t>()[0], -3);
  EXPECT_EQ(i64.as<int64_t>()[3], int64_t(1) << 40);
  // transposed = arange(6).reshape(3, 2).t(): row r, column c holds 2c + r.
  const Tensor& t = store.get("transposed", {2, 3});
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(t.as<float>()[r * 3 + c], float(2 * c + r));
  // Two views of arange(12) * 0.25 at offsets 0 and 6.
  const Tensor& head = store.get("shared_head", {2, 2});
  const Tensor& tail = store.get("shared_tail", {6});
  EXPECT_EQ(head.as<float>()[3], 0.75f);
  EXPECT_EQ(tail.as<float>()[0], 1.5f);
  EXPECT_EQ(tail.as<float>()[5], 2.75f);
}

TEST(TorchZip, DamagedArchivesGetClearErrors) {
  const std::string good = read_all(kBin);
  ASSERT_GT(good.size(), 200u);
  EXPECT_NE(open_error(good.substr(0, good.size() / 2), "truncated").find("zip"), std::string::npos);
  EXPECT_NE(open_error("", "empty").find("too short"), std::string::npos);
  // The central directory's first entry: mark it deflate-compressed (method 8).
  std::string compressed = good;
  const size_t cd = compressed.find("PK\x01\x02");
  ASSERT_NE(cd, std::string::npos);
  compressed[cd + 10] = 8;
  EXPECT_NE(open_error(compressed, "compressed").find("compressed"), std::string::npos);
  // An opcode the reader does not know, at the start of data.pkl (right after its local header).
  std::string bad_pickle = good;
  const size_t local = bad_pickle.find("PK\x03\x04");
  const uint16_t name_len = uint8_t(bad_pickle[local + 26]) | uint16_t(uint8_t(bad_pickle[local + 27]) << 8);
  const uint16_t extra_len = uint8_t(bad_pickle[local + 28]) | uint16_t(uint8_t(bad_pickle[local + 29]) << 8);
  bad_pickle[local + 30 + name_len + extra_len] = char(0xfe);
  const std::string error = open_error(bad_pickle, "opcode");
  EXPECT_NE(error.find("pickle: unsupported opcode 0xfe"), std::string::npos) << error;
  EXPECT_NE(error.find(".bin"), std::string::npos) << error;
}

// pytorch_model.bin.index.json: the folder form EAGLE heads ship in; a listed tensor that the shard lacks and a
// missing shard are errors naming the problem.
TEST(TorchZip, ShardedIndex) {
  const fs::path dir = fs::temp_directory_path() / ("aerie_zip_index_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string shard = "pytorch_model-00001-of-00001.bin";
  fs::copy_file(kBin, dir / shard, fs::copy_options::overwrite_existing);
  auto write_index = [&](const std::string& weight_map) {
    std::ofstream(dir / "pytorch_model.bin.index.json") << "{\"metadata\": {}, \"weight_map\": {" << weight_map << "}}";
  };
  auto open_error_dir = [&]() -> std::string {
    try {
      WeightStore::open_dir(dir);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  write_index("\"f32\": \"" + shard + "\", \"bf16\": \"" + shard + "\"");
  const WeightStore store = WeightStore::open_dir(dir);
  EXPECT_EQ(store.size(), 7u);
  EXPECT_EQ(store.get("f32", {2, 3}).as<float>()[5], 2.5f);
  write_index("\"f32\": \"" + shard + "\", \"absent\": \"" + shard + "\"");
  EXPECT_NE(open_error_dir().find("tensor 'absent' listed in pytorch_model.bin.index.json is not in this shard"),
            std::string::npos);
  write_index("\"f32\": \"pytorch_model-00002-of-00002.bin\"");
  EXPECT_NE(open_error_dir().find("shard 'pytorch_model-00002-of-00002.bin' is missing"), std::string::npos);
  fs::remove_all(dir);
}

TEST(TorchZip, RandomCorruptionNeverCrashes) {
  const std::string good = read_all(kBin);
  std::mt19937 rng(11);
  const fs::path path = scratch_path("fuzz");
  for (int i = 0; i < 300; ++i) {
    std::string bytes = good;
    if (i % 4 == 0) bytes.resize(rng() % bytes.size());
    for (int j = 0, n = int(rng() % 6) + 1; j < n && !bytes.empty(); ++j) bytes[rng() % bytes.size()] = char(rng());
    std::ofstream(path, std::ios::binary) << bytes;
    try {
      const WeightStore store = WeightStore::open_file(path);
      for (const std::string& name : store.names()) {
        const Tensor& t = store.get(name);
        volatile uint8_t sink = 0;
        for (size_t k = 0; k < t.nbytes(); ++k) sink = sink ^ static_cast<const uint8_t*>(t.data)[k];
      }
    } catch (const Error&) {
    }
  }
  fs::remove(path);
}

}  // namespace
}  // namespace aerie
