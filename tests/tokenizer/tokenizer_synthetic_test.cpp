// Hand-checkable tokenizers built in the test: BPE merge order, both merge spellings, ignore_merges,
// added-token flags, the template, pre-tokenizer behaviours and the load-time errors.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/limits.h"
#include "tokenizer/pre_tokenizer.h"
#include "io/regex.h"
#include "tokenizer/tokenizer.h"

namespace aerie {
namespace {

using Json = nlohmann::json;
using Ids = std::vector<int32_t>;

// A byte-level BPE over a few letters. Merges, by rank: (a, b), (ab, c), (Ġ, a).
Json tiny_tokenizer(bool pair_array_merges = false) {
  Json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"Ġ", 3}, {"ab", 4}, {"abc", 5}, {"Ġa", 6}, {"ca", 7},
                {"<", 12},  {"s", 13}, {">", 14}, {"w", 15}, {"d", 16}, {"x", 17}, {"y", 18}};
  Json merges = pair_array_merges ? Json::array({{"a", "b"}, {"ab", "c"}, {"Ġ", "a"}})
                                  : Json::array({"a b", "ab c", "Ġ a"});
  return {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 9}, {"content", "<s>"}, {"special", true}, {"normalized", false}},
        {{"id", 10}, {"content", "[X]"}, {"special", false}, {"lstrip", true}, {"rstrip", true}},
        {{"id", 11}, {"content", "wd"}, {"special", false}, {"single_word", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {9}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
  };
}

Tokenizer make(const Json& json) { return Tokenizer::from_json(json.dump()); }

TEST(TinyBpe, MergesInRankOrder) {
  const Tokenizer tok = make(tiny_tokenizer());
  // "abc" -> a b c -> ab c -> abc;  " ab" -> Ġ a b: (a, b) outranks (Ġ, a), then (Ġ, ab) is no merge.
  EXPECT_EQ(tok.encode("abc ab", false), (Ids{5, 3, 4}));
  EXPECT_EQ(tok.encode(" a", false), (Ids{6}));
  EXPECT_EQ(tok.encode("abc ab", true), (Ids{9, 5, 3, 4}));
  EXPECT_EQ(tok.decode(Ids{9, 5, 3, 4}), "<s>abc ab");
  EXPECT_EQ(tok.decode(Ids{9, 5, 3, 4}, /*skip_special_tokens=*/true), "abc ab");
  EXPECT_EQ(tok.n_vocab(), 19);
  EXPECT_EQ(tok.token_to_id("Ġa"), std::optional<int32_t>(6));
  EXPECT_EQ(tok.id_to_token(10), "[X]");
  EXPECT_EQ(tok.token_bytes(6), " a");
}

TEST(TinyBpe, PairArrayMergesEqualStringMerges) {
  const Tokenizer strings = make(tiny_tokenizer(false));
  const Tokenizer pairs = make(tiny_tokenizer(true));
  for (const std::string text : {"abc ab", "aabbcc abcabc", " a b c", "cab"}) {
    EXPECT_EQ(strings.encode(text), pairs.encode(text)) << text;
  }
}

TEST(TinyBpe, IgnoreMergesTakesWholeVocabEntries) {
  Json json = tiny_tokenizer();
  EXPECT_EQ(make(json).encode("ca", false), (Ids{2, 0}));  // no merge (c, a)
  json["model"]["ignore_merges"] = true;
  EXPECT_EQ(make(json).encode("ca", false), (Ids{7}));
}

TEST(TinyBpe, BytesMissingFromVocabAreDropped) {
  // No unk token: Hugging Face tokenizers drops such symbols, and their neighbours then merge.
  EXPECT_EQ(make(tiny_tokenizer()).encode("aqb", false), (Ids{4}));
}

TEST(TinyBpe, AddedTokenFlags) {
  const Tokenizer tok = make(tiny_tokenizer());
  EXPECT_EQ(tok.encode("a<s>b", false), (Ids{0, 9, 1}));
  // lstrip and rstrip swallow the spaces around [X].
  EXPECT_EQ(tok.encode("a  [X]  b", false), (Ids{0, 10, 1}));
  // single_word: only between non-word characters.
  EXPECT_EQ(tok.encode("x wd y", false), (Ids{17, 3, 11, 3, 18}));
  EXPECT_EQ(tok.encode("xwd", false), (Ids{17, 15, 16}));
  EXPECT_EQ(tok.encode("wd", false), (Ids{11}));
  // Special tokens as plain text.
  EncodeOptions options;
  options.add_special_tokens = false;
  options.parse_special_tokens = false;
  EXPECT_EQ(tok.encode("<s>", options), (Ids{12, 13, 14}));
  EXPECT_TRUE(tok.is_special(9));
  EXPECT_FALSE(tok.is_special(10));
  EXPECT_TRUE(tok.is_added(10));
}

