// --draft as the CLI reads it (cli/draft.h): a head folder, 'mtp', 'ngram' and 'suffix' (alone, or beside a
// head with --suffix-draft) all go through the drafter registry, 'none' loads nothing, and a drafter that does not fit the target is the registry's named refusal.
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
#include "spec/suffix_head.h"
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

// --draft suffix fits any target and takes its flags; --suffix-draft puts the index beside a head; every
// misuse is refused by name.
TEST(DraftOption, SuffixLoadsAloneAndBesideAHead) {
  ThreadPool pool(1);
  const std::unique_ptr<Model> llama = load_model(kData / "spec" / "tiny_vocab16", pool);
  const std::unique_ptr<Model> deepseek = load_model(kData / "deepseek_tiny_vocab", pool);
  for (const Model* target : {llama.get(), deepseek.get()}) {
    const std::unique_ptr<Drafter> d = load("suffix", *target, pool,
                                            {"--suffix-min-match", "2", "--suffix-factor", "1.5", "--suffix-cache-tokens", "0"});
    const auto* suffix = dynamic_cast<const SuffixDrafter*>(d.get());
    ASSERT_NE(suffix, nullptr);
    EXPECT_EQ(suffix->options().min_match, 2);
    EXPECT_EQ(suffix->options().factor, 1.5);
    EXPECT_EQ(suffix->shared_index(), nullptr);
  }
  const std::unique_ptr<Drafter> beside =
      load("mtp", *deepseek, pool, {"--suffix-draft", "--suffix-head-k", "1", "--suffix-min-match", "6"});
  const auto* b = dynamic_cast<SuffixBesideHead*>(beside.get());
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->suffix().options().head_k, 1);
  EXPECT_EQ(b->suffix().options().min_match, 6);
  EXPECT_NE(beside->as_head(), nullptr);  // the tools that read a head's logits get the MTP layer
  const std::unique_ptr<Drafter> eagle = load((kData / "spec" / "tiny_vocab16_eagle3").string(), *llama, pool, {"--suffix-draft"});
  EXPECT_NE(dynamic_cast<SuffixBesideHead*>(eagle.get()), nullptr);
  const struct {
    std::string draft;
    std::vector<std::string> args;
    const char* expected;
  } refusals[] = {
      {"ngram", {"--suffix-min-match", "3"}, "--suffix-min-match needs --draft suffix or --suffix-draft beside a head"},
      {"suffix", {"--suffix-head-k", "2"}, "--suffix-head-k needs --suffix-draft (a head beside the index)"},
      {"ngram", {"--suffix-draft"}, "--suffix-draft goes beside a draft head (a head folder, a draft model or mtp), not --draft ngram"},
      {"suffix", {"--suffix-draft"}, "not --draft suffix (which is the suffix index alone)"},
      {"none", {"--suffix-draft"}, "--suffix-draft needs --draft DIR (a head, a draft model or mtp) to go beside"},
      {"suffix", {"--suffix-factor", "0"}, "--suffix-factor) must be in (0, 16], got 0"},
      {"suffix", {"--suffix-min-match", "65"}, "option --suffix-min-match must be an integer in [1, 64], got '65'"},
      {"suffix", {"--draft-layers", "0,1"}, "--draft suffix (the suffix drafter) reads no hidden state of the target"},
  };
  for (const auto& r : refusals)
    EXPECT_NE(error_of([&] { load(r.draft, *llama, pool, r.args); }).find(r.expected), std::string::npos)
        << r.draft << ": " << error_of([&] { load(r.draft, *llama, pool, r.args); });
}

}  // namespace
}  // namespace aerie::cli
