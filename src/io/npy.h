// .npy writer (NumPy format 1.0, little-endian float32, C order): what `aerie logits` writes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace aerie {

void write_npy_f32(const std::filesystem::path& path, const float* data, const std::vector<int64_t>& shape);
// Reads a float32 or float64 .npy (C order) into floats; used by tests against goldens.
std::vector<float> read_npy_f32(const std::filesystem::path& path, std::vector<int64_t>* shape);

}  // namespace aerie
