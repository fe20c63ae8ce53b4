// PyTorch zip checkpoints (pytorch_model.bin): the zip reader (local headers, central directory, ZIP64),
// data.pkl through the pickle machine with torch's hooks, and storages against shapes, strides and
// offsets. Every tensor the reader accepts is read end to end (views into the file and strided copies).
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/torch_zip.h"
#include "io/weight_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static aerie::fuzz::MemoryFile memory_file;
  const aerie::fuzz::MemoryFile::Mapping mapping = memory_file.map(data, size);
  aerie::WeightStore store;
  try {
    aerie::read_torch_zip(mapping.file(), store);
  } catch (const aerie::Error&) {
    return -1;
  }
  volatile uint8_t sum = 0;
  for (const std::string& name : store.names()) {
    const aerie::Tensor& tensor = store.get(name);
    const auto* bytes = static_cast<const uint8_t*>(tensor.data);
    for (size_t i = 0; i < tensor.nbytes(); ++i) sum = uint8_t(sum + bytes[i]);
  }
  return 0;
}
