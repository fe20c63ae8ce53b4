#include "core/aligned_buffer.h"

#include <sys/mman.h>

#include <cstring>
#include <new>

namespace aerie {

AlignedBuffer::AlignedBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  data_.reset(p);
}

AlignedBuffer AlignedBuffer::zeroed_on_demand(size_t bytes) {
  AlignedBuffer buffer;
  buffer.size_ = bytes;
  if (bytes == 0) return buffer;
  const size_t page = 4096;
  const size_t rounded = (bytes + page - 1) / page * page;
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  buffer.data_ = std::unique_ptr<void, Free>(p, Free{rounded});
  return buffer;
}

void AlignedBuffer::Free::operator()(void* p) const {
  if (mapped_bytes > 0) {
    munmap(p, mapped_bytes);
  } else {
    std::free(p);
  }
}

}  // namespace aerie
