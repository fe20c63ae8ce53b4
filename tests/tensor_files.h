// Test checkpoints written at run time: a folder's tensors read into owned bytes (to edit one and write
// them back), and a minimal safetensors writer (header padded to 8 bytes, tensors in name order).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "io/weight_store.h"

namespace aerie::testing {

struct OwnedTensor {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
using TensorMap = std::map<std::string, OwnedTensor>;

inline TensorMap read_tensors(const std::filesystem::path& dir) {
  const WeightStore store = WeightStore::open_dir(dir);
  TensorMap out;
  for (const std::string& name : store.names()) {
    const Tensor& t = store.get(name);
    OwnedTensor o{t.dtype, {}, {}};
    for (int i = 0; i < t.shape.ndim(); ++i) o.shape.push_back(t.shape[i]);
    o.bytes.assign(static_cast<const uint8_t*>(t.data), static_cast<const uint8_t*>(t.data) + t.nbytes());
    out[name] = std::move(o);
  }
  return out;
}

inline void write_safetensors(const std::filesystem::path& path, const TensorMap& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape},
                    {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8) text += ' ';
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << text;
  for (const auto& [name, t] : tensors)
    out.write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
}

}  // namespace aerie::testing
