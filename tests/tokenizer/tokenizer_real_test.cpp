// The real Llama 3.1 and DeepSeek-V3 tokenizers against ids from independent implementations
// (tests/data/tokenizer, made by tools/gen/tokenizer/make_expected.mjs), plus round trips and streaming.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace aerie {
namespace {

using Json = nlohmann::json;

std::filesystem::path tokenizer_dir() {
  const char* env = std::getenv("AERIE_TOKENIZER_DIR");
  return env ? std::filesystem::path(env) : std::filesystem::path(AERIE_SOURCE_DIR) / ".cache/tokenizers";
}

Json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  return Json::parse(in);
}

struct Corpus {
  std::vector<std::pair<std::string, std::string>> cases;  // name, text
  std::string mixed;
};

// Rebuilds the corpus, including the 1 MiB mixed text, exactly as make_expected.mjs does.
const Corpus& corpus() {
  static const Corpus kCorpus = [] {
    Corpus c;
    const Json json = read_json(std::filesystem::path(AERIE_TEST_DATA_DIR) / "tokenizer/corpus.json");
    for (const Json& item : json.at("cases")) c.cases.emplace_back(item.at("name"), item.at("text"));
    uint64_t x = std::stoull(json.at("mixed").at("seed").get<std::string>(), nullptr, 16);
    const auto min_bytes = json.at("mixed").at("min_bytes").get<size_t>();
    while (c.mixed.size() < min_bytes) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      c.mixed += c.cases[x % c.cases.size()].second;
    }
    return c;
  }();
  return kCorpus;
}

