// `aerie generate` and `aerie tokenize` with text and chat prompts, run in-process on a small checkpoint
// with a byte-level BPE tokenizer written by the test: the CLI's prompt ids, continuation and text must
// equal what the library gives for the same input, and bad prompt input must be a clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/prompt.h"
#include "core/error.h"
#include "engine/generator.h"
#include "models/registry.h"
#include "tokenizer/tokenizer.h"

namespace aerie::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// The byte-level alphabet's character for printable ASCII is the byte itself, except space (U+0120 'Ġ').
std::string byte_char(unsigned char b) {
  if (b == ' ') return "\xC4\xA0";
  if (b == '\n') return "\xC4\x8A";
  return std::string(1, char(b));
}

Json tokenizer_json() {
  Json vocab = Json::object();
  int id = 5;
  for (int b = 0x20; b < 0x7f; ++b) vocab[byte_char((unsigned char)b)] = id++;
  vocab[byte_char('\n')] = id++;
  for (const char* merged : {"he", "ll", "hell", "hello", "\xC4\xA0t", "\xC4\xA0th"}) vocab[merged] = id++;
  const Json merges = {"h e", "l l", "he ll", "hell o", "\xC4\xA0 t", "\xC4\xA0t h"};
  auto special = [](int i, const char* s) {
    return Json{{"id", i}, {"content", s}, {"special", true}, {"normalized", false}, {"lstrip", false},
                {"rstrip", false}, {"single_word", false}};
  };
  return {
      {"version", "1.0"},
      {"added_tokens", {special(1, "<|begin_of_text|>"), special(2, "<|eot_id|>"), special(3, "<|start_header_id|>"),
                        special(4, "<|end_header_id|>")}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens",
         {{"<|begin_of_text|>", {{"id", "<|begin_of_text|>"}, {"ids", {1}}, {"tokens", {"<|begin_of_text|>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
  };
}

// A Llama-3-shaped template (system optional, generation prompt).
constexpr const char* kTemplate =
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

class GenerateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("aerie_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const fs::path source = fs::path(AERIE_TEST_DATA_DIR) / "llama" / "bf16_gqa_rope_scaled_tied";
    for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(source / f, dir_ / f);
    write_file(dir_ / "tokenizer.json", tokenizer_json().dump());
    const Json config = {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}, {"chat_template", kTemplate}};
    write_file(dir_ / "tokenizer_config.json", config.dump());
    write_file(dir_ / "generation_config.json", Json{{"eos_token_id", {2, 7}}, {"temperature", 0.6}}.dump());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `aerie generate --json` and returns its JSON.
  Json generate_json(std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"--model", dir_.string(), "--json", "--threads", "1", "--quiet"});
    ::testing::internal::CaptureStdout();
    const int rc = run_generate(argv);
    const std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(rc, 0);
    return Json::parse(out);
  }

  std::vector<int64_t> library_greedy(const std::vector<int64_t>& prompt, int64_t max_tokens) {
    ThreadPool pool(1);
    std::unique_ptr<Model> model = load_model(dir_, pool);
    GenerateOptions options;
    options.max_tokens = max_tokens;
    return generate(*model, prompt, options).tokens;
  }

  fs::path dir_;
};

std::vector<int64_t> widen(const std::vector<int32_t>& ids) { return {ids.begin(), ids.end()}; }

TEST_F(GenerateCli, TextPromptIsEncodedAndTheOutputDecoded) {
  const Json out = generate_json({"--prompt", "hello the world", "--max-tokens", "6", "--ignore-eos"});
  const Tokenizer tok = Tokenizer::load(dir_);
  const std::vector<int64_t> prompt = widen(tok.encode("hello the world", true));
  ASSERT_EQ(prompt.front(), 1);  // BOS from the post-processor
  EXPECT_EQ(out["prompt_ids"].get<std::vector<int64_t>>(), prompt);
  const std::vector<int64_t> ids = out["ids"].get<std::vector<int64_t>>();
  EXPECT_EQ(ids, library_greedy(prompt, 6));
  EXPECT_EQ(out["text"], tok.decode(std::vector<int32_t>(ids.begin(), ids.end()), true));
}

TEST_F(GenerateCli, ChatPromptIsRenderedWithTheTemplateAndOneBos) {
  const Json out = generate_json({"--chat", "--system", "Be brief. ", "--prompt", "hello", "--max-tokens", "3"});
  const std::string expected =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(out["prompt_text"], expected);
  const Tokenizer tok = Tokenizer::load(dir_);
  const std::vector<int64_t> prompt = out["prompt_ids"].get<std::vector<int64_t>>();
  EXPECT_EQ(prompt, widen(tok.encode(expected, false)));
  EXPECT_EQ(std::count(prompt.begin(), prompt.end(), 1), 1);
  EXPECT_EQ(prompt[1], 3);  // <|start_header_id|> parsed as the special token
}

TEST_F(GenerateCli, MessagesFileWithToolsEqualsInlineChat) {
  write_file(dir_ / "conv.json",
             Json{{"messages", {{{"role", "system"}, {"content", "Be brief. "}}, {{"role", "user"}, {"content", "hello"}}}},
                  {"tools", Json::array()}}
                 .dump());
  const Json from_file = generate_json({"--messages", (dir_ / "conv.json").string(), "--max-tokens", "2"});
  const Json inline_chat = generate_json({"--chat", "--system", "Be brief. ", "--prompt", "hello", "--max-tokens", "2"});
  EXPECT_EQ(from_file["prompt_ids"], inline_chat["prompt_ids"]);
  EXPECT_EQ(from_file["ids"], inline_chat["ids"]);
}

TEST_F(GenerateCli, StopIdsJoinConfigAndGenerationConfig) {
  EXPECT_EQ(stop_token_ids(dir_, {2}), (std::vector<int64_t>{2, 7}));
  fs::remove(dir_ / "generation_config.json");
  EXPECT_EQ(stop_token_ids(dir_, {2}), (std::vector<int64_t>{2}));
  write_file(dir_ / "generation_config.json", R"({"eos_token_id": "two"})");
  try {
    stop_token_ids(dir_, {2});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("eos_token_id"), std::string::npos) << e.what();
  }
}

void expect_error(GenerateCli& t, const std::vector<std::string>& argv, const std::string& needle) {
  try {
    run_generate(argv);
    FAIL() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  (void)t;
}

TEST_F(GenerateCli, BadPromptInputIsAClearError) {
  const std::string d = dir_.string();
  write_file(dir_ / "broken.json", "[{\"role\": \"user\", \"content\": ");
  write_file(dir_ / "norole.json", R"([{"content": "hi"}])");
  expect_error(*this, {"--model", d, "--messages", (dir_ / "broken.json").string()}, "broken.json: not valid JSON");
  expect_error(*this, {"--model", d, "--messages", (dir_ / "norole.json").string()}, "message 0 has no string 'role'");
  expect_error(*this, {"--model", d, "--ids", "1,2", "--chat"}, "--chat takes text");
  expect_error(*this, {"--model", d, "--ids", "1,2", "--prompt", "x"}, "exactly one prompt");
  expect_error(*this, {"--model", d, "--prompt", "x", "--chat-kwargs", "[1]", "--chat"}, "must be a JSON object");
  expect_error(*this, {"--model", d, "--prompt", "\xff"}, "UTF-8");
  fs::remove(dir_ / "tokenizer.json");
  expect_error(*this, {"--model", d, "--prompt", "hello"}, "has no tokenizer.json");
}

TEST_F(GenerateCli, TokenizePrintsTheIds) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_tokenize({"--model", dir_.string(), "--text", "hello the", "--ids-only"}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  const Tokenizer tok = Tokenizer::load(dir_);
  std::string expected;
  for (int32_t id : tok.encode("hello the", true)) {
    if (!expected.empty()) expected += ',';
    expected += std::to_string(id);
  }
  EXPECT_EQ(out, expected + "\n");
}

}  // namespace
}  // namespace aerie::cli
