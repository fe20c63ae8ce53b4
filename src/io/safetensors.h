// safetensors: an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}}
// then the data; offsets are relative to the first byte after the header. Tensors are viewed in place.
#pragma once

#include <memory>
#include <string>

#include "io/weight_store.h"

namespace aerie {

class MappedFile;

// Adds every tensor of the mapped safetensors file to `store`. Throws aerie::Error naming the file and the
// problem for: a file shorter than its header, a header beyond LoadLimits::max_safetensors_header_bytes or
// nested deeper than JsonLimits::max_depth, a header that is not a JSON object, an unknown dtype, a rank
// beyond LoadLimits::max_tensor_rank, a shape whose element count disagrees with the byte range (or
// exceeds 2^42), offsets past the end or overlapping, and a small floating-point tensor (a norm weight, a
// bias, a block scale) holding a NaN or an infinity (io/tensor_checks.h).
void read_safetensors(std::shared_ptr<MappedFile> file, WeightStore& store);

}  // namespace aerie
