// --bf16-activations on the model-running commands: the flag sets the process-wide mode, a command's own
// default (`logits`: split) applies only when neither the flag nor AERIE_BF16_ACTIVATIONS says otherwise,
// and a bad value is a clear error.
#include <gtest/gtest.h>

#include <cstdlib>

#include "cli/common.h"
#include "cli/options.h"
#include "core/error.h"
#include "ops/ops.h"

namespace aerie::cli {
namespace {

using ops::Bf16Activations;

class Bf16ActivationsFlag : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("AERIE_BF16_ACTIVATIONS") != nullptr) GTEST_SKIP() << "AERIE_BF16_ACTIVATIONS is set";
    saved_ = ops::bf16_activations();
  }
  void TearDown() override { ops::set_bf16_activations(saved_); }
  // logits has a default of its own (split, cli/options.cpp); generate has none.
  static Args parse(const std::vector<std::string>& argv, Command command = Command::kGenerate) {
    return parse_options(command, argv);
  }
  Bf16Activations saved_ = Bf16Activations::kRounded;
};

TEST_F(Bf16ActivationsFlag, LibraryDefaultIsRounded) {
  EXPECT_EQ(saved_, Bf16Activations::kRounded);
  apply_bf16_activations(parse({"--model", "m"}));
  EXPECT_EQ(ops::bf16_activations(), Bf16Activations::kRounded);
}

TEST_F(Bf16ActivationsFlag, FlagWinsOverTheCommandDefault) {
  apply_bf16_activations(parse({"--model", "m"}, Command::kLogits));
  EXPECT_EQ(ops::bf16_activations(), Bf16Activations::kSplit);
  apply_bf16_activations(parse({"--model", "m", "--bf16-activations", "rounded"}, Command::kLogits));
  EXPECT_EQ(ops::bf16_activations(), Bf16Activations::kRounded);
  apply_bf16_activations(parse({"--bf16-activations=split"}));
  EXPECT_EQ(ops::bf16_activations(), Bf16Activations::kSplit);
}

TEST_F(Bf16ActivationsFlag, BadValueIsAClearError) {
  try {
    apply_bf16_activations(parse({"--bf16-activations", "fp8"}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--bf16-activations must be split or rounded, got fp8"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace aerie::cli
