// --draft as the CLI reads it (cli/draft.h): a head folder and 'mtp' both go through the drafter registry,
// 'none' loads nothing, and a drafter that does not fit the target is the registry's named refusal.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli/draft.h"
#include "core/error.h"
#include "models/registry.h"

namespace aerie::cli {
namespace {

namespace fs = std::filesystem;

const fs::path kData = fs::path(AERIE_TEST_DATA_DIR);

std::unique_ptr<DraftHead> load(const std::string& draft, const Model& target, ThreadPool& pool) {
  const Args args(std::vector<std::string>{"--draft", draft}, draft_options());
  return load_draft_verbose(args, target, pool, /*quiet=*/true);
}

TEST(DraftOption, MtpAndFoldersGoThroughTheRegistry) {
  ThreadPool pool(1);
  const std::unique_ptr<Model> deepseek = load_model(kData / "deepseek_tiny_vocab", pool);
  const std::unique_ptr<DraftHead> mtp = load("mtp", *deepseek, pool);
  ASSERT_NE(mtp, nullptr);
  EXPECT_EQ(mtp->describe().rfind("mtp: ", 0), 0u) << mtp->describe();
  const std::unique_ptr<DraftHead> mla = load((kData / "deepseek_tiny_vocab_mla_head").string(), *deepseek, pool);
  EXPECT_EQ(mla->describe().rfind("eagle3-mla ", 0), 0u) << mla->describe();
  EXPECT_EQ(load("none", *deepseek, pool), nullptr);
}

TEST(DraftOption, MtpOnALlamaTargetIsRefused) {
  ThreadPool pool(1);
  const std::unique_ptr<Model> llama = load_model(kData / "spec" / "tiny_vocab16", pool);
  try {
    load("mtp", *llama, pool);
    FAIL() << "--draft mtp loaded for a Llama target";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--draft mtp (the target's own MTP layer) needs a DeepSeek-V3 target; the "
                                         "target is llama (LlamaForCausalLM)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace aerie::cli
