// MappedFile: the bytes of a whole file, read-only (RAII). Either a memory mapping, viewed in place, or a
// copy read into a region of a HugePageBuffer (io/weight_memory.h); the readers see the same data() and
// size() either way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace aerie {

class HugePageBuffer;

class MappedFile {
 public:
  // Maps the file. Throws aerie::Error naming the file when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  // Reads the file with large pread()s into buffer->data() + offset, calling `on_read(bytes)` after each
  // read. The caller leaves room for `size` bytes rounded up to 4 KiB there, and a 4 KiB-aligned offset.
  // `direct`: O_DIRECT, past the page cache (see copy_bypasses_page_cache), or buffered where the file
  // system refuses it. Throws aerie::Error naming the file when it cannot be read or its size is not
  // `size` (changed since it was measured).
  static std::shared_ptr<MappedFile> read_into(const std::string& path, uint64_t size,
                                               std::shared_ptr<HugePageBuffer> buffer, size_t offset, bool direct,
                                               const std::function<void(uint64_t)>& on_read = nullptr);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // True for a mapping, false for a copy.
  bool mapped() const { return copy_owner_ == nullptr; }
  // Bytes currently resident in RAM: of a mapping, from mincore; a copy is all resident.
  uint64_t resident_bytes() const;

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size, std::shared_ptr<HugePageBuffer> owner);

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<HugePageBuffer> copy_owner_;  // set for a copy; the mapping is not ours to unmap then
};

}  // namespace aerie
