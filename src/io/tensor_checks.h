// Checks on the values of weights from untrusted files. A NaN or an infinity in a norm weight, a bias or an
// FP8 block scale turns every output of the model into NaN, and a run would then print garbage with exit
// status 0. The small tensors are cheap to scan at load, so they are (the readers call
// check_small_tensor_finite); a non-finite value in a large matrix is caught where it surfaces, in the
// logits (engine/verifier.cpp fails the request).
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace aerie {

// Tensors of at most this many elements are scanned at load: every norm weight, bias and FP8 scale_inv of
// the published Llama and DeepSeek-V3 shapes (the largest, a dense scale_inv of DeepSeek-V3, has 8064).
inline constexpr int64_t kFiniteCheckMaxElements = int64_t{1} << 16;

// The index of the first NaN or infinity of a floating-point tensor (F32, F64, BF16, F16, F8_E4M3), or -1
// when there is none or the dtype is an integer one.
int64_t first_non_finite(const Tensor& tensor);

// Throws aerie::Error "<file>: tensor '<name>' holds a non-finite value (nan) at element 3" when `tensor`
// has at most kFiniteCheckMaxElements elements and one of them is not finite.
void check_small_tensor_finite(const std::string& file, const std::string& name, const Tensor& tensor);

}  // namespace aerie
