// MappedFile: a read-only memory mapping of a whole file (RAII). Weights are viewed in place, never copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace aerie {

class MappedFile {
 public:
  // Throws aerie::Error naming the file when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Bytes of the mapping currently resident in RAM.
  uint64_t resident_bytes() const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace aerie
