// Tensor: a non-owning, contiguous row-major view (dtype, shape, pointer). Weights are views into mmapped
// checkpoint files; activations are views into buffers owned by the caller's scratch.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dtype.h"

namespace aerie {

inline constexpr int kMaxDims = 6;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  static Shape from(const int64_t* dims, int ndim);

  int ndim() const { return ndim_; }
  int64_t operator[](int i) const { return dims_[size_t(i)]; }
  int64_t numel() const;
  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }
  std::string str() const;  // "[4096, 128]"

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

struct Tensor {
  DType dtype = DType::kF32;
  Shape shape;
  const void* data = nullptr;

  int64_t numel() const { return shape.numel(); }
  // Block types (dtype_is_block): numel / block values, whole blocks along the last dimension.
  size_t nbytes() const {
    return size_t(numel() / dtype_block_elems(dtype)) * dtype_block_bytes(dtype);
  }
  int64_t dim(int i) const { return shape[i]; }
  bool empty() const { return data == nullptr; }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data);
  }
};

}  // namespace aerie
