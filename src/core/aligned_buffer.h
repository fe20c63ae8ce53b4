// AlignedBuffer: an owned, 64-byte aligned, zero-initialised byte buffer. Non-copyable (copies are costs
// that must be visible); movable.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace aerie {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);
  AlignedBuffer(AlignedBuffer&&) noexcept = default;
  AlignedBuffer& operator=(AlignedBuffer&&) noexcept = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  size_t size() const { return size_; }
  template <typename T>
  T* as() {
    return static_cast<T*>(data_.get());
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data_.get());
  }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> data_;
  size_t size_ = 0;
};

}  // namespace aerie
