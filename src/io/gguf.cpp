#include "io/gguf.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <cctype>
#include <cstdio>

#include "core/error.h"
#include "core/limits.h"
#include "io/mapped_file.h"
#include "io/tensor_checks.h"

namespace aerie {
namespace fs = std::filesystem;
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxDimsGgml = 4;          // GGML_MAX_DIMS
constexpr uint64_t kDefaultAlignment = 32;

// Bounds on what one file may make the reader build (beyond the file's own size, which bounds the rest):
// generous for real files (Llama 3: 128k tokens, 280k merges; DeepSeek-V3: 1.1k tensors stacked per layer).
constexpr uint64_t kMaxKv = uint64_t{1} << 16;
constexpr uint64_t kMaxTensors = uint64_t{1} << 20;
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 24;
constexpr uint64_t kMaxStringBytes = uint64_t{64} << 20;

// Every checked read of the header names the file and the offset it failed at.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& path) : data_(data), size_(size), path_(path) {}

  uint64_t offset() const { return at_; }
  uint64_t remaining() const { return size_ - at_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(str_cat(path_, ": ", what, " (at byte ", at_, " of ", size_, ")"));
  }
  void need(uint64_t n, const char* what) const {
    if (n > remaining()) fail(str_cat("truncated GGUF file: ", what, " needs ", n, " bytes, ", remaining(), " left"));
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string string(const char* what) {
    const uint64_t n = read<uint64_t>(what);
    if (n > kMaxStringBytes) fail(str_cat(what, " claims ", n, " bytes, more than the limit of ", kMaxStringBytes));
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + at_), size_t(n));
    at_ += n;
    return s;
  }
  void align_to(uint64_t alignment) {
    const uint64_t aligned = (at_ + alignment - 1) / alignment * alignment;
    if (aligned > size_) fail("truncated GGUF file: no data after the tensor infos");
    at_ = aligned;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  const std::string& path_;
  uint64_t at_ = 0;
};

size_t value_type_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16: return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32: return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64: return 8;
    case GgufValueType::kString: return 8;  // at least its length
    case GgufValueType::kArray: return 12;  // at least its element type and count
  }
  return 0;
}

bool is_float_type(GgufValueType t) { return t == GgufValueType::kF32 || t == GgufValueType::kF64; }
bool is_int_type(GgufValueType t) {
  return !is_float_type(t) && t != GgufValueType::kString && t != GgufValueType::kArray;
}

GgufValueType read_value_type(Cursor& c, const std::string& key) {
  const uint32_t id = c.read<uint32_t>("a value type");
  if (id > uint32_t(GgufValueType::kF64)) c.fail(str_cat("metadata key '", key, "' has unknown value type ", id));
  return GgufValueType(id);
}

// One scalar of an integer type (bool included) as int64; a u64 above INT64_MAX is refused.
int64_t read_integer(Cursor& c, GgufValueType t, const std::string& key) {
  switch (t) {
    case GgufValueType::kU8: return c.read<uint8_t>("a u8");
    case GgufValueType::kI8: return c.read<int8_t>("an i8");
    case GgufValueType::kBool: {
      const uint8_t b = c.read<uint8_t>("a bool");
      if (b > 1) c.fail(str_cat("metadata key '", key, "' holds bool value ", int(b), " (only 0 and 1 are valid)"));
      return b;
    }
    case GgufValueType::kU16: return c.read<uint16_t>("a u16");
    case GgufValueType::kI16: return c.read<int16_t>("an i16");
    case GgufValueType::kU32: return c.read<uint32_t>("a u32");
    case GgufValueType::kI32: return c.read<int32_t>("an i32");
    case GgufValueType::kI64: return c.read<int64_t>("an i64");
    case GgufValueType::kU64: {
      const uint64_t v = c.read<uint64_t>("a u64");
      if (v > uint64_t(std::numeric_limits<int64_t>::max()))
        c.fail(str_cat("metadata key '", key, "' holds u64 value ", v, ", beyond the signed 64-bit range"));
      return int64_t(v);
    }
    default: break;
  }
  c.fail("internal: not an integer type");
}

double read_float(Cursor& c, GgufValueType t) {
  return t == GgufValueType::kF32 ? double(c.read<float>("an f32")) : c.read<double>("an f64");
}

