// PyTorch state dicts in the zip format torch.save writes since 1.6 (pytorch_model.bin): the pickle in
// <archive>/data.pkl names, for every tensor, a storage <archive>/data/<key>, its dtype, an element offset,
// a shape and strides. Contiguous tensors are viewed in place; strided ones are copied contiguous.
#pragma once

#include <memory>

#include "io/weight_store.h"

namespace aerie {

class MappedFile;

// Adds every tensor of the state dict to `store`. Throws aerie::Error naming the file for a broken zip,
// a pickle it cannot read, a storage that is missing or too short for its tensor, or a non-tensor value.
void read_torch_zip(std::shared_ptr<MappedFile> file, WeightStore& store);

}  // namespace aerie
