#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/limits.h"
#include "io/mapped_file.h"
#include "io/tensor_checks.h"

namespace aerie {
namespace {

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

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
  const int max_rank = std::min(kMaxDims, LoadLimits{}.max_tensor_rank);
  if (shape.size() > size_t(max_rank))
    fail(str_cat(shape.size(), " dimensions, more than ", max_rank, " (LoadLimits::max_tensor_rank)"));
  int64_t dims[kMaxDims];
  uint64_t numel = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (!shape[i].is_number_unsigned()) fail("shape is not a list of non-negative integers");
    // Read unsigned: a value above 2^63 must not turn negative and slip past the bound.
    const uint64_t dim = shape[i].get<uint64_t>();
    if (dim > (uint64_t(1) << 40)) fail(str_cat("dimension ", dim, " is too large"));
    // Checked before multiplying so a crafted shape cannot wrap around to match a small byte range.
    if (dim != 0 && numel > (uint64_t(1) << 42) / dim) fail("too many elements");
    dims[i] = int64_t(dim);
    numel *= dim;
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
  const uint64_t max_header = LoadLimits{}.max_safetensors_header_bytes;
  AERIE_CHECK(header_len <= max_header, path, ": header length ", header_len, " exceeds the limit of ", max_header,
              " bytes (LoadLimits::max_safetensors_header_bytes)");
  AERIE_CHECK(header_len <= size - 8, path, ": header length ", header_len, " runs past the end of the file (",
              size, " bytes): truncated or not a safetensors file");
  const char* header_begin = reinterpret_cast<const char*>(file->data() + 8);
  nlohmann::json header;
  // nlohmann nests without bound: a header of 100 MB of '[' would build 100 M nested arrays (GBs).
  const int max_depth = JsonLimits{}.max_depth;
  const auto limit_depth = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    AERIE_CHECK(depth <= max_depth, path, ": safetensors header nests deeper than ", max_depth,
                " levels (JsonLimits::max_depth)");
    return true;
  };
  try {
    header = nlohmann::json::parse(header_begin, header_begin + header_len, limit_depth);
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
  for (const Entry& e : entries) {
    const Tensor tensor{e.dtype, e.shape, data + e.begin};
    check_small_tensor_finite(path, e.name, tensor);
    store.add(e.name, tensor, file);
  }
}

}  // namespace aerie