GgufValue read_value(Cursor& c, GgufValueType type, const std::string& key) {
  GgufValue v;
  v.type = type;
  if (type == GgufValueType::kString) {
    v.string = c.string("a string value");
  } else if (is_float_type(type)) {
    v.number = read_float(c, type);
  } else if (type != GgufValueType::kArray) {
    v.integer = read_integer(c, type, key);
    v.number = double(v.integer);
  } else {
    v.array_type = read_value_type(c, key);
    if (v.array_type == GgufValueType::kArray) c.fail(str_cat("metadata key '", key, "' is an array of arrays"));
    const uint64_t n = c.read<uint64_t>("an array length");
    // Each element takes at least value_type_size bytes of the file: a count the rest of the file cannot
    // hold is refused before anything is reserved.
    if (n > kMaxArrayElements || n > c.remaining() / value_type_size(v.array_type))
      c.fail(str_cat("metadata key '", key, "' claims an array of ", n, " elements, more than the file (",
                     c.remaining(), " bytes left) or the limit (", kMaxArrayElements, ") allows"));
    if (v.array_type == GgufValueType::kString) {
      v.strings.reserve(size_t(n));
      for (uint64_t i = 0; i < n; ++i) v.strings.push_back(c.string("an array string"));
    } else if (is_float_type(v.array_type)) {
      v.numbers.reserve(size_t(n));
      for (uint64_t i = 0; i < n; ++i) v.numbers.push_back(read_float(c, v.array_type));
    } else {
      v.integers.reserve(size_t(n));
      for (uint64_t i = 0; i < n; ++i) v.integers.push_back(read_integer(c, v.array_type, key));
    }
  }
  return v;
}

// The ggml types aerie reads, by id; every other id is refused naming it (ggml_type_name).
bool dtype_from_ggml(uint32_t id, DType* out) {
  switch (id) {
    case 0: *out = DType::kF32; return true;
    case 1: *out = DType::kF16; return true;
    case 2: *out = DType::kQ4_0; return true;
    case 3: *out = DType::kQ4_1; return true;
    case 6: *out = DType::kQ5_0; return true;
    case 7: *out = DType::kQ5_1; return true;
    case 8: *out = DType::kQ8_0; return true;
    case 12: *out = DType::kQ4_K; return true;
    case 13: *out = DType::kQ5_K; return true;
    case 14: *out = DType::kQ6_K; return true;
    case 24: *out = DType::kI8; return true;
    case 25: *out = DType::kI16; return true;
    case 26: *out = DType::kI32; return true;
    case 27: *out = DType::kI64; return true;
    case 28: *out = DType::kF64; return true;
    case 30: *out = DType::kBF16; return true;
    default: return false;
  }
}

struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;  // row-major (ne reversed)
  uint64_t offset, nbytes;
};

TensorInfo read_tensor_info(Cursor& c) {
  TensorInfo t;
  t.name = c.string("a tensor name");
  const auto fail = [&](const std::string& what) { c.fail(str_cat("tensor '", t.name, "': ", what)); };
  const uint32_t n_dims = c.read<uint32_t>("a tensor's dimension count");
  if (n_dims == 0 || n_dims > uint32_t(kMaxDimsGgml)) fail(str_cat(n_dims, " dimensions (1 to 4 are valid)"));
  int64_t dims[kMaxDimsGgml];
  uint64_t numel = 1;
  for (uint32_t i = 0; i < n_dims; ++i) {
    const uint64_t ne = c.read<uint64_t>("a tensor dimension");
    if (ne > (uint64_t(1) << 40)) fail(str_cat("dimension ", ne, " is too large"));
    // Checked before multiplying so a crafted shape cannot wrap around to match a small byte range.
    if (ne != 0 && numel > (uint64_t(1) << 42) / ne) fail("too many elements");
    numel *= ne;
    dims[n_dims - 1 - i] = int64_t(ne);  // ne[0] is innermost: last in row-major order
  }
  t.shape = Shape::from(dims, int(n_dims));
  const uint32_t type = c.read<uint32_t>("a tensor type");
  if (!dtype_from_ggml(type, &t.dtype))
    fail(str_cat("ggml type ", ggml_type_name(type),
                 " is not supported (aerie reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K)"));
  const int64_t block = dtype_block_elems(t.dtype);
  if (dims[n_dims - 1] % block != 0)
    fail(str_cat("rows of ", dims[n_dims - 1], " values are not whole ", dtype_name(t.dtype), " blocks of ", block));
  t.nbytes = numel / uint64_t(block) * dtype_block_bytes(t.dtype);
  t.offset = c.read<uint64_t>("a tensor offset");
  return t;
}

// llama.cpp's split naming: "<prefix>-00001-of-00003.gguf". The shard count of a name that has that form
// (its prefix in *prefix), else 0.
int split_count(const std::string& name, std::string* prefix) {
  const std::string tail = "-00000-of-00000.gguf";
  if (name.size() <= tail.size()) return 0;
  const std::string end = name.substr(name.size() - tail.size());
  for (size_t i = 0; i < tail.size(); ++i) {
    const bool digit = tail[i] == '0';
    if (digit ? !std::isdigit(static_cast<unsigned char>(end[i])) : end[i] != tail[i]) return 0;
  }
  *prefix = name.substr(0, name.size() - tail.size());
  return std::stoi(end.substr(10, 5));
}

