// GGUF files (header counts, metadata of every value type, arrays, tensor infos, alignment, offsets) as
// read for `--model FILE.gguf`. Every tensor the reader accepts is read end to end, so a view that strays
// past the file is an AddressSanitizer report (fuzz_support.h poisons the bytes after it); every metadata
// value is read through the typed getters the loaders use.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/gguf.h"
#include "io/weight_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static aerie::fuzz::MemoryFile memory_file;
  const aerie::fuzz::MemoryFile::Mapping mapping = memory_file.map(data, size);
  aerie::WeightStore store;
  aerie::GgufMetadata metadata("fuzz.gguf");
  try {
    aerie::read_gguf(mapping.file(), metadata, store);
  } catch (const aerie::Error&) {
    return -1;
  }
  volatile uint8_t sum = 0;
  for (const std::string& name : store.names()) sum = uint8_t(sum + aerie::fuzz::touch(store.get(name)));
  for (const auto& [key, value] : metadata.values()) {
    try {
      sum = uint8_t(sum + metadata.string(key).size() + uint64_t(metadata.integer(key)));
    } catch (const aerie::Error&) {
    }
    try {
      sum = uint8_t(sum + metadata.numbers(key).size());
    } catch (const aerie::Error&) {
    }
  }
  return 0;
}
