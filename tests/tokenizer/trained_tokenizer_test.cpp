// The tokenizer aerie ships with its trained models (models/aerie-tiny-llama, trained by
// tools/gen/trained/train_tokenizer.py) against ids from independent implementations
// (tests/data/trained/tokenizer_expected.json, made by tools/gen/trained/make_tokenizer_expected.mjs with
// transformers.js): held-out validation text and prompts, exact round trips, streaming decode.
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const fs::path kModel = fs::path(AERIE_SOURCE_DIR) / "models/aerie-tiny-llama";
const fs::path kData = fs::path(AERIE_TEST_DATA_DIR) / "trained";

Json read_json(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  return Json::parse(in);
}

// name -> text of a list of {"name", "text"} records.
std::map<std::string, std::string> texts(const Json& records) {
  std::map<std::string, std::string> out;
  for (const Json& r : records) out[r.at("name")] = r.at("text");
  return out;
}

class TrainedTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tok_ = new Tokenizer(Tokenizer::load(kModel));
    expected_ = new Json(read_json(kData / "tokenizer_expected.json"));
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete expected_;
  }
  static const Tokenizer* tok_;
  static const Json* expected_;
};
const Tokenizer* TrainedTokenizerTest::tok_ = nullptr;
const Json* TrainedTokenizerTest::expected_ = nullptr;

TEST_F(TrainedTokenizerTest, VocabularyAndSpecialTokens) {
  // 6128 BPE tokens (256 bytes + 5872 merges), then 16 special tokens in Llama 3's order.
  EXPECT_EQ(tok_->n_vocab(), 6144);
  ASSERT_EQ(tok_->bos_id(), std::optional<int32_t>(6128));
  ASSERT_EQ(tok_->eos_id(), std::optional<int32_t>(6129));
  EXPECT_EQ(tok_->id_to_token(6128), "<|begin_of_text|>");
  EXPECT_EQ(tok_->id_to_token(6129), "<|end_of_text|>");
  EXPECT_EQ(tok_->token_to_id("<|eot_id|>"), std::optional<int32_t>(6137));
  for (int32_t id = 6128; id < 6144; ++id) EXPECT_TRUE(tok_->is_special(id)) << id;
  EXPECT_EQ(tok_->id_to_token(0), "!");  // GPT-2 byte order, as Llama 3
  EXPECT_EQ(tok_->token_bytes(220), " ");
}

TEST_F(TrainedTokenizerTest, ValidationSampleMatchesReferenceAndRoundTrips) {
  const auto sample = texts(read_json(kData / "validation_sample.json"));
  const Json& cases = expected_->at("validation_sample");
  ASSERT_EQ(cases.size(), sample.size());
  size_t n_ids = 0;
  for (const Json& c : cases) {
    const std::string& text = sample.at(c.at("name"));
    const auto ids = tok_->encode(text, /*add_special_tokens=*/false);
    EXPECT_EQ(ids, c.at("ids").get<std::vector<int32_t>>()) << c.at("name");
    EXPECT_EQ(tok_->decode(ids), text) << c.at("name");
    n_ids += ids.size();
  }
  EXPECT_GT(n_ids, 10000u);
}

TEST_F(TrainedTokenizerTest, PromptsWithBosMatchReference) {
  const auto prompts = texts(read_json(kData / "prompts.json"));
  const Json& cases = expected_->at("prompts");
  ASSERT_EQ(cases.size(), 64u);
  for (const Json& c : cases) {
    const std::string& text = prompts.at(c.at("name"));
    const auto ids = tok_->encode(text, /*add_special_tokens=*/true);
    EXPECT_EQ(ids, c.at("ids").get<std::vector<int32_t>>()) << c.at("name");
    EXPECT_EQ(ids.front(), *tok_->bos_id());
    EXPECT_EQ(tok_->decode(ids, /*skip_special_tokens=*/true), text) << c.at("name");
  }
}

TEST_F(TrainedTokenizerTest, EdgeCasesMatchReference) {
  for (const Json& c : expected_->at("edge_cases")) {
    const std::string text = c.at("text");
    const auto ids = tok_->encode(text, false);
    EXPECT_EQ(ids, c.at("ids").get<std::vector<int32_t>>()) << c.at("name");
    EXPECT_EQ(tok_->decode(ids), text) << c.at("name");
  }
}

TEST_F(TrainedTokenizerTest, StreamingDecodeEqualsDecode) {
  for (const Json& c : expected_->at("validation_sample")) {
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    IncrementalDecoder decoder(*tok_, false);
    std::string streamed;
    for (const int32_t id : ids) streamed += decoder.push(id);
    streamed += decoder.flush();
    EXPECT_EQ(streamed, tok_->decode(ids)) << c.at("name");
  }
}

}  // namespace
}  // namespace aerie
