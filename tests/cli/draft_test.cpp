// --draft as the CLI reads it (cli/draft.h): a head folder, 'mtp' and 'ngram' all go through the drafter
// registry, 'none' loads nothing, and a drafter that does not fit the target is the registry's named refusal.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "cli/draft.h"
#include "cli/options.h"
#include "core/error.h"
#include "models/registry.h"
#include "spec/ngram_drafter.h"
#include "error_of.h"

namespace aerie::cli {
namespace {

namespace fs = std::filesystem;

const fs::path kData = fs::path(AERIE_TEST_DATA_DIR);

std::unique_ptr<Drafter> load(const std::string& draft, const Model& target, ThreadPool& pool,
                              std::vector<std::string> more = {}) {
  more.insert(more.begin(), {"--draft", draft});
  const Args args = parse_options(Command::kGenerate, more);
  return load_draft_verbose(args, target, pool, /*quiet=*/true);
}


TEST(DraftOption, MtpAndFoldersGoThroughTheRegistry) {
  ThreadPool pool(1);
  const std::unique_ptr<Model> deepseek = load_model(kData / "deepseek_tiny_vocab", pool);
  const std::unique_ptr<Drafter> mtp = load("mtp", *deepseek, pool);
  ASSERT_NE(mtp, nullptr);
  EXPECT_EQ(mtp->describe().rfind("mtp: ", 0), 0u) << mtp->describe();
  const std::unique_ptr<Drafter> mla = load((kData / "deepseek_tiny_vocab_mla_head").string(), *deepseek, pool);
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

// --draft ngram fits any target; --ngram-min / --ngram-max read as vLLM's prompt_lookup_min / _max (one
// given sets the other), and nonsense is refused by name.
TEST(DraftOption, NgramLoadsForEveryTargetWithItsGramLengths) {
  ThreadPool pool(1);
  const std::unique_ptr<Model> llama = load_model(kData / "spec" / "tiny_vocab16", pool);
  const std::unique_ptr<Model> deepseek = load_model(kData / "deepseek_tiny_vocab", pool);
  const struct {
    std::vector<std::string> args;
    int64_t min_n, max_n;
  } cases[] = {{{}, 5, 5}, {{"--ngram-max", "3"}, 3, 3}, {{"--ngram-min", "2"}, 2, 2},
               {{"--ngram-min", "1", "--ngram-max", "4"}, 1, 4}};
  for (const Model* target : {llama.get(), deepseek.get()}) {
    for (const auto& c : cases) {
      const std::unique_ptr<Drafter> d = load("ngram", *target, pool, c.args);
      ASSERT_NE(d, nullptr);
      ASSERT_NE(d->as_token_drafter(), nullptr);
      EXPECT_EQ(d->as_head(), nullptr);
      const auto* ngram = dynamic_cast<const NgramDrafter*>(d.get());
      ASSERT_NE(ngram, nullptr);
      EXPECT_EQ(ngram->options().min_n, c.min_n);
      EXPECT_EQ(ngram->options().max_n, c.max_n);
    }
  }
  EXPECT_NE(error_of([&] { load("ngram", *llama, pool, {"--ngram-min", "4", "--ngram-max", "2"}); })
                .find("--draft ngram: the shortest n-gram matched (--ngram-min 4) exceeds the longest (--ngram-max 2)"),
            std::string::npos);
  // The range declared with the option refuses it as the command line is parsed.
  EXPECT_NE(error_of([&] { load("ngram", *llama, pool, {"--ngram-min", "0"}); })
                .find("option --ngram-min must be an integer in [1, 64], got '0'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { load("mtp", *deepseek, pool, {"--ngram-max", "3"}); }).find("--ngram-max needs --draft ngram"),
            std::string::npos);
  EXPECT_NE(error_of([&] { load("ngram", *llama, pool, {"--draft-layers", "0,1"}); })
                .find("--draft ngram (the n-gram drafter) reads no hidden state of the target; target layers cannot "
                      "be chosen"),
            std::string::npos);
}

}  // namespace
}  // namespace aerie::cli
