// Helpers shared by the fuzz targets: inputs split into parts, and fuzz bytes as a MappedFile (the file
// readers take nothing else) whose bytes past the end are poisoned for AddressSanitizer, so that a read one
// byte past the file is reported even though the mapping's last page continues.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/tensor.h"
#include "io/mapped_file.h"

extern "C" __attribute__((weak)) void __asan_poison_memory_region(const volatile void* addr, size_t size);
extern "C" __attribute__((weak)) void __asan_unpoison_memory_region(const volatile void* addr, size_t size);

namespace aerie::fuzz {

// A checksum of every byte of a tensor the reader accepted, so the reads cannot be optimised away: a view
// that strays past the file is an AddressSanitizer report.
inline uint8_t touch(const Tensor& tensor) {
  const auto* bytes = static_cast<const uint8_t*>(tensor.data);
  uint8_t sum = 0;
  for (size_t i = 0; i < tensor.nbytes(); ++i) sum = uint8_t(sum + bytes[i]);
  return sum;
}

// The text before the first NUL, and after it ("" when there is none): targets that take two inputs (a
// template and its context, a schema and a document) read them as FIRST \0 SECOND.
inline std::pair<std::string_view, std::string_view> split_at_nul(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  if (nul == std::string_view::npos) return {all, {}};
  return {all.substr(0, nul), all.substr(nul + 1)};
}

// One memfd rewritten per input and mapped through /proc/self/fd.
class MemoryFile {
 public:
  MemoryFile() : fd_(memfd_create("aerie-fuzz", 0)) {
    if (fd_ < 0) throw std::runtime_error("memfd_create failed");
  }
  ~MemoryFile() { close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  // The readers' view of `data`. Keep the Mapping alive longer than everything that holds the file.
  class Mapping {
   public:
    explicit Mapping(std::shared_ptr<MappedFile> file) : file_(std::move(file)) { poison_tail(true); }
    // The shadow must be clean before munmap: a later mapping at the same address would inherit it.
    ~Mapping() { poison_tail(false); }
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    const std::shared_ptr<MappedFile>& file() const { return file_; }

   private:
    void poison_tail(bool poison) const {
      const size_t page = size_t(sysconf(_SC_PAGESIZE));
      const size_t size = file_->size();
      if (size == 0 || size % page == 0 || !__asan_poison_memory_region) return;
      const uint8_t* end = file_->data() + size;
      const size_t tail = page - size % page;
      if (poison) __asan_poison_memory_region(end, tail);
      else __asan_unpoison_memory_region(end, tail);
    }
    std::shared_ptr<MappedFile> file_;
  };

  Mapping map(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0 || pwrite(fd_, data, size, 0) != ssize_t(size)) {
      throw std::runtime_error("cannot write the memfd");
    }
    return Mapping(std::make_shared<MappedFile>("/proc/self/fd/" + std::to_string(fd_)));
  }

 private:
  int fd_;
};

}  // namespace aerie::fuzz
