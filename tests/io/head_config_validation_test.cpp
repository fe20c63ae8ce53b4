// An EAGLE-3 head's config.json is held to the same ranges as a target's (config_validation_test): the
// MLA head's norm, rope, YaRN and vocabulary values (io/mla_head_config.h), the YaRN rope_scaling of an
// MHA head trained for a DeepSeek target (io/eagle_config.h), and its aux layer ids. Each row edits one
// value of a shipped test head.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "io/eagle_config.h"
#include "io/mla_head_config.h"

namespace aerie {
namespace {

using nlohmann::json;

const std::filesystem::path kData = std::filesystem::path(AERIE_TEST_DATA_DIR);
const std::filesystem::path kHead = kData / "deepseek_tiny_vocab_mla_head";
const std::filesystem::path kMhaHead = kData / "deepseek_heads" / "mha_yarn_modelprefix_fcnorm";

struct Case {
  const char* pointer;
  json value;
  const char* expected;
};

std::string error_of(json j, const Case& c, bool mha) {
  j[json::json_pointer(c.pointer)] = c.value;
  try {
    if (mha) {
      parse_eagle_config(j, "head/config.json");
    } else {
      parse_mla_head_config(j, "head/config.json");
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HeadConfigValidation, MlaHead) {
  const json head = read_json_file(kHead / "config.json");
  ASSERT_NO_THROW(parse_mla_head_config(head, "head/config.json"));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Case> cases = {
      {"/rms_norm_eps", -1e-6, "'rms_norm_eps' must be a positive finite number, got -1e-06"},
      {"/rms_norm_eps", nan, "'rms_norm_eps' must be a positive finite number"},
      {"/rope_theta", 0.0, "'rope_theta' must be a finite number > 1, got 0"},
      {"/vocab_size", int64_t{1} << 30, "'vocab_size' = 1073741824 exceeds the limit of 4194304 token ids"},
      {"/rope_scaling/beta_slow", 64.0, "'rope_scaling.beta_fast' (32) must be >= 'rope_scaling.beta_slow' (64)"},
      {"/rope_scaling/mscale", -1.0, "'rope_scaling.mscale' must be a finite number >= 0, got -1"},
      {"/eagle_config/eagle_aux_hidden_state_layer_ids/0", int64_t{1} << 31,
       "'eagle_config.eagle_aux_hidden_state_layer_ids' must be a list of layer numbers >= 0, got 2147483648"},
  };
  for (const Case& c : cases) {
    const std::string error = error_of(head, c, false);
    EXPECT_NE(error.find(std::string("head/config.json: ") + c.expected), std::string::npos)
        << c.pointer << ": " << error;
  }
}

TEST(HeadConfigValidation, YarnOfAnMhaHead) {
  const json head = read_json_file(kMhaHead / "config.json");
  const EagleConfig parsed = parse_eagle_config(head, "head/config.json");
  EXPECT_TRUE(parsed.yarn.enabled);  // the YaRN rope_scaling is the head's, not llama3 scaling
  EXPECT_EQ(parsed.yarn.factor, 4.0);
  EXPECT_EQ(parsed.yarn.original_max_position_embeddings, 64);
  EXPECT_FALSE(parsed.llama.rope_scaling.enabled);
  const std::vector<Case> cases = {
      {"/rope_scaling/attention_factor", -0.5, "'rope_scaling.attention_factor' must be a finite number >= 0"},
      {"/rope_scaling/beta_fast", 0.5, "'rope_scaling.beta_fast' (0.5) must be >= 'rope_scaling.beta_slow' (1)"},
      {"/rope_scaling/factor", 0.5, "'rope_scaling.factor' must be >= 1"},
  };
  for (const Case& c : cases) {
    const std::string error = error_of(head, c, true);
    EXPECT_NE(error.find(std::string("head/config.json: ") + c.expected), std::string::npos)
        << c.pointer << ": " << error;
  }
}

}  // namespace
}  // namespace aerie
