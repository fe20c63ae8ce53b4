#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/mapped_file.h"

namespace aerie {
namespace {

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

// Headers larger than this are refused rather than parsed (the real DeepSeek-V3 shards have ~100 KB).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

Entry parse_entry(const std::string& file, const std::string& name, const nlohmann::json& info) {
  auto fail = [&](const std::string& what) { throw Error(str_cat(file, ": tensor '", name, "': ", what)); };
  if (!info.is_object()) fail("entry is not an object");
  if (!info.contains("dtype") || !info["dtype"].is_string()) fail("missing dtype");
  if (!info.contains("shape") || !info["shape"].is_array()) fail("missing shape");
  if (!info.contains("data_offsets") || !info["data_offsets"].is_array() || info["data_offsets"].size() != 2)
    fail("missing data_offsets [begin, end]");
  Entry e;
  e.name = name;
  const std::string dtype = info["dtype"].get<std::string>();
  if (!dtype_from_name(dtype, &e.dtype)) fail("unknown dtype '" + dtype + "'");
  const nlohmann::json& shape = info["shape"];
  if (shape.size() > size_t(kMaxDims)) fail("more than " + std::to_string(kMaxDims) + " dimensions");
  int64_t dims[kMaxDims];
  uint64_t numel = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (!shape[i].is_number_unsigned()) fail("shape is not a list of non-negative integers");
    dims[i] = shape[i].get<int64_t>();
    if (dims[i] > (int64_t(1) << 40)) fail("dimension too large");
    // Checked before multiplying so a crafted shape cannot wrap around to match a small byte range.
    if (dims[i] != 0 && numel > (uint64_t(1) << 42) / uint64_t(dims[i])) fail("too many elements");
    numel *= uint64_t(dims[i]);
  }
  e.shape = Shape::from(dims, int(shape.size()));
  const nlohmann::json& offsets = info["data_offsets"];
  if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) fail("data_offsets are not integers");
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  if (e.end < e.begin) fail("data_offsets end before they begin");
  if (e.end - e.begin != numel * dtype_size(e.dtype))
    fail(str_cat("shape ", e.shape.str(), " of ", dtype, " needs ", numel * dtype_size(e.dtype), " bytes but data_offsets span ",
                 e.end - e.begin));
  return e;
}

}  // namespace

void read_safetensors(std::shared_ptr<MappedFile> file, WeightStore& store) {
  const std::string& path = file->path();
  const size_t size = file->size();
  AERIE_CHECK(size >= 8, path, ": truncated safetensors file (", size, " bytes, shorter than the 8-byte header length)");
  uint64_t header_len;
  std::memcpy(&header_len, file->data(), 8);
  AERIE_CHECK(header_len <= kMaxHeaderBytes, path, ": header length ", header_len, " is implausibly large");
  AERIE_CHECK(header_len <= size - 8, path, ": header length ", header_len, " runs past the end of the file (",
              size, " bytes): truncated or not a safetensors file");
  const char* header_begin = reinterpret_cast<const char*>(file->data() + 8);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_begin, header_begin + header_len);
  } catch (const nlohmann::json::exception& e) {
    throw Error(str_cat(path, ": safetensors header is not valid JSON: ", e.what()));
  }
  AERIE_CHECK(header.is_object(), path, ": safetensors header is not a JSON object");
  const uint64_t data_size = size - 8 - header_len;
  const uint8_t* data = file->data() + 8 + header_len;
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    entries.push_back(parse_entry(path, name, info));
    AERIE_CHECK(entries.back().end <= data_size, path, ": tensor '", name, "' data [", entries.back().begin, ", ",
                entries.back().end, ") lies outside the file's ", data_size, " data bytes: truncated file");
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < entries.size(); ++i) {
    const Entry& prev = entries[i - 1];
    AERIE_CHECK(entries[i].begin >= prev.end || entries[i].begin == entries[i].end || prev.begin == prev.end, path,
                ": tensors '", prev.name, "' and '", entries[i].name, "' overlap");
  }
  for (const Entry& e : entries) store.add(e.name, Tensor{e.dtype, e.shape, data + e.begin}, file);
}

}  // namespace aerie
