#include "core/tensor.h"

#include <cassert>
#include <sstream>

namespace aerie {

Shape::Shape(std::initializer_list<int64_t> dims) {
  assert(dims.size() <= size_t(kMaxDims));
  for (int64_t d : dims) dims_[size_t(ndim_++)] = d;
}

Shape Shape::from(const int64_t* dims, int ndim) {
  assert(ndim >= 0 && ndim <= kMaxDims);
  Shape shape;
  for (int i = 0; i < ndim; ++i) shape.dims_[size_t(i)] = dims[i];
  shape.ndim_ = ndim;
  return shape;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= dims_[size_t(i)];
  return n;
}

bool Shape::operator==(const Shape& other) const {
  if (ndim_ != other.ndim_) return false;
  for (int i = 0; i < ndim_; ++i)
    if (dims_[size_t(i)] != other.dims_[size_t(i)]) return false;
  return true;
}

std::string Shape::str() const {
  std::ostringstream out;
  out << '[';
  for (int i = 0; i < ndim_; ++i) out << (i ? ", " : "") << dims_[size_t(i)];
  out << ']';
  return out.str();
}

}  // namespace aerie