TEST(TinyBpe, PrefixSpace) {
  Json json = tiny_tokenizer();
  json["pre_tokenizer"]["add_prefix_space"] = true;
  EXPECT_EQ(make(json).encode("ab", false), (Ids{3, 4}));
  json["pre_tokenizer"]["use_regex"] = false;
  EXPECT_EQ(make(json).encode("ab", false), (Ids{3, 4}));
}

TEST(TinyBpe, ConfigOverridesTemplateForLlamaTokenizerFast) {
  const Json config = {{"tokenizer_class", "LlamaTokenizerFast"}, {"add_bos_token", false},
                       {"add_eos_token", true}, {"bos_token", "<s>"}, {"eos_token", {{"content", "[X]"}}}};
  const Tokenizer tok = Tokenizer::from_json(tiny_tokenizer().dump(), config.dump());
  EXPECT_EQ(tok.encode("ab"), (Ids{4, 10}));
  EXPECT_EQ(tok.bos_id(), std::optional<int32_t>(9));
  EXPECT_EQ(tok.eos_id(), std::optional<int32_t>(10));
  EXPECT_EQ(tok.config().eos_token, "[X]");
}

std::vector<std::string> split(const Json& config, std::string_view text) {
  const PreTokenizer pre = PreTokenizer::from_json(config);
  PreTokenizer::Scratch scratch;
  std::vector<std::string_view> pieces;
  pre.split(text, scratch, pieces);
  return {pieces.begin(), pieces.end()};
}

Json split_config(const Json& pattern, const char* behavior, bool invert = false) {
  return {{"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", invert}};
}

TEST(PreTokenizer, SplitBehaviours) {
  using V = std::vector<std::string>;
  const Json space = {{"String", " "}};
  const std::string text = "How are you doing?";
  EXPECT_EQ(split(split_config(space, "Removed"), text), (V{"How", "are", "you", "doing?"}));
  EXPECT_EQ(split(split_config(space, "Isolated"), text), (V{"How", " ", "are", " ", "you", " ", "doing?"}));
  EXPECT_EQ(split(split_config(space, "MergedWithPrevious"), text), (V{"How ", "are ", "you ", "doing?"}));
  EXPECT_EQ(split(split_config(space, "MergedWithNext"), text), (V{"How", " are", " you", " doing?"}));
  const Json dash = {{"String", "-"}};
  EXPECT_EQ(split(split_config(dash, "Contiguous"), "The-final--countdown"), (V{"The", "-", "final", "--", "countdown"}));
  // invert: the pattern describes the pieces to keep.
  EXPECT_EQ(split(split_config({{"Regex", "\\p{L}+"}}, "Removed", true), "ab, cd!"), (V{"ab", "cd"}));
  EXPECT_EQ(split(split_config({{"Regex", "\\d"}}, "Isolated"), "a12b"), (V{"a", "1", "2", "b"}));
}

TEST(PreTokenizer, DigitsAndSequence) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split({{"type", "Digits"}, {"individual_digits", true}}, "a123b"), (V{"a", "1", "2", "3", "b"}));
  EXPECT_EQ(split({{"type", "Digits"}, {"individual_digits", false}}, "a123b"), (V{"a", "123", "b"}));
  const Json sequence = {{"type", "Sequence"},
                         {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", false}},
                                            split_config({{"String", " "}}, "Removed")}}};
  EXPECT_EQ(split(sequence, "ab 12cd 3"), (V{"ab", "12", "cd", "3"}));
}

TEST(PreTokenizer, LookaheadStaysInsideThePiece) {
  using V = std::vector<std::string>;
  // `\s+(?!\S)` must not see past the end of the piece it runs on.
  const Json sequence = {{"type", "Sequence"},
                         {"pretokenizers", {split_config({{"String", "|"}}, "Removed"),
                                            split_config({{"Regex", "\\s+(?!\\S)|\\s+|\\S+"}}, "Isolated")}}};
  EXPECT_EQ(split(sequence, "a   |b"), (V{"a", "   ", "b"}));
  EXPECT_EQ(split(split_config({{"Regex", "\\s+(?!\\S)|\\s+|\\S+"}}, "Isolated"), "a   b"), (V{"a", "  ", " ", "b"}));
}