std::vector<fs::path> split_paths(const fs::path& path) {
  std::string prefix;
  const int count = split_count(path.filename().string(), &prefix);
  if (count == 0) return {path};
  std::vector<fs::path> paths;
  for (int i = 1; i <= count; ++i) {
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, "-%05d-of-%05d.gguf", i, count);
    const fs::path shard = path.parent_path() / (prefix + suffix);
    AERIE_CHECK(fs::exists(shard), path.string(), ": split GGUF shard '", shard.filename().string(), "' is missing");
    paths.push_back(shard);
  }
  return paths;
}

}  // namespace

const char* gguf_value_type_name(GgufValueType type) {
  static const char* const kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                       "bool", "string", "array", "u64", "i64", "f64"};
  return uint32_t(type) <= uint32_t(GgufValueType::kF64) ? kNames[uint32_t(type)] : "unknown";
}

std::string ggml_type_name(uint32_t id) {
  // ggml.h's enum ggml_type; ids 4, 5 and 31-33, 36-38 belong to removed types.
  static const char* const kNames[] = {"F32",     "F16",    "Q4_0",    "Q4_1",  "",       "",      "Q5_0",  "Q5_1",
                                       "Q8_0",    "Q8_1",   "Q2_K",    "Q3_K",  "Q4_K",   "Q5_K",  "Q6_K",  "Q8_K",
                                       "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
                                       "I8",      "I16",    "I32",     "I64",   "F64",    "IQ1_M", "BF16",  "",
                                       "",        "",       "TQ1_0",   "TQ2_0", "",       "",      "",      "MXFP4"};
  if (id < std::size(kNames) && kNames[id][0] != '\0') return kNames[id];
  return str_cat("unknown (", id, ")");
}

bool GgufValue::is_integer() const { return is_int_type(type); }
bool GgufValue::is_number() const { return is_int_type(type) || is_float_type(type); }

const GgufValue* GgufMetadata::find(const std::string& key) const {
  const auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

const GgufValue& GgufMetadata::get(const std::string& key) const {
  const GgufValue* v = find(key);
  AERIE_CHECK(v != nullptr, source_, ": metadata key '", key, "' is missing");
  return *v;
}

namespace {
[[noreturn]] void wrong_type(const std::string& source, const std::string& key, const GgufValue& v,
                             const char* expected) {
  const std::string actual = v.type == GgufValueType::kArray
                                 ? str_cat("an array of ", gguf_value_type_name(v.array_type))
                                 : str_cat("a ", gguf_value_type_name(v.type));
  throw Error(str_cat(source, ": metadata key '", key, "' is ", actual, ", expected ", expected));
}
}  // namespace

std::string GgufMetadata::string(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kString) wrong_type(source_, key, v, "a string");
  return v.string;
}
std::string GgufMetadata::string(const std::string& key, const std::string& fallback) const {
  return has(key) ? string(key) : fallback;
}
int64_t GgufMetadata::integer(const std::string& key) const {
  const GgufValue& v = get(key);
  if (!v.is_integer()) wrong_type(source_, key, v, "an integer");
  return v.integer;
}
int64_t GgufMetadata::integer(const std::string& key, int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}
double GgufMetadata::number(const std::string& key) const {
  const GgufValue& v = get(key);
  if (!v.is_number()) wrong_type(source_, key, v, "a number");
  return v.number;
}
double GgufMetadata::number(const std::string& key, double fallback) const { return has(key) ? number(key) : fallback; }
bool GgufMetadata::boolean(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kBool) wrong_type(source_, key, v, "a bool");
  return v.integer != 0;
}
const std::vector<std::string>& GgufMetadata::strings(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kArray || v.array_type != GgufValueType::kString)
    wrong_type(source_, key, v, "an array of strings");
  return v.strings;
}
const std::vector<int64_t>& GgufMetadata::integers(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kArray || !is_int_type(v.array_type))
    wrong_type(source_, key, v, "an array of integers");
  return v.integers;
}
std::vector<double> GgufMetadata::numbers(const std::string& key) const {
  const GgufValue& v = get(key);
  if (v.type != GgufValueType::kArray || !(is_int_type(v.array_type) || is_float_type(v.array_type)))
    wrong_type(source_, key, v, "an array of numbers");
  if (is_float_type(v.array_type)) return v.numbers;
  return std::vector<double>(v.integers.begin(), v.integers.end());
}

