// ForwardScratch: the activation buffers of one forward pass, owned by the model and grown only when a
// batch is larger than any before it, so steady-state decoding allocates nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "core/aligned_buffer.h"

namespace aerie {

class ScratchBuffer {
 public:
  // At least n floats; keeps the old buffer when it is big enough (contents are not preserved on growth).
  float* reserve(int64_t n) {
    if (size_t(n) * sizeof(float) > buffer_.size()) buffer_ = AlignedBuffer(size_t(n) * sizeof(float) * 5 / 4);
    return buffer_.as<float>();
  }
  float* data() { return buffer_.as<float>(); }

 private:
  AlignedBuffer buffer_;
};

}  // namespace aerie
