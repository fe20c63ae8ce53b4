// Weight files that lie: headers and archives whose values would make the readers read outside the file,
// allocate without bound, or load NaN norm weights that turn every output into garbage. Each is a load
// error naming the file, the tensor and the limit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "io/weight_store.h"
#include "pickle_writer.h"
#include "tmp_dir.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

using testing::PickleWriter;
using testing::TmpDir;

std::string open_error(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  try {
    WeightStore::open_file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string floats(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4);
}

// --- safetensors ---------------------------------------------------------------------------------------

std::string safetensors(const std::string& header_text, const std::string& data) {
  std::string text = header_text;
  while (text.size() % 8) text += ' ';
  std::string out;
  testing::put_le(out, text.size(), 8);
  return out + text + data;
}

std::string safetensors(const nlohmann::json& header, const std::string& data) {
  return safetensors(header.dump(), data);
}

nlohmann::json entry(const char* dtype, const std::vector<uint64_t>& shape, uint64_t begin, uint64_t end) {
  return {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, end}}};
}

struct Case {
  const char* name;
  std::string bytes;
  const char* expected;
};

TEST(HostileSafetensors, LyingHeaders) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::string huge_header;
  testing::put_le(huge_header, uint64_t{200} << 20, 8);
  const uint16_t bf16_inf = f32_to_bf16(std::numeric_limits<float>::infinity());
  const std::vector<Case> cases = {
      {"header_over_limit", huge_header + "{}",
       "header length 209715200 exceeds the limit of 104857600 bytes (LoadLimits::max_safetensors_header_bytes)"},
      // 1 MB of '[': nlohmann alone would build a million nested arrays before finding the syntax error.
      {"deep_header", safetensors(std::string("{\"a\":").append(1 << 20, '['), ""),
       "safetensors header nests deeper than 128 levels (JsonLimits::max_depth)"},
      {"rank_over_limit", safetensors({{"a", entry("F32", {1, 1, 1, 1, 1, 1, 1}, 0, 4)}}, floats({0})),
       "tensor 'a': 7 dimensions, more than 6 (LoadLimits::max_tensor_rank)"},
      {"dim_above_2_63", safetensors({{"a", entry("F32", {1, UINT64_MAX}, 0, 4)}}, floats({0})),
       "tensor 'a': dimension 18446744073709551615 is too large"},
      {"nan_norm_weight",
       safetensors({{"model.norm.weight", entry("F32", {4}, 0, 16)}}, floats({1, 1, nan, 1})),
       "tensor 'model.norm.weight' holds a non-finite value (nan) at element 2: the checkpoint is damaged"},
      {"inf_bf16_bias",
       safetensors({{"q_proj.bias", entry("BF16", {2}, 0, 4)}},
                   std::string("\0\0", 2).append(reinterpret_cast<const char*>(&bf16_inf), 2)),
       "tensor 'q_proj.bias' holds a non-finite value (inf) at element 1"},
      {"nan_fp8_block", safetensors({{"w", entry("F8_E4M3", {4}, 0, 4)}}, std::string("\x30\x30\x30\xff", 4)),
       "tensor 'w' holds a non-finite value (nan) at element 3"},
  };
  TmpDir dir;
  for (const Case& c : cases) {
    const fs::path path = dir.path / (std::string(c.name) + ".safetensors");
    const std::string error = open_error(path, c.bytes);
    EXPECT_NE(error.find(path.string() + ": "), std::string::npos) << c.name << ": " << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.name << ": " << error;
  }
}

// Large matrices are not scanned at load (the logits check catches what they do at run time).
TEST(HostileSafetensors, LargeTensorsAreNotScanned) {
  std::vector<float> values(size_t{1} << 17, 0.5f);
  values[7] = std::numeric_limits<float>::quiet_NaN();
  TmpDir dir;
  const fs::path path = dir.path / "big.safetensors";
  std::ofstream(path, std::ios::binary) << safetensors({{"w", entry("F32", {1u << 17}, 0, 1u << 19)}}, floats(values));
  EXPECT_TRUE(std::isnan(WeightStore::open_file(path).get("w").as<float>()[7]));
}

// --- torch.save zip archives -------------------------------------------------------------------------

