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
  // Zero-filled here (every page is touched now: the caller pays the page faults up front).
  explicit AlignedBuffer(size_t bytes);
  // Zero-filled on demand: an anonymous mapping whose pages read as zero and take memory only when first
  // written, so a KV cache sized for many long sequences costs neither start-up time nor RSS until
  // sequences fill it. Page-aligned.
  static AlignedBuffer zeroed_on_demand(size_t bytes);
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
    size_t mapped_bytes;  // non-zero: an anonymous mapping of this length (zeroed_on_demand); value-initialised to 0
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> data_;
  size_t size_ = 0;
};

}  // namespace aerie
