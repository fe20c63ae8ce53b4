// safetensors and sharded checkpoints: values read back exactly, and every malformed file is a clear error
// naming the file and the problem (never a crash).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/weight_store.h"
#include "tmp_dir.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

using aerie::testing::TmpDir;

// Builds safetensors bytes from a header object and a data blob.
std::string safetensors_bytes(const nlohmann::json& header, const std::string& data) {
  std::string text = header.dump();
  while (text.size() % 8) text += ' ';
  std::string out(8, '\0');
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  return out + text + data;
}

// Two tensors: "a" F32 [2, 3] = 0, 0.5, 1, ...; "b" BF16 [4] = 1, 2, 3, 4.
std::string good_file() {
  std::string data(24 + 8, '\0');
  for (int i = 0; i < 6; ++i) {
    const float v = 0.5f * float(i);
    std::memcpy(data.data() + 4 * i, &v, 4);
  }
  for (int i = 0; i < 4; ++i) {
    const uint16_t v = f32_to_bf16(float(i + 1));
    std::memcpy(data.data() + 24 + 2 * i, &v, 2);
  }
  const nlohmann::json header = {
      {"__metadata__", {{"format", "pt"}}},
      {"a", {{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {0, 24}}}},
      {"b", {{"dtype", "BF16"}, {"shape", {4}}, {"data_offsets", {24, 32}}}}};
  return safetensors_bytes(header, data);
}

void write(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::string open_error(const fs::path& path) {
  try {
    WeightStore::open_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SafeTensors, ReadsValuesInPlace) {
  TmpDir dir;
  write(dir.path / "model.safetensors", good_file());
  const WeightStore store = WeightStore::open_dir(dir.path);
  ASSERT_EQ(store.size(), 2u);
  const Tensor& a = store.get("a", {2, 3});
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_EQ(a.as<float>()[5], 2.5f);
  const Tensor& b = store.get("b", {4});
  EXPECT_EQ(bf16_to_f32(b.as<uint16_t>()[3]), 4.0f);
  EXPECT_EQ(store.total_bytes(), 32u);
  EXPECT_GT(store.prefault(), 0u);
}

TEST(SafeTensors, MissingAndWrongShapeNameTheTensor) {
  TmpDir dir;
  write(dir.path / "model.safetensors", good_file());
  const WeightStore store = WeightStore::open_dir(dir.path);
  try {
    store.get("c");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor 'c'"), std::string::npos);
  }
  try {
    store.get("a", {3, 2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'a' has shape [2, 3], expected [3, 2]"), std::string::npos) << e.what();
  }
}

struct BadCase {
  const char* name;
  std::string bytes;
  const char* expected;  // a fragment of the error
};

std::vector<BadCase> bad_cases() {
  const std::string good = good_file();
  auto with_header = [](nlohmann::json h, size_t data_bytes) { return safetensors_bytes(h, std::string(data_bytes, '\0')); };
  std::string huge_len = good;
  const uint64_t big = 1u << 20;
  std::memcpy(huge_len.data(), &big, 8);
  return {
      {"empty", "", "truncated"},
      {"short", good.substr(0, 5), "truncated"},
      {"header_past_end", huge_len, "past the end"},
      {"truncated_data", good.substr(0, good.size() - 3), "outside the file"},
      {"not_json", safetensors_bytes(nullptr, "").replace(8, 4, "{{{{"), "not valid JSON"},
      {"unknown_dtype", with_header({{"a", {{"dtype", "Q4_K"}, {"shape", {2}}, {"data_offsets", {0, 2}}}}}, 2), "unknown dtype 'Q4_K'"},
      {"shape_bytes_mismatch", with_header({{"a", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 8}}}}}, 8), "needs 12 bytes"},
      {"offsets_reversed", with_header({{"a", {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {8, 0}}}}}, 8), "end before"},
      {"overlap", with_header({{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
                               {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {4, 12}}}}}, 12), "overlap"},
      {"missing_offsets", with_header({{"a", {{"dtype", "F32"}, {"shape", {2}}}}}, 8), "data_offsets"},
      {"negative_dim", with_header({{"a", {{"dtype", "F32"}, {"shape", {-2}}, {"data_offsets", {0, 8}}}}}, 8), "shape"},
  };
}

TEST(SafeTensors, MalformedFilesGetClearErrors) {
  TmpDir dir;
  for (const BadCase& c : bad_cases()) {
    const fs::path path = dir.path / (std::string(c.name) + ".safetensors");
    write(path, c.bytes);
    const std::string error = open_error(path);
    EXPECT_NE(error.find(path.string()), std::string::npos) << c.name << ": " << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.name << ": " << error;
  }
}

TEST(SafeTensors, RandomCorruptionNeverCrashes) {
  TmpDir dir;
  const std::string good = good_file();
  std::mt19937 rng(7);
  const fs::path path = dir.path / "fuzz.safetensors";
  for (int i = 0; i < 400; ++i) {
    std::string bytes = good;
    if (i % 3 == 0) bytes.resize(rng() % bytes.size());
    for (int j = 0, n = int(rng() % 4) + 1; j < n && !bytes.empty(); ++j) bytes[rng() % bytes.size()] = char(rng());
    write(path, bytes);
    try {
      const WeightStore store = WeightStore::open_file(path);
      for (const std::string& name : store.names()) {
        const Tensor& t = store.get(name);
        // Every byte of every accepted tensor is readable.
        volatile uint8_t sink = 0;
        for (size_t k = 0; k < t.nbytes(); ++k) sink = sink ^ static_cast<const uint8_t*>(t.data)[k];
      }
    } catch (const Error&) {
    }
  }
}

TEST(SafeTensors, ShardedIndex) {
  TmpDir dir;
  write(dir.path / "model-00001-of-00002.safetensors", good_file());
  const nlohmann::json h = {{"c", {{"dtype", "F16"}, {"shape", {1}}, {"data_offsets", {0, 2}}}}};
  write(dir.path / "model-00002-of-00002.safetensors", safetensors_bytes(h, std::string("\x00\x3c", 2)));
  nlohmann::json index = {{"metadata", {{"total_size", 34}}},
                          {"weight_map", {{"a", "model-00001-of-00002.safetensors"},
                                          {"b", "model-00001-of-00002.safetensors"},
                                          {"c", "model-00002-of-00002.safetensors"}}}};
  std::ofstream(dir.path / "model.safetensors.index.json") << index.dump();
  const WeightStore store = WeightStore::open_dir(dir.path);
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(f16_to_f32(store.get("c").as<uint16_t>()[0]), 1.0f);

  index["weight_map"]["d"] = "model-00002-of-00002.safetensors";
  std::ofstream(dir.path / "model.safetensors.index.json") << index.dump();
  EXPECT_THROW(
      {
        try {
          WeightStore::open_dir(dir.path);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("'d'"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  index["weight_map"]["d"] = "model-00003-of-00002.safetensors";
  std::ofstream(dir.path / "model.safetensors.index.json") << index.dump();
  try {
    WeightStore::open_dir(dir.path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
}

TEST(WeightStore, EmptyFolderSaysWhatIsExpected) {
  TmpDir dir;
  try {
    WeightStore::open_dir(dir.path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no weights found"), std::string::npos);
  }
}

}  // namespace
}  // namespace aerie
