// safetensors files (the header length, the JSON header, dtypes, shapes and offsets) as read for
// WeightStore. Every tensor the reader accepts is read end to end, so a view that strays past the file is
// an AddressSanitizer report (fuzz_support.h poisons the bytes after it).
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/safetensors.h"
#include "io/weight_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static aerie::fuzz::MemoryFile memory_file;
  const aerie::fuzz::MemoryFile::Mapping mapping = memory_file.map(data, size);
  aerie::WeightStore store;
  try {
    aerie::read_safetensors(mapping.file(), store);
  } catch (const aerie::Error&) {
    return -1;
  }
  volatile uint8_t sum = 0;
  for (const std::string& name : store.names()) sum = uint8_t(sum + aerie::fuzz::touch(store.get(name)));
  return 0;
}
