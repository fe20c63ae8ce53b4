// GGUF, llama.cpp's single-file model format (version 2 and 3; ggml's docs/gguf.md), little-endian:
//   magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
//   n_kv x { string key, u32 value type, value },            string = u64 length + bytes (no NUL)
//   n_tensors x { string name, u32 n_dims, n_dims x u64 ne, u32 ggml type, u64 offset },
//   padding to general.alignment (default 32), then the tensor data; each offset is relative to the data
//   start and a multiple of the alignment.
// ne[0] is the innermost (fastest-varying) dimension, so a ggml [ne0 = n_in, ne1 = n_out] matrix is the
// row-major [n_out, n_in] that the rest of aerie uses: shapes here are reversed into that order.
// A model may be split across files "NAME-00001-of-0000N.gguf" with split.no / split.count /
// split.tensors.count in each; open_gguf reads them all. Tensors are viewed in place in the mapped files.
//
// The bytes come from the internet: every count, length and offset is checked against the file before it
// is used (a metadata array of 2^40 elements, a string longer than the file, a tensor past the end, an
// unknown type id), and every error names the file and what is wrong.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/weight_store.h"

namespace aerie {

// The value types of GGUF metadata, with the format's own ids.
enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
const char* gguf_value_type_name(GgufValueType type);

// One metadata value. Scalars: integers in `integer` (u64 values above INT64_MAX are refused at read),
// floats in `number`, bools in `integer` (0/1), strings in `string`. Arrays: `array_type` names the element
// type and exactly one of `strings`, `integers`, `numbers` holds the elements (bools as integers). Arrays of
// arrays are refused at read (no published model uses them).
struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  int64_t integer = 0;
  double number = 0;
  std::string string;
  GgufValueType array_type = GgufValueType::kU8;
  std::vector<std::string> strings;
  std::vector<int64_t> integers;
  std::vector<double> numbers;

  bool is_integer() const;  // an integer type or bool (scalar)
  bool is_number() const;   // an integer or float type (scalar)
};

// The metadata of a GGUF model, with typed getters whose errors name the file and the key
// ("model.gguf: metadata key 'llama.block_count' is missing" / "is a string, expected an integer").
class GgufMetadata {
 public:
  GgufMetadata() = default;
  explicit GgufMetadata(std::string source) : source_(std::move(source)) {}

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const GgufValue* find(const std::string& key) const;
  const GgufValue& get(const std::string& key) const;  // throws when absent

  std::string string(const std::string& key) const;
  std::string string(const std::string& key, const std::string& fallback) const;
  int64_t integer(const std::string& key) const;  // any integer type
  int64_t integer(const std::string& key, int64_t fallback) const;
  double number(const std::string& key) const;  // any integer or float type
  double number(const std::string& key, double fallback) const;
  bool boolean(const std::string& key, bool fallback) const;
  // Arrays: the elements; throws when absent or of another element type.
  const std::vector<std::string>& strings(const std::string& key) const;
  const std::vector<int64_t>& integers(const std::string& key) const;  // integer (or bool) elements
  std::vector<double> numbers(const std::string& key) const;           // integer or float elements

  const std::map<std::string, GgufValue>& values() const { return values_; }
  void set(const std::string& key, GgufValue value) { values_[key] = std::move(value); }
  const std::string& source() const { return source_; }

 private:
  std::map<std::string, GgufValue> values_;
  std::string source_;
};

// llama.cpp's name for a ggml tensor type id ("Q4_K", "IQ2_XS", ...), or "unknown (<id>)".
std::string ggml_type_name(uint32_t type_id);

// A parsed GGUF model: its metadata (of the first file for a split model; the split.* keys dropped) and
// every tensor under its GGUF name ("blk.0.attn_q.weight"), shape in row-major order, dtype one of F32,
// F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K (and the integer/F64 element types). Any other ggml type is
// refused naming the tensor and the type.
struct GgufModel {
  GgufMetadata metadata;
  WeightStore store;
  uint32_t version = 0;
};

// Reads one GGUF file, or every shard of a split model when `path` is one of them (any shard; the others
// are found beside it by name, and each must agree on split.count and cover split.tensors.count tensors).
// `options.memory` chooses a mapping or a huge-page copy as for checkpoint folders.
GgufModel open_gguf(const std::filesystem::path& path, const WeightLoadOptions& options = {});

// True when `path` names a GGUF file (by its magic; false for folders and unreadable paths).
bool is_gguf_file(const std::filesystem::path& path);

// Parses one GGUF file's bytes already mapped: adds its tensors to `store` (views into `file`) and its
// metadata to `metadata`; the building block of open_gguf and the fuzz target. Returns the version.
uint32_t read_gguf(std::shared_ptr<class MappedFile> file, GgufMetadata& metadata, WeightStore& store);

}  // namespace aerie