// A Split pattern that backtracks catastrophically (`a*a*a*b` tries every split of a run of a's at every
// start: cubic per call, quartic per encode) took 46 s on 4000 characters. Matching runs under a budget
// sized by the input, so the encode fails in well under a second with an error naming the pattern.
TEST(Regex, CatastrophicBacktrackingIsAnErrorNotAHang) {
  Json json = tiny_tokenizer();
  json["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers",
                            {split_config({{"Regex", "a*a*a*b|."}}, "Isolated"),
                             {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  const Tokenizer tok = make(json);
  EXPECT_EQ(tok.encode("aab", false), (Ids{0, 4}));  // one piece "aab": ordinary inputs still work
  const auto start = std::chrono::steady_clock::now();
  try {
    (void)tok.encode(std::string(4000, 'a'), false);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/a*a*a*b|./"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("matching budget"), std::string::npos) << e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);
  std::printf("a*a*a*b|. on 4000 a's: refused after %.3f s\n", seconds);
  // The budget is per encode: the next call starts afresh.
  EXPECT_EQ(tok.encode("ab", false), (Ids{4}));
}

// Long benign inputs that real patterns backtrack over (a megabyte run of spaces under `\s+(?!\S)`) stay
// within the budget.
TEST(Regex, LongRunsOfRealPatternsStayWithinTheBudget) {
  const std::string text = "a" + std::string(1 << 20, ' ') + "b";
  const std::vector<std::string> pieces = split(split_config({{"Regex", "\\s+(?!\\S)|\\s+|\\S+"}}, "Isolated"), text);
  EXPECT_EQ(pieces.size(), 4u);
}

TEST(Regex, WhitespaceFollowsUnicodeWhiteSpace) {
  const Regex space("\\s");
  const Regex not_space("[^\\s]");
  Regex::Matcher matcher;
  size_t begin = 0, end = 0;
  EXPECT_TRUE(matcher.find(space, "\xC2\x85", 0, &begin, &end));        // U+0085 NEL is White_Space
  EXPECT_TRUE(matcher.find(space, "\xE3\x80\x80", 0, &begin, &end));    // U+3000
  EXPECT_FALSE(matcher.find(space, "\xE1\xA0\x8E", 0, &begin, &end));   // U+180E is not (since Unicode 6.3)
  EXPECT_TRUE(matcher.find(not_space, "\xE1\xA0\x8E", 0, &begin, &end));
  EXPECT_FALSE(matcher.find(not_space, " \t\n", 0, &begin, &end));
}

// Asserts that loading `json` fails with a message containing `needle`.
void expect_load_error(const std::string& json, const std::string& needle) {
  try {
    (void)Tokenizer::from_json(json);
    ADD_FAILURE() << "loaded without error; expected: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(LoadErrors, AreClear) {
  const std::string good = tiny_tokenizer().dump();
  expect_load_error(good.substr(0, good.size() / 2), "not valid JSON");
  expect_load_error("[1, 2]", "must be a JSON object");
  Json json = tiny_tokenizer();
  json.erase("model");
  expect_load_error(json.dump(), "lacks the 'model'");

  json = tiny_tokenizer();
  json["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}};
  expect_load_error(json.dump(), "unsupported pre_tokenizer type 'Metaspace'");
  json["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Whitespace"}}}}};
  expect_load_error(json.dump(), "unsupported pre_tokenizer type 'Whitespace'");
  json["pre_tokenizer"] = split_config({{"Regex", "(unclosed"}}, "Isolated");
  expect_load_error(json.dump(), "does not compile");
  json["pre_tokenizer"] = split_config({{"Regex", "a"}}, "Sideways");
  expect_load_error(json.dump(), "unknown Split behavior 'Sideways'");

  json = tiny_tokenizer();
  json["model"] = {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}, {"unk_token", "[UNK]"}};
  expect_load_error(json.dump(), "unsupported model type 'WordPiece'");
  json["model"] = {{"type", "Unigram"}, {"vocab", Json::array()}};
  expect_load_error(json.dump(), "unsupported model type 'Unigram'");

  json = tiny_tokenizer();
  json["model"]["merges"] = {"a q"};
  expect_load_error(json.dump(), "model.merges[0] (\"a\", \"q\") uses a token that is not in model.vocab");
  json["model"]["merges"] = {"b c"};
  expect_load_error(json.dump(), "yields \"bc\"");
  json["model"]["merges"] = {"abc"};
  expect_load_error(json.dump(), "not two tokens");
  json["model"]["merges"] = {{"a"}};
  expect_load_error(json.dump(), "must be \"a b\" or [\"a\", \"b\"]");

  json = tiny_tokenizer();
  json["normalizer"] = {{"type", "NFKC"}};
  expect_load_error(json.dump(), "unsupported normalizer type 'NFKC'");
  json = tiny_tokenizer();
  json["decoder"] = {{"type", "WordPiece"}};
  expect_load_error(json.dump(), "unsupported decoder type 'WordPiece'");
  json = tiny_tokenizer();
  json["post_processor"] = {{"type", "BertProcessing"}};
  expect_load_error(json.dump(), "unsupported post_processor type 'BertProcessing'");

  EXPECT_THROW((void)Tokenizer::load("/nonexistent/dir"), Error);
}

// Issue 17: ids size id-indexed tables, so an absurd one (2^31 - 1 asked for 8 GB) is a load error
// naming the field, as are negative, shared and non-integer ids.
TEST(LoadErrors, TokenIdsAreChecked) {
  struct Case {
    const char* what;
    std::function<void(Json&)> damage;
    const char* expected_part;
  };
  const Case cases[] = {
      {"huge added id", [](Json& j) { j["added_tokens"][1]["id"] = 2147483647; },
       "added_tokens[1] \"[X]\" has id 2147483647, implausible"},
      {"added id past int32", [](Json& j) { j["added_tokens"][1]["id"] = int64_t{1} << 40; }, "implausible"},
      {"added id past int64", [](Json& j) { j["added_tokens"][1]["id"] = uint64_t{1} << 63; }, "implausible"},
      {"negative added id", [](Json& j) { j["added_tokens"][1]["id"] = -5; }, "added_tokens[1] \"[X]\" has a negative id"},
      {"string added id", [](Json& j) { j["added_tokens"][1]["id"] = "10"; }, "added_tokens[1] \"[X]\" has a non-integer id"},
      {"added id of another vocab token", [](Json& j) { j["added_tokens"][1]["id"] = 0; },
       "added_tokens[1] \"[X]\" has id 0, which model.vocab gives to \"a\""},
      {"added id used twice", [](Json& j) { j["added_tokens"][1]["id"] = 9; }, "added token id 9 is used twice"},
      {"huge vocab id", [](Json& j) { j["model"]["vocab"]["y"] = 2147483647; },
       "model.vocab \"y\" has id 2147483647, implausible"},
      {"negative vocab id", [](Json& j) { j["model"]["vocab"]["y"] = -1; }, "model.vocab \"y\" has a negative id"},
      {"float vocab id", [](Json& j) { j["model"]["vocab"]["y"] = 1.5; }, "model.vocab \"y\" has a non-integer id"},
      {"shared vocab id", [](Json& j) { j["model"]["vocab"]["y"] = 17; }, "share id 17"},
      {"huge template id", [](Json& j) { j["post_processor"]["special_tokens"]["<s>"]["ids"] = {2147483647}; },
       "post_processor special_tokens '<s>' has id 2147483647, implausible"},
      {"string template id", [](Json& j) { j["post_processor"]["special_tokens"]["<s>"]["ids"] = {"9"}; },
       "non-integer id"},
      // Was a nlohmann::json::type_error, not an aerie::Error.
      {"template name not a string", [](Json& j) { j["post_processor"]["single"][0]["SpecialToken"]["id"] = 9; },
       "TemplateProcessing pieces must be"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Json json = tiny_tokenizer();
    c.damage(json);
    expect_load_error(json.dump(), c.expected_part);
  }
  // DeepSeek-V3 repeats vocab entries as added tokens with the same id and text: accepted.
  Json same = tiny_tokenizer();
  same["added_tokens"].push_back({{"id", 0}, {"content", "a"}, {"special", true}});
  EXPECT_EQ(make(same).encode("a", false), (Ids{0}));
  // max_vocab_size bounds every id.
  LoadLimits small;
  small.max_vocab_size = 18;
  try {
    (void)Tokenizer::from_json(tiny_tokenizer().dump(), {}, small);
    ADD_FAILURE() << "loaded with an id of 18 under max_vocab_size = 18";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_vocab_size"), std::string::npos) << e.what();
  }
}

TEST(LoadErrors, FileSizeAndDepthAreBounded) {
  // 100k nested arrays: copying or printing such a DOM recursed until the stack overflowed.
  Json json = tiny_tokenizer();
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string text = json.dump();
  text.insert(1, "\"deep\": " + deep + ", ");
  expect_load_error(text, "tokenizer.json: JSON nested deeper than the limit max_depth = 128");
  std::string deep_config = "{\"x\": " + deep + "}";
  try {
    (void)Tokenizer::from_json(json.dump(), deep_config);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json: JSON nested deeper"), std::string::npos) << e.what();
  }

  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "aerie_tokenizer_limits";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << json.dump();
  EXPECT_EQ(Tokenizer::load(dir).encode("abc", false), (Ids{5}));
  LoadLimits small;
  small.max_json_file_bytes = 100;
  try {
    (void)Tokenizer::load(dir, small);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("tokenizer.json"), std::string::npos) << message;
    EXPECT_NE(message.find("over the limit max_json_file_bytes = 100"), std::string::npos) << message;
  }
  std::filesystem::remove_all(dir);
}

TEST(TinyBpe, InvalidUtf8InputNamesTheOffset) {
  const Tokenizer tok = make(tiny_tokenizer());
  try {
    (void)tok.encode("ab\x80");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("byte offset 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aerie
