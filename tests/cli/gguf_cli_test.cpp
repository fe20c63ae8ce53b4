// `aerie generate` and `aerie tokenize --model FILE.gguf`, in process: the prompt is encoded with the
// tokenizer of the file's tokenizer.ggml.* keys, the continuation is the library's greedy one on the same
// file, and an EAGLE-3 head in the Hugging Face layout drafting for the GGUF target changes no token.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "engine/generator.h"
#include "models/registry.h"
#include "tokenizer/tokenizer_gguf.h"

namespace aerie::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const fs::path kFile = fs::path(AERIE_TEST_DATA_DIR) / "gguf" / "llama_q8_0.gguf";
const fs::path kHead = fs::path(AERIE_TEST_DATA_DIR) / "eagle" / "eagle3_midlayer_d2t";

Json generate_json(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"--model", kFile.string(), "--json", "--threads", "1", "--quiet"});
  ::testing::internal::CaptureStdout();
  const int rc = run_generate(argv);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  return Json::parse(out);
}

TEST(GgufCli, GenerateEncodesWithTheFilesTokenizerAndDecodesGreedily) {
  const Json out = generate_json({"--prompt", "hello the world", "--max-tokens", "8", "--ignore-eos"});
  const Tokenizer tok = load_model_tokenizer(kFile);
  const std::vector<int32_t> encoded = tok.encode("hello the world", true);
  const std::vector<int64_t> prompt(encoded.begin(), encoded.end());
  EXPECT_EQ(out["prompt_ids"].get<std::vector<int64_t>>(), prompt);
  ThreadPool pool(1);
  std::unique_ptr<Model> model = load_model(kFile, pool);
  GenerateOptions options;
  options.max_tokens = 8;
  const std::vector<int64_t> ids = out["ids"].get<std::vector<int64_t>>();
  EXPECT_EQ(ids, generate(*model, prompt, options).tokens);
  EXPECT_EQ(out["text"], tok.decode(std::vector<int32_t>(ids.begin(), ids.end()), true));
}

TEST(GgufCli, AnEagle3HeadDraftingForTheGgufTargetChangesNoToken) {
  const std::vector<std::string> common = {"--prompt", "hello the world", "--max-tokens", "16", "--ignore-eos"};
  std::vector<std::string> with_head = common;
  with_head.insert(with_head.end(), {"--draft", kHead.string(), "--num-speculative-tokens", "3"});
  std::vector<std::string> plain = common;
  plain.insert(plain.end(), {"--draft", "none"});
  const Json expected = generate_json(plain)["ids"];
  EXPECT_EQ(generate_json(with_head)["ids"], expected);
  // The head quantised at load while the target stays as stored (--weights would be refused for a GGUF).
  with_head.insert(with_head.end(), {"--draft-weights", "int8"});
  EXPECT_EQ(generate_json(with_head)["ids"], expected);
}

TEST(GgufCli, TokenizePrintsTheFilesIds) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_tokenize({"--model", kFile.string(), "--text", "hello the", "--ids-only"}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  std::string expected;
  for (int32_t id : load_model_tokenizer(kFile).encode("hello the", true)) {
    if (!expected.empty()) expected += ',';
    expected += std::to_string(id);
  }
  EXPECT_EQ(out, expected + "\n");
}

}  // namespace
}  // namespace aerie::cli
