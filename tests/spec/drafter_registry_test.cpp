// The drafter registry (spec/drafter_registry.h): each head kind is picked from its folder's config.json
// (or --draft mtp), each kind is built for a target it fits, and each wrong pairing is refused with an
// error naming the mismatch. The pairings use test heads whose sizes match the wrong target exactly
// (tiny_vocab16_eagle1 and deepseek_tiny_vocab are both hidden 32, vocabulary 16), so a refusal can only
// come from the rule under test.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

const fs::path kData = fs::path(AERIE_TEST_DATA_DIR);
const fs::path kModels = fs::path(AERIE_SOURCE_DIR) / "models";

// A head folder made at run time: `from`'s config.json with its architecture replaced, and its weights.
class EditedHead {
 public:
  EditedHead(const fs::path& from, const std::string& architecture)
      : dir_(fs::temp_directory_path() /
             ("aerie_drafter_registry_" + std::to_string(::getpid()) + "_" + architecture)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ifstream in(from / "config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    config["architectures"] = {architecture};
    std::ofstream(dir_ / "config.json") << config.dump(1);
    for (const char* file : {"model.safetensors", "pytorch_model.bin"})
      if (fs::exists(from / file)) fs::copy_file(from / file, dir_ / file);
  }
  ~EditedHead() { fs::remove_all(dir_); }
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
};

struct Pick {
  fs::path head;  // a folder, or "mtp"
  DrafterKind kind;
};

TEST(DrafterRegistry, EachKindIsPickedFromItsConfig) {
  const std::vector<Pick> picks = {
      {kData / "eagle" / "eagle1_bin_bias", DrafterKind::kEagle1},  // LlamaForCausalLM, EAGLE-1 tensors
      {kData / "spec" / "tiny_vocab16_eagle1", DrafterKind::kEagle1},
      {kModels / "aerie-tiny-llama-eagle1", DrafterKind::kEagle1},
      {kData / "eagle" / "eagle3_midlayer_d2t", DrafterKind::kEagle3Mha},  // LlamaForCausalLMEagle3
      {kData / "deepseek_heads" / "mha_midlayer_d2t_twolayer", DrafterKind::kEagle3Mha},
      {kModels / "aerie-tiny-llama-eagle3", DrafterKind::kEagle3Mha},
      {kData / "deepseek_heads" / "mla_qlora_yarn_layers0", DrafterKind::kEagle3Mla},  // Eagle3DeepseekV3ForCausalLM
      {kData / "deepseek_tiny_vocab_mla_head", DrafterKind::kEagle3Mla},
      {kModels / "aerie-tiny-deepseek-eagle3", DrafterKind::kEagle3Mla},
      {"mtp", DrafterKind::kMtp},
  };
  for (const Pick& p : picks)
    EXPECT_EQ(drafter_kind_name(identify_drafter(p.head)), std::string(drafter_kind_name(p.kind))) << p.head;
}

// Published EAGLE-3 heads that call themselves LlamaForCausalLM are EAGLE-3 by their tensors (midlayer.*,
// hidden_norm, d2t); EAGLE-1 tensors under the same architecture stay EAGLE-1 (the case above).
TEST(DrafterRegistry, Eagle3TensorsUnderAnEagle1ArchitectureAreEagle3) {
  const EditedHead head(kData / "eagle" / "eagle3_midlayer_d2t", "LlamaForCausalLM");
  EXPECT_EQ(identify_drafter(head.dir()), DrafterKind::kEagle3Mha);
  ThreadPool pool(1);
  const std::unique_ptr<Model> target = load_model(kData / "llama" / "bf16_gqa_rope_scaled_tied", pool);
  EXPECT_EQ(load_drafter(head.dir(), *target, pool)->describe().rfind("eagle3: ", 0), 0u);
}

struct Fit {
  fs::path head;
  fs::path target;
  const char* describe_prefix;  // of the drafter built
};

// Every kind on a target it fits, and the class the registry built for it.
TEST(DrafterRegistry, EachKindLoadsOnATargetItFits) {
  const std::vector<Fit> fits = {
      {kData / "spec" / "tiny_vocab16_eagle1", kData / "spec" / "tiny_vocab16", "eagle1: "},
      {kData / "spec" / "tiny_vocab16_eagle3", kData / "spec" / "tiny_vocab16", "eagle3: "},
      {kData / "deepseek_tiny_vocab_mha_head", kData / "deepseek_tiny_vocab", "eagle3: "},  // MHA on DeepSeek
      {kData / "deepseek_tiny_vocab_mla_head", kData / "deepseek_tiny_vocab", "eagle3-mla "},
      {"mtp", kData / "deepseek_tiny_vocab", "mtp: "},
  };
  ThreadPool pool(1);
  for (const Fit& f : fits) {
    const std::unique_ptr<Model> target = load_model(f.target, pool);
    const std::string d = load_drafter(f.head, *target, pool)->describe();
    EXPECT_EQ(d.rfind(f.describe_prefix, 0), 0u) << f.head << " on " << f.target << ": " << d;
  }
}

struct Refusal {
  const char* name;
  fs::path head;
  fs::path target;
  std::string expected;  // part of the error
};

std::string load_error(const fs::path& head, const fs::path& target_dir) {
  ThreadPool pool(1);
  const std::unique_ptr<Model> target = load_model(target_dir, pool);
  try {
    load_drafter(head, *target, pool);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded)";
}

TEST(DrafterRegistry, EachWrongPairingIsRefusedNamingTheMismatch) {
  const fs::path tiny_llama = kData / "spec" / "tiny_vocab16";    // hidden 32, vocabulary 16
  const fs::path tiny_deepseek = kData / "deepseek_tiny_vocab";  // hidden 32, vocabulary 16, one MTP layer
  const EditedHead mistral(kData / "spec" / "tiny_vocab16_eagle1", "MistralForCausalLM");
  const std::vector<Refusal> refusals = {
      {"EAGLE-1 head on a DeepSeek target", kData / "spec" / "tiny_vocab16_eagle1", tiny_deepseek,
       "config.json: an EAGLE-1 head (LlamaForCausalLM) needs a Llama target; the target is deepseek_v3 "
       "(DeepseekV3ForCausalLM)"},
      {"MLA head on a Llama target", kData / "deepseek_tiny_vocab_mla_head", tiny_llama,
       "config.json: an EAGLE-3 MLA head (Eagle3DeepseekV3ForCausalLM) needs a DeepSeek-V3 target; the target "
       "is llama (LlamaForCausalLM)"},
      {"MTP on a Llama target", "mtp", tiny_llama,
       "--draft mtp (the target's own MTP layer) needs a DeepSeek-V3 target; the target is llama (LlamaForCausalLM)"},
      {"MTP on a target without MTP layers", "mtp", kData / "deepseek" / "bf16_qproj_noyarn",
       "bf16_qproj_noyarn: the checkpoint has no MTP layer (num_nextn_predict_layers = 0), so --draft mtp cannot be "
       "used"},
      {"hidden size", kData / "eagle" / "eagle3_midlayer_d2t", kData / "llama" / "f32_mqa_unscaled_untied",
       "config.json: EAGLE-3 MHA head hidden_size 64 does not match the target's hidden_size 32 (fc reads the "
       "target's hidden states)"},
      {"hidden size, MLA", kData / "deepseek_heads" / "mla_qlora_yarn_layers0",
       kData / "deepseek" / "bf16_qproj_noyarn",
       "EAGLE-3 MLA head hidden_size 48 does not match the target's hidden_size 64"},
      {"vocabulary", kData / "deepseek_heads" / "mha_yarn_modelprefix_fcnorm",
       kData / "deepseek" / "bf16_moe_freq2_sharded",  // both hidden 48
       "config.json: EAGLE-3 MHA head vocab_size 192 does not match the target's vocab_size 256 (the head embeds "
       "and names tokens in the target's vocabulary)"},
      {"vocabulary, EAGLE-1", kData / "spec" / "tiny_vocab16_eagle1", kData / "llama" / "f32_mqa_unscaled_untied",
       "EAGLE-1 head vocab_size 16 does not match the target's vocab_size 256"},
      {"unknown head architecture", mistral.dir(), tiny_llama,
       "config.json: unknown draft head architecture 'MistralForCausalLM' (supported: LlamaForCausalLM, "
       "LlamaForCausalLMEagle (EAGLE-1 head); LlamaForCausalLMEagle3 (EAGLE-3 MHA head); "
       "Eagle3DeepseekV2ForCausalLM, Eagle3DeepseekV3ForCausalLM (EAGLE-3 MLA head); --draft mtp (MTP layer); "
       "--draft ngram (n-gram drafter); or --draft suffix (suffix drafter))"},
  };
  for (const Refusal& r : refusals) {
    const std::string e = load_error(r.head, r.target);
    EXPECT_NE(e.find(r.expected), std::string::npos) << r.name << ": " << e;
  }
  // Identification alone refuses the unknown architecture too.
  EXPECT_THROW(identify_drafter(mistral.dir()), Error);
}

}  // namespace
}  // namespace aerie