std::string torch_file(const PickleWriter& pickle, const std::string& storage) {
  return testing::zip_archive({{"archive/data.pkl", pickle.bytes}, {"archive/data/0", storage}});
}

TEST(HostileTorchZip, AWellFormedHandMadeFileLoads) {
  PickleWriter w;
  w.begin_state_dict().tensor("w", "FloatStorage", "0", 6, 0, {2, 3}, {3, 1});
  w.tensor("t", "FloatStorage", "0", 6, 0, {3, 2}, {1, 3}).end_state_dict();
  TmpDir dir;
  std::ofstream(dir.path / "ok.bin", std::ios::binary) << torch_file(w, floats({0, 1, 2, 3, 4, 5}));
  const WeightStore store = WeightStore::open_file(dir.path / "ok.bin");
  EXPECT_EQ(store.get("w", {2, 3}).as<float>()[4], 4.0f);
  EXPECT_EQ(store.get("t", {3, 2}).as<float>()[1], 3.0f);  // the transpose, copied
}

TEST(HostileTorchZip, LyingArchives) {
  PickleWriter good;
  good.begin_state_dict().tensor("w", "FloatStorage", "0", 4, 0, {4}, {1}).end_state_dict();
  const std::string valid = torch_file(good, floats({1, 2, 3, 4}));

  // A ZIP64 locator whose record offset is 2^64 - 8: z64 + 56 wraps around to 48.
  std::string zip64 = valid;
  const size_t eocd = zip64.rfind(std::string("PK\x05\x06", 4));
  zip64[eocd + 8] = zip64[eocd + 9] = zip64[eocd + 10] = zip64[eocd + 11] = char(0xff);  // counts: 0xffff
  std::string locator;
  testing::put_le(locator, 0x07064b50, 4);
  testing::put_le(locator, 0, 4);
  testing::put_le(locator, ~uint64_t{0} - 7, 8);
  testing::put_le(locator, 1, 4);
  zip64.insert(eocd, locator);

  // 200 transposed views of one 256 KiB storage: each would be a 256 KiB copy (50 MiB from a 256 KiB file).
  PickleWriter strided;
  strided.begin_state_dict();
  for (int i = 0; i < 200; ++i)
    strided.tensor(std::string("t").append(std::to_string(i)), "FloatStorage", "0", 256 * 256, 0, {256, 256}, {1, 256});
  strided.end_state_dict();

  PickleWriter rank;
  rank.begin_state_dict().tensor("w", "FloatStorage", "0", 4, 0, {1, 1, 1, 1, 1, 1, 4}, {4, 4, 4, 4, 4, 4, 1});
  PickleWriter nan;
  nan.begin_state_dict().tensor("norm.weight", "FloatStorage", "0", 4, 0, {4}, {1}).end_state_dict();
  PickleWriter long_key;
  long_key.begin_state_dict().tensor("w", "FloatStorage", std::string(1 << 20, '0'), 4, 0, {4}, {1});

  const std::vector<Case> cases = {
      {"zip64_offset_wraps", zip64, "bad ZIP64 end-of-central-directory record"},
      {"strided_copies", torch_file(strided, std::string(256 * 256 * 4, '\0')),
       "tensor 't1' is a strided view whose copy (262144 bytes) would bring the copies of this file past its size"},
      {"rank_over_limit", torch_file(rank.end_state_dict(), floats({1, 2, 3, 4})),
       "tensor size has 7 dimensions, more than 6 (LoadLimits::max_tensor_rank)"},
      {"nan_norm_weight", torch_file(nan, floats({1, std::nanf(""), 1, 1})),
       "tensor 'norm.weight' holds a non-finite value (nan) at element 1"},
      {"long_storage_key", torch_file(long_key.end_state_dict(), floats({1, 2, 3, 4})),
       "storage key of 1048576 bytes in data.pkl"},
  };
  TmpDir dir;
  EXPECT_EQ(open_error(dir.path / "valid.bin", valid), "(no error)");
  for (const Case& c : cases) {
    const fs::path path = dir.path / (std::string(c.name) + ".bin");
    const std::string error = open_error(path, c.bytes);
    EXPECT_NE(error.find(path.string() + ": "), std::string::npos) << c.name << ": " << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.name << ": " << error;
  }
}

}  // namespace
}  // namespace aerie
