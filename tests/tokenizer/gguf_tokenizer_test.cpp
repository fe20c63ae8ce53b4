// Tokenizers rebuilt from GGUF metadata (tokenizer/tokenizer_gguf.h) against the ids of independent
// implementations (tests/data/tokenizer, as tokenizer_real_test.cpp checks tokenizer.json): the real
// Llama 3.1 and DeepSeek-V3 vocabularies converted to tokenizer.ggml.* keys by tools/gen/gguf/hf_to_gguf.py
// (--vocab-only; the ctest fixture gguf_vocab writes them into the build folder). Then the refusals: a
// model type, pre-tokenizer or token type aerie does not reproduce is a load error naming it.
#include <cstdlib>
#include <fstream>
#include <memory>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_gguf.h"

namespace aerie {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

fs::path vocab_file(const std::string& model) { return fs::path(AERIE_BINARY_DIR) / "gguf_vocab" / (model + ".gguf"); }

Json read_json(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  return Json::parse(in);
}

class GgufTokenizerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const fs::path file = vocab_file(GetParam());
    if (!fs::exists(file)) GTEST_SKIP() << file << " is missing: the ctest fixture gguf_vocab writes it";
    static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;  // ~1 s per vocabulary
    auto& slot = loaded[GetParam()];
    if (!slot) slot = std::make_unique<Tokenizer>(load_model_tokenizer(file));
    tok_ = slot.get();
  }
  const Tokenizer* tok_ = nullptr;
};

TEST_P(GgufTokenizerTest, IdsMatchReference) {
  const Json corpus = read_json(fs::path(AERIE_TEST_DATA_DIR) / "tokenizer/corpus.json");
  const Json expected = read_json(fs::path(AERIE_TEST_DATA_DIR) / "tokenizer" / (GetParam() + "_expected.json"));
  const Json& cases = corpus.at("cases");
  ASSERT_EQ(expected.at("cases").size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i].at("text");
    const auto ids = tok_->encode(text, /*add_special_tokens=*/false);
    EXPECT_EQ(ids, expected.at("cases")[i].at("ids").get<std::vector<int32_t>>()) << "case " << cases[i].at("name");
    EXPECT_EQ(tok_->decode(ids), text) << "case " << cases[i].at("name");
  }
}

// The same special tokens, BOS and chat template as the tokenizer.json folder the file was made from.
TEST_P(GgufTokenizerTest, AgreesWithTheSourceFolder) {
  const char* env = std::getenv("AERIE_TOKENIZER_DIR");
  const fs::path dir = (env ? fs::path(env) : fs::path(AERIE_SOURCE_DIR) / ".cache/tokenizers") / GetParam();
  if (!fs::exists(dir / "tokenizer.json")) GTEST_SKIP() << "no " << dir;
  const Tokenizer source = Tokenizer::load(dir);
  EXPECT_EQ(tok_->n_vocab(), source.n_vocab());
  EXPECT_EQ(tok_->bos_id(), source.bos_id());
  EXPECT_EQ(tok_->eos_id(), source.eos_id());
  EXPECT_EQ(tok_->config().chat_template, source.config().chat_template);
  for (int32_t id = 0; id < source.n_vocab(); ++id) {
    ASSERT_EQ(tok_->token_bytes(id), source.token_bytes(id)) << "id " << id;
    // llama.cpp's converter makes an added token that looks special (<｜fim▁hole｜>) a control token even
    // when tokenizer.json does not mark it special: special in the source stays special.
    if (source.is_special(id)) {
      ASSERT_TRUE(tok_->is_special(id)) << "id " << id;
    }
  }
  const std::string text = "Hello <|eot_id|> world <\xEF\xBD\x9C"
                           "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C> 12345";
  EXPECT_EQ(tok_->encode(text, true), source.encode(text, true));
}

INSTANTIATE_TEST_SUITE_P(Real, GgufTokenizerTest, ::testing::Values("llama3_1", "deepseek_v3"));

// Metadata of a three-token vocabulary, changed by one key per case.
GgufMetadata tiny_vocab() {
  GgufMetadata m("tiny.gguf");
  GgufValue model;
  model.type = GgufValueType::kString;
  model.string = "gpt2";
  m.set("tokenizer.ggml.model", model);
  GgufValue pre = model;
  pre.string = "llama-bpe";
  m.set("tokenizer.ggml.pre", pre);
  GgufValue tokens;
  tokens.type = GgufValueType::kArray;
  tokens.array_type = GgufValueType::kString;
  tokens.strings = {"a", "b", "ab", "<s>"};
  m.set("tokenizer.ggml.tokens", tokens);
  GgufValue types;
  types.type = GgufValueType::kArray;
  types.array_type = GgufValueType::kI32;
  types.integers = {1, 1, 1, 3};
  m.set("tokenizer.ggml.token_type", types);
  GgufValue merges = tokens;
  merges.strings = {"a b"};
  m.set("tokenizer.ggml.merges", merges);
  GgufValue bos;
  bos.type = GgufValueType::kU32;
  bos.integer = 3;
  m.set("tokenizer.ggml.bos_token_id", bos);
  return m;
}

std::string load_error(const GgufMetadata& m) {
  try {
    tokenizer_from_gguf(m);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GgufTokenizer, TinyVocabularyEncodesWithBos) {
  const Tokenizer t = tokenizer_from_gguf(tiny_vocab());
  EXPECT_EQ(t.encode("ab", true), (std::vector<int32_t>{3, 2}));
  EXPECT_TRUE(t.is_special(3));
}

TEST(GgufTokenizer, RefusesWhatItCannotReproduce) {
  GgufMetadata m = tiny_vocab();
  GgufValue v = m.get("tokenizer.ggml.model");
  v.string = "llama";
  m.set("tokenizer.ggml.model", v);
  EXPECT_NE(load_error(m).find("tokenizer.ggml.model 'llama' is not supported"), std::string::npos) << load_error(m);
  m = tiny_vocab();
  v.string = "qwen2";
  m.set("tokenizer.ggml.pre", v);
  EXPECT_NE(load_error(m).find("tokenizer.ggml.pre 'qwen2' is not supported (supported: llama-bpe, deepseek-v3)"),
            std::string::npos)
      << load_error(m);
  m = tiny_vocab();
  GgufValue types = m.get("tokenizer.ggml.token_type");
  types.integers = {1, 6, 1, 3};
  m.set("tokenizer.ggml.token_type", types);
  EXPECT_NE(load_error(m).find("token 1 has token type 6"), std::string::npos) << load_error(m);
  types.integers = {1, 1};
  m.set("tokenizer.ggml.token_type", types);
  EXPECT_NE(load_error(m).find("token_type has 2 entries for 4 tokens"), std::string::npos) << load_error(m);
  m = tiny_vocab();
  GgufValue bos = m.get("tokenizer.ggml.bos_token_id");
  bos.integer = 99;
  m.set("tokenizer.ggml.bos_token_id", bos);
  EXPECT_NE(load_error(m).find("bos_token_id 99 is not a token id"), std::string::npos) << load_error(m);
}

}  // namespace
}  // namespace aerie