uint32_t read_gguf(std::shared_ptr<MappedFile> file, GgufMetadata& metadata, WeightStore& store) {
  const std::string& path = file->path();
  Cursor c(file->data(), file->size(), path);
  if (file->size() < 4 || c.read<uint32_t>("the magic") != kMagic) c.fail("not a GGUF file (no 'GGUF' magic)");
  const uint32_t version = c.read<uint32_t>("the version");
  if (version == 0x02000000u || version == 0x03000000u) c.fail("a big-endian GGUF file (only little-endian is read)");
  if (version != 2 && version != 3) c.fail(str_cat("GGUF version ", version, " (versions 2 and 3 are read)"));
  const uint64_t n_tensors = c.read<uint64_t>("the tensor count");
  const uint64_t n_kv = c.read<uint64_t>("the metadata count");
  if (n_tensors > kMaxTensors) c.fail(str_cat(n_tensors, " tensors, more than the limit of ", kMaxTensors));
  if (n_kv > kMaxKv) c.fail(str_cat(n_kv, " metadata keys, more than the limit of ", kMaxKv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.string("a metadata key");
    if (metadata.has(key)) c.fail(str_cat("metadata key '", key, "' appears twice"));
    const GgufValueType type = read_value_type(c, key);
    metadata.set(key, read_value(c, type, key));
  }
  uint64_t alignment = kDefaultAlignment;
  if (const GgufValue* a = metadata.find("general.alignment")) {
    if (!a->is_integer() || a->integer <= 0 || a->integer > (1 << 20) || (a->integer & (a->integer - 1)) != 0)
      c.fail("general.alignment must be a power of two up to 2^20");
    alignment = uint64_t(a->integer);
  }
  std::vector<TensorInfo> infos;
  infos.reserve(size_t(std::min<uint64_t>(n_tensors, c.remaining() / 24)));
  for (uint64_t i = 0; i < n_tensors; ++i) infos.push_back(read_tensor_info(c));
  c.align_to(alignment);
  const uint64_t data_start = c.offset();
  const uint64_t data_size = file->size() - data_start;
  for (const TensorInfo& t : infos) {
    if (t.offset % alignment != 0)
      c.fail(
          str_cat("tensor '", t.name, "' data offset ", t.offset, " is not a multiple of the alignment ", alignment));
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      c.fail(str_cat("tensor '", t.name, "' data [", t.offset, ", ", t.offset + t.nbytes, ") lies outside the file's ",
                     data_size, " data bytes: truncated file"));
  }
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : infos) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& prev = *by_offset[i - 1];
    AERIE_CHECK(by_offset[i]->offset >= prev.offset + prev.nbytes || prev.nbytes == 0, path, ": tensors '", prev.name,
                "' and '", by_offset[i]->name, "' overlap");
  }
  const uint8_t* data = file->data() + data_start;
  for (const TensorInfo& t : infos) {
    const Tensor tensor{t.dtype, t.shape, data + t.offset};
    if (!dtype_is_block(t.dtype)) check_small_tensor_finite(path, t.name, tensor);
    store.add(t.name, tensor, file);
  }
  return version;
}

bool is_gguf_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

GgufModel open_gguf(const fs::path& path, const WeightLoadOptions& options) {
  AERIE_CHECK(fs::is_regular_file(path), path.string(), ": no such GGUF file");
  const std::vector<fs::path> paths = split_paths(path);
  GgufModel model;
  model.metadata = GgufMetadata(path.string());
  std::vector<GgufMetadata> shard_metadata;
  const auto reader = [&](std::shared_ptr<MappedFile> file, const fs::path&, WeightStore& store) {
    shard_metadata.emplace_back(file->path());
    model.version = read_gguf(std::move(file), shard_metadata.back(), store);
  };
  model.store = WeightStore::open_files(paths, options, reader, path.string());
  const int64_t n_split = int64_t(paths.size());
  if (n_split > 1 || shard_metadata[0].has("split.count")) {
    int64_t tensors_total = 0;
    for (int64_t i = 0; i < int64_t(shard_metadata.size()); ++i) {
      const GgufMetadata& m = shard_metadata[size_t(i)];
      AERIE_CHECK(m.integer("split.count") == n_split && m.integer("split.no") == i, m.source(),
                  ": split.no / split.count say shard ", m.integer("split.no"), " of ", m.integer("split.count"),
                  ", but the file is shard ", i, " of ", n_split, " by its name");
      tensors_total = m.integer("split.tensors.count");
    }
    AERIE_CHECK(tensors_total == int64_t(model.store.size()), path.string(), ": split.tensors.count is ", tensors_total,
                " but the ", n_split, " shards hold ", model.store.size(), " tensors");
  }
  for (const auto& [key, value] : shard_metadata[0].values())
    if (key.rfind("split.", 0) != 0) model.metadata.set(key, value);
  return model;
}

}  // namespace aerie
