// Reference precision for tests that compare numbers with float32/float64 references.
//
// BF16-weight matmuls round activations to one bf16 by default (what users run: half the dot-product work
// of the split mode, and what llama.cpp and bf16 PyTorch do), which leaves ~1e-2 relative error per matmul.
// A test whose tolerances are meant to catch a wrong formula (a missing scale, a swapped RoPE half) needs
// the split mode, which matches float32 math to ~1e-5. Including this header pins the split mode for the
// whole test executable (each tests/<module>/<name>_test.cpp is its own executable); a test that checks the
// default mode against the same reference with bf16 tolerances sets it for its own scope with
// Bf16ActivationsScope.
#pragma once

#include <gtest/gtest.h>

#include "ops/ops.h"

namespace aerie::testing {

class Bf16ActivationsScope {
 public:
  explicit Bf16ActivationsScope(ops::Bf16Activations mode) : saved_(ops::bf16_activations()) {
    ops::set_bf16_activations(mode);
  }
  ~Bf16ActivationsScope() { ops::set_bf16_activations(saved_); }
  Bf16ActivationsScope(const Bf16ActivationsScope&) = delete;
  Bf16ActivationsScope& operator=(const Bf16ActivationsScope&) = delete;

 private:
  ops::Bf16Activations saved_;
};

class ReferencePrecisionEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { ops::set_bf16_activations(ops::Bf16Activations::kSplit); }
};

inline ::testing::Environment* const kReferencePrecision =
    ::testing::AddGlobalTestEnvironment(new ReferencePrecisionEnvironment);

}  // namespace aerie::testing