uint64_t fnv1a64(const std::vector<int32_t>& ids) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const int32_t id : ids) {
    for (int k = 0; k < 4; ++k) {
      h ^= (static_cast<uint32_t>(id) >> (8 * k)) & 0xFF;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

class RealTokenizerTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Loaded once per model for the whole suite (loading parses ~9 MB of JSON).
  static const Tokenizer& tokenizer(const std::string& model) {
    static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
    auto& slot = loaded[model];
    if (!slot) slot = std::make_unique<Tokenizer>(Tokenizer::load(tokenizer_dir() / model));
    return *slot;
  }
  void SetUp() override {
    const auto dir = tokenizer_dir() / GetParam();
    ASSERT_TRUE(std::filesystem::exists(dir / "tokenizer.json"))
        << "missing " << (dir / "tokenizer.json") << ": run tools/gen/tokenizer/fetch_tokenizers.sh "
        << "(or set AERIE_TOKENIZER_DIR to a directory with llama3_1/ and deepseek_v3/)";
    tok_ = &tokenizer(GetParam());
    expected_ = read_json(std::filesystem::path(AERIE_TEST_DATA_DIR) / "tokenizer" / (GetParam() + "_expected.json"));
  }
  const Tokenizer* tok_ = nullptr;
  Json expected_;
};

TEST_P(RealTokenizerTest, IdsMatchReference) {
  const auto& cases = corpus().cases;
  const Json& expected = expected_.at("cases");
  ASSERT_EQ(expected.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_EQ(expected[i].at("name"), cases[i].first);
    const auto ids = tok_->encode(cases[i].second, /*add_special_tokens=*/false);
    EXPECT_EQ(ids, expected[i].at("ids").get<std::vector<int32_t>>()) << "case " << cases[i].first;
  }
}

TEST_P(RealTokenizerTest, MixedMegabyteMatchesReference) {
  const std::string& text = corpus().mixed;
  ASSERT_EQ(text.size(), expected_.at("mixed").at("n_bytes").get<size_t>());
  const auto ids = tok_->encode(text, false);
  EXPECT_EQ(ids.size(), expected_.at("mixed").at("n_ids").get<size_t>());
  EXPECT_EQ(fnv1a64(ids), std::stoull(expected_.at("mixed").at("fnv1a64").get<std::string>(), nullptr, 16));
  EXPECT_EQ(tok_->decode(ids), text);
}

TEST_P(RealTokenizerTest, RoundTrip) {
  for (const auto& [name, text] : corpus().cases) {
    EXPECT_EQ(tok_->decode(tok_->encode(text, false)), text) << "case " << name;
    // With special tokens the BOS comes first; decoding spells it out.
    EXPECT_EQ(tok_->decode(tok_->encode(text, true)), tok_->config().bos_token + text) << "case " << name;
  }
}

TEST_P(RealTokenizerTest, SpecialTokensAndBos) {
  const Json& with = expected_.at("with_special_tokens");
  auto ids = tok_->encode(with.at("text").get<std::string>(), true);
  auto reference = with.at("ids").get<std::vector<int32_t>>();
  ASSERT_TRUE(tok_->bos_id().has_value());
  if (GetParam() == "deepseek_v3") {
    // transformers (Python) LlamaTokenizerFast adds BOS from add_bos_token; transformers.js does not.
    EXPECT_EQ(tok_->config().add_bos_token, std::optional<bool>(true));
    reference.insert(reference.begin(), *tok_->bos_id());
  }
  EXPECT_EQ(ids, reference);
  EXPECT_EQ(ids.front(), *tok_->bos_id());
  EXPECT_TRUE(tok_->is_special(*tok_->bos_id()));
  EXPECT_TRUE(tok_->eos_id().has_value());
  EXPECT_EQ(tok_->id_to_token(*tok_->bos_id()), tok_->config().bos_token);
  EXPECT_FALSE(tok_->config().chat_template.empty());

  // Special-token strings can be kept as plain text.
  const std::string bos_text = tok_->config().bos_token;
  EncodeOptions as_text;
  as_text.add_special_tokens = false;
  as_text.parse_special_tokens = false;
  const auto plain = tok_->encode(bos_text, as_text);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(tok_->decode(plain), bos_text);
  EXPECT_EQ(tok_->encode(bos_text, false), std::vector<int32_t>{*tok_->bos_id()});
  // skip_special_tokens drops them on decode.
  EXPECT_EQ(tok_->decode(tok_->encode(bos_text + "hi" + bos_text, false), true), "hi");
}

// Every push returns valid UTF-8, and the pushes so far plus a flush equal decode of that prefix.
void check_streaming(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special, bool every_prefix) {
  IncrementalDecoder decoder(tok, skip_special);
  std::string streamed;
  for (size_t k = 0; k < ids.size(); ++k) {
    const std::string piece = decoder.push(ids[k]);
    ASSERT_EQ(find_invalid_utf8(piece), piece.size()) << "push " << k << " returned broken UTF-8";
    streamed += piece;
    if (every_prefix) {
      IncrementalDecoder copy = decoder;
      const auto prefix = std::span<const int32_t>(ids).first(k + 1);
      ASSERT_EQ(streamed + copy.flush(), tok.decode(prefix, skip_special)) << "prefix of " << k + 1 << " ids";
    }
  }
  streamed += decoder.flush();
  EXPECT_EQ(streamed, tok.decode(ids, skip_special));
}

TEST_P(RealTokenizerTest, StreamingDecodeMatchesDecode) {
  for (const auto& [name, text] : corpus().cases) {
    SCOPED_TRACE(name);
    const auto ids = tok_->encode(text, true);
    check_streaming(*tok_, ids, false, true);
    check_streaming(*tok_, ids, true, true);
  }
  check_streaming(*tok_, tok_->encode(corpus().mixed, false), false, false);
}

TEST_P(RealTokenizerTest, StreamingRandomIdsNeverBreaksUtf8) {
  // Random ids produce arbitrary byte sequences: broken characters must become U+FFFD identically in
  // the streaming and the one-shot decoder.
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> any_id(-5, tok_->n_vocab() + 5);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int32_t> ids(1 + trial % 40);
    for (auto& id : ids) id = any_id(rng);
    check_streaming(*tok_, ids, trial % 2 == 0, true);
  }
}

TEST_P(RealTokenizerTest, InvalidUtf8IsAnError) {
  for (const std::string& bad : {std::string("abc\xFF"), std::string("\xC0\xAF"), std::string("x\xED\xA0\x80"),
                                std::string("\xF4\x90\x80\x80"), std::string("ok \xE4\xBD")}) {
    try {
      (void)tok_->encode(bad);
      ADD_FAILURE() << "no error for invalid UTF-8";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("byte offset"), std::string::npos) << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, RealTokenizerTest, ::testing::Values("llama3_1", "deepseek_v3"));

}  // namespace
}  // namespace aerie
