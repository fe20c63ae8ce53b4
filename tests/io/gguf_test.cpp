// The GGUF reader on files written byte by byte here from the format's definition: a good file reads back
// (metadata of every type, shapes reversed into row-major order, block types sized by their blocks), and
// every lie a hostile file can tell is a load error naming the file and the problem, never a crash or an
// allocation the file cannot back.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/gguf.h"
#include "tmp_dir.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
using testing::TmpDir;

// Little-endian GGUF bytes, built field by field.
class GgufBytes {
 public:
  GgufBytes() = default;
  // The magic and version that open a file.
  static GgufBytes file(uint32_t version = 3) {
    GgufBytes b;
    b.raw("GGUF").u32(version);
    return b;
  }
  GgufBytes& raw(const std::string& s) {
    bytes_ += s;
    return *this;
  }
  template <typename T>
  GgufBytes& put(T v) {
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  GgufBytes& u32(uint32_t v) { return put(v); }
  GgufBytes& u64(uint64_t v) { return put(v); }
  GgufBytes& str(const std::string& s) { return u64(s.size()).raw(s); }
  GgufBytes& pad_to(size_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_ += '\0';
    return *this;
  }
  const std::string& bytes() const { return bytes_; }
  size_t size() const { return bytes_.size(); }

 private:
  std::string bytes_;
};

// The parts of a typical file: counts, then metadata, tensor infos and data, each overridable by a test.
struct FileParts {
  uint64_t n_tensors = 2;
  std::vector<std::string> kv;  // each a complete key + type + value
  std::vector<std::string> infos;
  std::string data;
};

std::string kv_string(const std::string& key, const std::string& value) {
  return GgufBytes().str(key).u32(8).str(value).bytes();
}
template <typename T>
std::string kv_scalar(const std::string& key, uint32_t type, T value) {
  return GgufBytes().str(key).u32(type).put(value).bytes();
}
std::string tensor_info(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
  GgufBytes b;
  b.str(name).u32(uint32_t(ne.size()));
  for (uint64_t n : ne) b.u64(n);
  b.u32(type).u64(offset);
  return b.bytes();
}

std::string assemble(const FileParts& parts, uint64_t alignment = 32) {
  GgufBytes b = GgufBytes::file();
  b.u64(parts.n_tensors).u64(parts.kv.size());
  for (const std::string& kv : parts.kv) b.raw(kv);
  for (const std::string& info : parts.infos) b.raw(info);
  b.pad_to(alignment);
  b.raw(parts.data);
  return b.bytes();
}

// A valid file: an F32 [3, 2] matrix (ggml ne = {2, 3}) and one Q8_0 row of 64 values (2 blocks of 34 bytes).
FileParts good_parts() {
  FileParts p;
  p.kv.push_back(kv_string("general.architecture", "llama"));
  p.kv.push_back(kv_scalar<uint32_t>("llama.block_count", 4, 2));
  p.kv.push_back(kv_scalar<float>("llama.rope.freq_base", 6, 500000.0f));
  p.kv.push_back(kv_scalar<uint8_t>("tokenizer.ggml.add_bos_token", 7, 1));
  {
    GgufBytes arr;
    arr.str("tokenizer.ggml.tokens").u32(9).u32(8).u64(3).str("a").str("b").str("ab");
    p.kv.push_back(arr.bytes());
    GgufBytes ints;
    ints.str("tokenizer.ggml.token_type").u32(9).u32(5).u64(3).put<int32_t>(1).put<int32_t>(1).put<int32_t>(3);
    p.kv.push_back(ints.bytes());
  }
  p.infos.push_back(tensor_info("w", {2, 3}, 0, 0));
  p.infos.push_back(tensor_info("q", {64}, 8, 32));
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  p.data.assign(reinterpret_cast<const char*>(w.data()), 24);
  p.data.resize(32, '\0');
  p.data += std::string(68, '\x01');
  return p;
}

std::string write(const TmpDir& dir, const std::string& name, const std::string& bytes) {
  const fs::path path = dir.path / name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

std::string open_error(const std::string& bytes) {
  TmpDir dir;
  try {
    open_gguf(write(dir, "model.gguf", bytes));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Gguf, ReadsMetadataAndTensors) {
  TmpDir dir;
  const std::string path = write(dir, "model.gguf", assemble(good_parts()));
  EXPECT_TRUE(is_gguf_file(path));
  EXPECT_FALSE(is_gguf_file(dir.path));
  const GgufModel model = open_gguf(path);
  EXPECT_EQ(model.version, 3u);
  const GgufMetadata& m = model.metadata;
  EXPECT_EQ(m.string("general.architecture"), "llama");
  EXPECT_EQ(m.integer("llama.block_count"), 2);
  EXPECT_DOUBLE_EQ(m.number("llama.rope.freq_base"), 500000.0);
  EXPECT_TRUE(m.boolean("tokenizer.ggml.add_bos_token", false));
  EXPECT_EQ(m.strings("tokenizer.ggml.tokens"), (std::vector<std::string>{"a", "b", "ab"}));
  EXPECT_EQ(m.integers("tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 1, 3}));
  EXPECT_EQ(m.integer("llama.missing", 7), 7);
  const Tensor& w = model.store.get("w");
  EXPECT_EQ(w.dtype, DType::kF32);
  EXPECT_EQ(w.shape, (Shape{3, 2}));  // ne = {2, 3}: rows of 2
  EXPECT_EQ(w.as<float>()[5], 6.0f);
  const Tensor& q = model.store.get("q");
  EXPECT_EQ(q.dtype, DType::kQ8_0);
  EXPECT_EQ(q.shape, (Shape{64}));
  EXPECT_EQ(q.nbytes(), 68u);
}

TEST(Gguf, TypedGettersNameTheKey) {
  TmpDir dir;
  const GgufModel model = open_gguf(write(dir, "model.gguf", assemble(good_parts())));
  const auto error = [&](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string e = error([&] { model.metadata.integer("general.architecture"); });
  EXPECT_NE(e.find("'general.architecture' is a string, expected an integer"), std::string::npos) << e;
  const std::string missing = error([&] { model.metadata.integer("llama.context_length"); });
  EXPECT_NE(missing.find("'llama.context_length' is missing"), std::string::npos) << missing;
  const std::string array = error([&] { model.metadata.strings("tokenizer.ggml.token_type"); });
  EXPECT_NE(array.find("is an array of i32, expected an array of strings"), std::string::npos) << array;
}

// Each hostile file, and the words its error must contain.
TEST(Gguf, RefusesHostileFiles) {
  struct Case {
    const char* what;
    std::string bytes;
    const char* expected;
  };
  std::vector<Case> cases;
  const std::string good = assemble(good_parts());
  cases.push_back({"empty", "", "not a GGUF file"});
  cases.push_back({"bad magic", "GGML" + good.substr(4), "not a GGUF file"});
  cases.push_back({"version 1", GgufBytes::file(1).u64(0).u64(0).bytes(), "GGUF version 1"});
  cases.push_back({"big-endian", GgufBytes::file(0x03000000u).u64(0).u64(0).bytes(), "big-endian"});
  cases.push_back({"truncated header", good.substr(0, 20), "truncated GGUF file"});
  cases.push_back({"truncated data", good.substr(0, good.size() - 10), "lies outside the file"});
  {
    FileParts p = good_parts();
    p.kv.push_back(GgufBytes().str("big").u32(9).u32(0).u64(uint64_t(1) << 40).bytes());
    cases.push_back({"array of 2^40 elements", assemble(p), "claims an array of 1099511627776 elements"});
  }
  {
    FileParts p = good_parts();
    p.kv.push_back(GgufBytes().str("s").u32(8).u64(uint64_t(1) << 20).raw("x").bytes());
    cases.push_back({"string longer than the file", assemble(p), "truncated GGUF file: a string value needs 1048576"});
  }
  {
    FileParts p = good_parts();
    p.kv.push_back(GgufBytes().str("s").u32(8).u64(~uint64_t(0)).bytes());
    cases.push_back({"string of 2^64-1 bytes", assemble(p), "more than the limit"});
  }
  {
    FileParts p = good_parts();
    p.kv.push_back(kv_scalar<uint32_t>("v", 13, 0));
    cases.push_back({"unknown value type", assemble(p), "unknown value type 13"});
  }
  {
    FileParts p = good_parts();
    p.kv.push_back(kv_scalar<uint32_t>("llama.block_count", 4, 3));
    cases.push_back({"duplicate key", assemble(p), "'llama.block_count' appears twice"});
  }
  {
    FileParts p = good_parts();
    p.kv.push_back(GgufBytes().str("n").u32(9).u32(9).u64(1).bytes());
    cases.push_back({"array of arrays", assemble(p), "array of arrays"});
  }
  {
    FileParts p = good_parts();
    p.kv.push_back(kv_scalar<uint8_t>("b", 7, 2));
    cases.push_back({"bool of 2", assemble(p), "bool value 2"});
  }
  {
    FileParts p = good_parts();
    p.infos[1] = tensor_info("q", {64}, 40, 32);
    cases.push_back({"type id out of range", assemble(p), "ggml type unknown (40) is not supported"});
  }
  {
    FileParts p = good_parts();
    p.infos[1] = tensor_info("q", {256}, 10, 32);
    cases.push_back({"type aerie does not read", assemble(p), "ggml type Q2_K is not supported"});
  }
  {
    FileParts p = good_parts();
    p.infos[1] = tensor_info("q", {48}, 8, 32);
    cases.push_back({"row not whole blocks", assemble(p), "not whole Q8_0 blocks of 32"});
  }
  {
    FileParts p = good_parts();
    p.infos[1] = tensor_info("q", {64}, 8, 16);
    cases.push_back({"unaligned data", assemble(p), "not a multiple of the alignment 32"});
  }
  {
    FileParts p = good_parts();
    p.infos[1] = tensor_info("q", {64}, 8, uint64_t(1) << 62);
    cases.push_back({"offset past the end", assemble(p), "lies outside the file"});
  }
  {
    FileParts p = good_parts();
    p.infos[1] = tensor_info("q", {64}, 8, 0);
    cases.push_back({"overlapping tensors", assemble(p), "overlap"});
  }
  {
    FileParts p = good_parts();
    p.infos[0] = tensor_info("w", {2, 3, 1, 1, 1}, 0, 0);
    cases.push_back({"five dimensions", assemble(p), "5 dimensions"});
  }
  {
    FileParts p = good_parts();
    p.infos[0] = tensor_info("w", {uint64_t(1) << 30, uint64_t(1) << 30}, 0, 0);
    cases.push_back({"too many elements", assemble(p), "too many elements"});
  }
  {
    FileParts p = good_parts();
    p.n_tensors = uint64_t(1) << 40;
    cases.push_back({"2^40 tensors", assemble(p), "more than the limit"});
  }
  {
    FileParts p = good_parts();
    p.n_tensors = 3;
    // The padding and data are read as a third tensor info: whatever they say, an error at an offset.
    cases.push_back({"more tensors than infos", assemble(p), "(at byte"});
  }
  {
    FileParts p = good_parts();
    p.infos[1] = tensor_info("w", {64}, 8, 32);
    cases.push_back({"duplicate tensor name", assemble(p), "appears twice"});
  }
  {
    FileParts p = good_parts();
    p.kv.push_back(kv_scalar<uint32_t>("general.alignment", 4, 24));
    cases.push_back({"alignment not a power of two", assemble(p), "general.alignment must be a power of two"});
  }
  {
    FileParts p = good_parts();
    std::vector<float> nan_norm = {1.0f, std::nanf("")};
    p.infos[0] = tensor_info("w", {2}, 0, 0);
    std::memcpy(p.data.data(), nan_norm.data(), 8);
    cases.push_back({"NaN in a small tensor", assemble(p), "non-finite value (nan)"});
  }
  for (const Case& c : cases) {
    const std::string e = open_error(c.bytes);
    EXPECT_NE(e.find(c.expected), std::string::npos) << c.what << ": " << e;
    EXPECT_NE(e.find("model.gguf"), std::string::npos) << c.what << " does not name the file: " << e;
  }
}

// Every prefix of a good file is refused cleanly (the last byte of the data included).
TEST(Gguf, EveryTruncationIsAnError) {
  const std::string good = assemble(good_parts());
  for (size_t n = 0; n < good.size(); ++n) {
    const std::string e = open_error(good.substr(0, n));
    EXPECT_NE(e, "(no error)") << "prefix of " << n << " bytes";
  }
}

std::string split_file(int no, int count, int32_t total, const std::string& tensor, bool with_kv = true) {
  FileParts p;
  p.n_tensors = 1;
  if (with_kv) {
    p.kv.push_back(kv_scalar<uint16_t>("split.no", 2, uint16_t(no)));
    p.kv.push_back(kv_scalar<uint16_t>("split.count", 2, uint16_t(count)));
    p.kv.push_back(kv_scalar<int32_t>("split.tensors.count", 5, total));
  }
  if (no == 0) p.kv.push_back(kv_string("general.architecture", "llama"));
  p.infos.push_back(tensor_info(tensor, {4}, 0, 0));
  std::vector<float> v = {1, 2, 3, float(no)};
  p.data.assign(reinterpret_cast<const char*>(v.data()), 16);
  return assemble(p);
}

TEST(Gguf, ReadsEverySplitShard) {
  TmpDir dir;
  for (int i = 0; i < 3; ++i)
    write(dir, "m-0000" + std::to_string(i + 1) + "-of-00003.gguf", split_file(i, 3, 3, "t" + std::to_string(i)));
  // Any shard opens the whole model; metadata comes from the first without the split.* keys.
  const GgufModel model = open_gguf(dir.path / "m-00002-of-00003.gguf");
  EXPECT_EQ(model.store.size(), 3u);
  EXPECT_EQ(model.store.get("t2").as<float>()[3], 2.0f);
  EXPECT_EQ(model.metadata.string("general.architecture"), "llama");
  EXPECT_FALSE(model.metadata.has("split.count"));
}

TEST(Gguf, RefusesInconsistentSplits) {
  const auto error = [](const std::vector<std::pair<std::string, std::string>>& files) {
    TmpDir dir;
    for (const auto& [name, bytes] : files) write(dir, name, bytes);
    try {
      open_gguf(dir.path / files[0].first);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  std::string e = error({{"m-00001-of-00002.gguf", split_file(0, 2, 2, "a")}});
  EXPECT_NE(e.find("shard 'm-00002-of-00002.gguf' is missing"), std::string::npos) << e;
  e = error({{"m-00001-of-00002.gguf", split_file(0, 2, 2, "a")}, {"m-00002-of-00002.gguf", split_file(0, 2, 2, "b")}});
  EXPECT_NE(e.find("split.no / split.count say shard 0 of 2, but the file is shard 1"), std::string::npos) << e;
  e = error({{"m-00001-of-00002.gguf", split_file(0, 2, 5, "a")}, {"m-00002-of-00002.gguf", split_file(1, 2, 5, "b")}});
  EXPECT_NE(e.find("split.tensors.count is 5 but the 2 shards hold 2 tensors"), std::string::npos) << e;
  e = error({{"m-00001-of-00002.gguf", split_file(0, 2, 2, "a")}, {"m-00002-of-00002.gguf", split_file(1, 2, 2, "a")}});
  EXPECT_NE(e.find("'a' appears twice"), std::string::npos) << e;
}

}  // namespace
}  // namespace aerie
