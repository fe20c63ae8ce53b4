// The after-reasoning constraint (grammar/reasoning_constraint.h) against a brute-force reference that
// re-splits the whole output text from scratch at every step, as the server's reasoning split defines it:
// on random walks over a vocabulary whose tokens hold "<think>" and "</think>" whole, in pieces, and with
// text before and after them, a token is allowed exactly when the reference says so, accept() agrees with
// the mask on a copy, and clones walk on their own. The inner constraint is a choice list, or the same
// language as a regex or a GBNF grammar (so each one's accept_bytes is exercised on tokens that close the
// block inside them). Then the JSON cases by hand: a token that closes the
// block and carries JSON bytes (">{" after "</think" yes, ">\n{" no: JSON starts with its value), end
// tokens while thinking, and the limit on held whitespace.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "grammar/cfg_constraint.h"
#include "grammar/cfg_parse.h"
#include "grammar/choice_constraint.h"
#include "grammar/json_constraint.h"
#include "grammar/json_schema.h"
#include "grammar/reasoning_constraint.h"
#include "grammar/regex_constraint.h"
#include "sample/sampling.h"

namespace aerie {
namespace {

const std::string kSpace = " \n\r\t";

// The reference split of the whole text: where the output stands and its content (or held text).
enum class Phase { kStart, kReasoning, kContent };
struct Split {
  Phase phase;
  std::string text;  // kStart: everything so far; kContent: the content
};

Split reference_split(const std::string& text, bool starts_in_reasoning) {
  size_t reasoning_from = 0;
  if (!starts_in_reasoning) {
    const size_t first = text.find_first_not_of(kSpace);
    if (first == std::string::npos) return {Phase::kStart, text};
    const std::string after = text.substr(first);
    const std::string open = "<think>";
    if (after.size() < open.size())
      return {open.compare(0, after.size(), after) == 0 ? Phase::kStart : Phase::kContent, text};
    if (after.compare(0, open.size(), open) != 0) return {Phase::kContent, text};
    reasoning_from = first + open.size();
  }
  const size_t close = text.find("</think>", reasoning_from);
  if (close == std::string::npos) return {Phase::kReasoning, ""};
  return {Phase::kContent, text.substr(close + 8)};
}

// The inner constraint's language: a choice list.
bool starts_some(const std::vector<std::string>& choices, const std::string& s) {
  return std::any_of(choices.begin(), choices.end(),
                     [&](const std::string& c) { return c.size() >= s.size() && c.compare(0, s.size(), s) == 0; });
}
bool is_choice(const std::vector<std::string>& choices, const std::string& s) {
  return std::find(choices.begin(), choices.end(), s) != choices.end();
}

struct Vocabulary {
  std::vector<std::string> text;  // what each id adds to the output text
  int32_t end = -1, never = -1, skipped = -1;
  std::shared_ptr<const TokenTrie> trie;
  std::shared_ptr<const ThinkVocabulary> think;
};

Vocabulary make_vocabulary() {
  Vocabulary v;
  v.text = {
      "<",        "/",     "t",  "h",     "i",         "n",          "k",   ">",    "<think>",       "</think>",
      "</",       "think", "k>", ">a",    "</think>a", "a</think>b", " ",   "\n",   "\n\n",          " a",
      "a",        "b",     "ab", "{",     "x</thi",    "nk>y",       "<th", "ink>", "ink></think>a", "<think></think>b",
      " <think>", "<tha",  "<t", ">\n\n", "a<"};
  v.never = int32_t(v.text.size());
  v.text.push_back("\x01");  // an added token: text, but never allowed in the content
  v.skipped = int32_t(v.text.size());
  v.text.push_back("");  // a special token the detokenizer drops
  v.end = int32_t(v.text.size());
  v.text.push_back("");
  std::vector<std::string> trie_bytes = v.text;
  trie_bytes[size_t(v.skipped)] = "<|special|>";
  v.trie = std::make_shared<const TokenTrie>(trie_bytes, std::vector<int32_t>{v.end},
                                             std::vector<int32_t>{v.never, v.skipped});
  v.think = std::make_shared<const ThinkVocabulary>(v.text, std::vector<int32_t>{v.end});
  return v;
}

// Whether token t may follow `text` (see reasoning_constraint.h for the rules the reference restates).
bool reference_allows(const Vocabulary& v, const std::vector<std::string>& choices, const std::string& text,
                      ReasoningStart start, int32_t t) {
  const bool in_block = start == ReasoningStart::kInBlock;
  const Split now = reference_split(text, in_block);
  if (t == v.end) return now.phase == Phase::kContent && is_choice(choices, now.text);
  const std::string after = text + v.text[size_t(t)];
  const Split next = reference_split(after, in_block);
  // The prompt closed a block: the whole output is content (or held), never a block of its own.
  if (start == ReasoningStart::kClosed && (next.phase == Phase::kReasoning || next.text != after)) return false;
  switch (next.phase) {
    case Phase::kStart:
      if (next.text.size() > kMaxHeldBytes) return false;
      return (start == ReasoningStart::kMayOpen && next.text.find_first_not_of(kSpace) != std::string::npos) ||
             starts_some(choices, next.text);
    case Phase::kReasoning: return true;
    case Phase::kContent:
      if (t == v.never || t == v.skipped) return false;  // the inner constraint never allows these
      return starts_some(choices, next.text);
  }
  return false;
}

// The inner constraint: exactly the strings in `choices`, as a choice list, a regex or a GBNF grammar.
enum class InnerKind { kChoice, kRegex, kGrammar };
std::unique_ptr<TokenConstraint> make_inner(InnerKind kind, const std::vector<std::string>& choices,
                                            const std::shared_ptr<const TokenTrie>& trie) {
  if (kind == InnerKind::kChoice) return make_choice_constraint(choices, trie);
  std::string text = kind == InnerKind::kGrammar ? "root ::= " : "";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) text += kind == InnerKind::kGrammar ? " | " : "|";  // a regex reads spaces as text
    text += kind == InnerKind::kGrammar ? "\"" : "(?:";
    for (const char c : choices[i]) {
      if (c == '\n') text += "\\n";
      else if (kind == InnerKind::kRegex && c == '{') text += "\\{";
      else text += c;
    }
    text += kind == InnerKind::kGrammar ? "\"" : ")";
  }
  if (kind == InnerKind::kRegex) return make_regex_constraint(compile_output_regex(text), trie);
  return make_cfg_constraint(parse_gbnf(text), trie);
}

class AfterReasoningInner : public testing::TestWithParam<InnerKind> {};

TEST_P(AfterReasoningInner, MasksMatchABruteForceSplitAlongRandomWalks) {
  const Vocabulary v = make_vocabulary();
  const auto n_vocab = int32_t(v.text.size());
  Rng rng(41);
  const std::string alphabet = "ab <{\n";
  int reached_content = 0, closed_inside_a_token = 0;
  const ReasoningStart starts[] = {ReasoningStart::kInBlock, ReasoningStart::kMayOpen, ReasoningStart::kClosed};
  for (int trial = 0; trial < 600; ++trial) {
    const ReasoningStart start = starts[trial % 3];
    const bool starts_in_reasoning = start == ReasoningStart::kInBlock;
    std::vector<std::string> choices;
    const int n_choices = 1 + int(rng.next_unit_double() * 4);
    for (int i = 0; i < n_choices; ++i) {
      std::string c = trial % 5 == 1 ? "<th" : "";  // a choice that looks like an opening marker
      const int len = 1 + int(rng.next_unit_double() * 4);
      for (int j = 0; j < len; ++j) c += alphabet[size_t(rng.next_unit_double() * double(alphabet.size()))];
      choices.push_back(c);
    }
    const auto inner = make_inner(GetParam(), choices, v.trie);
    std::unique_ptr<TokenConstraint> constraint = make_after_reasoning_constraint(*inner, v.think, start);
    std::string text;
    std::vector<uint8_t> allowed;
    std::vector<int32_t> picks;
    for (int step = 0; step < 40; ++step) {
      constraint->allowed_tokens(allowed);
      ASSERT_EQ(allowed.size(), size_t(n_vocab));
      std::vector<int32_t> options;
      for (int32_t t = 0; t < n_vocab; ++t) {
        const bool expected = reference_allows(v, choices, text, start, t);
        ASSERT_EQ(allowed[size_t(t)], expected ? 1 : 0)
            << "trial " << trial << " text '" << text << "' + '" << v.text[size_t(t)] << "' start " << int(start)
            << " choices " << testing::PrintToString(choices) << " tokens " << testing::PrintToString(picks);
        EXPECT_EQ(constraint->clone()->accept(t), expected) << "trial " << trial << " '" << text << "' + " << t;
        if (expected && t != v.end) options.push_back(t);
      }
      const Split now = reference_split(text, starts_in_reasoning);
      const bool complete = now.phase == Phase::kContent && is_choice(choices, now.text);
      EXPECT_EQ(constraint->finished(), complete && options.empty()) << "trial " << trial << " '" << text << "'";
      if (options.empty()) break;
      // Favour the marker tokens so that most walks leave the block.
      int32_t pick = options[size_t(rng.next_unit_double() * double(options.size()))];
      if (rng.next_unit_double() < 0.3) {
        for (const int32_t t : options)
          if (v.text[size_t(t)].find('>') != std::string::npos) pick = t;
      }
      // A copy walked elsewhere leaves the original alone.
      auto other = constraint->clone();
      for (int32_t t = 0; t < n_vocab; ++t)
        if (t != pick && other->accept(t)) break;
      const Phase before = reference_split(text, starts_in_reasoning).phase;
      ASSERT_TRUE(constraint->accept(pick)) << "trial " << trial << " '" << text << "' + " << pick;
      text += v.text[size_t(pick)];
      picks.push_back(pick);
      const Split after = reference_split(text, starts_in_reasoning);
      if (before != Phase::kContent && after.phase == Phase::kContent) {
        ++reached_content;
        closed_inside_a_token += !after.text.empty();
      }
    }
  }
  // The walks did cross the boundary, some of them inside one token.
  EXPECT_GT(reached_content, 100);
  EXPECT_GT(closed_inside_a_token, 10);
}

std::string inner_name(const testing::TestParamInfo<InnerKind>& info) {
  return info.param == InnerKind::kChoice ? "Choice" : info.param == InnerKind::kRegex ? "Regex" : "Grammar";
}
INSTANTIATE_TEST_SUITE_P(AfterReasoningConstraint, AfterReasoningInner,
                         testing::Values(InnerKind::kChoice, InnerKind::kRegex, InnerKind::kGrammar), inner_name);

int32_t id_of(const std::vector<std::string>& tokens, const std::string& bytes) {
  return int32_t(std::find(tokens.begin(), tokens.end(), bytes) - tokens.begin());
}

struct JsonCase {
  std::vector<std::string> tokens = {"</think", ">", ">{", ">\n{", "{", "}", "\"a\"", ":", "1", "\n", " ", "x", ""};
  int32_t end = int32_t(tokens.size()) - 1;
  std::shared_ptr<const TokenTrie> trie = std::make_shared<const TokenTrie>(tokens, std::vector<int32_t>{end},
                                                                            std::vector<int32_t>{});
  std::shared_ptr<const ThinkVocabulary> think = std::make_shared<const ThinkVocabulary>(tokens,
                                                                                         std::vector<int32_t>{end});
  int32_t id(const std::string& bytes) const { return id_of(tokens, bytes); }
};

TEST(AfterReasoningConstraint, ATokenThatClosesTheBlockCarriesOnlyWhatTheSchemaTakes) {
  const JsonCase v;
  const char* schema = R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})";
  for (const JsonWhitespace whitespace : {JsonWhitespace::kCompact, JsonWhitespace::kAny}) {
    SCOPED_TRACE(whitespace == JsonWhitespace::kAny ? "any whitespace" : "compact");
    const auto inner = make_json_constraint(compile_json_schema_text(schema, {}, whitespace), v.trie);
    auto c = make_after_reasoning_constraint(*inner, v.think, ReasoningStart::kInBlock);
    std::vector<uint8_t> mask;
    c->allowed_tokens(mask);
    // Thinking: anything but the end token, "}" and "x" too.
    EXPECT_TRUE(mask[size_t(v.id("}"))] && mask[size_t(v.id("x"))] && mask[size_t(v.id("\n"))]);
    EXPECT_FALSE(mask[size_t(v.end)]);
    EXPECT_FALSE(c->clone()->accept(v.end));
    ASSERT_TRUE(c->accept(v.id("x")));
    ASSERT_TRUE(c->accept(v.id("</think")));
    c->allowed_tokens(mask);
    EXPECT_TRUE(mask[size_t(v.id(">"))]);
    EXPECT_TRUE(mask[size_t(v.id(">{"))]);     // closes the block and opens the object
    EXPECT_FALSE(mask[size_t(v.id(">\n{"))]);  // JSON starts with its value, in either whitespace mode
    EXPECT_TRUE(mask[size_t(v.id("x"))]);      // "</thinkx" is still reasoning
    ASSERT_TRUE(c->accept(v.id(">{")));
    // The object is open: the schema rules now.
    c->allowed_tokens(mask);
    EXPECT_TRUE(mask[size_t(v.id("\"a\""))]);
    EXPECT_FALSE(mask[size_t(v.id("x"))]);
    EXPECT_FALSE(mask[size_t(v.id("}"))]);
    for (const char* t : {"\"a\"", ":", "1", "}"}) ASSERT_TRUE(c->accept(v.id(t))) << t;
    EXPECT_TRUE(c->finished());
    EXPECT_TRUE(c->accept(v.end));
  }
}

TEST(AfterReasoningConstraint, WithoutABlockTheOutputIsContentFromTheStart) {
  const JsonCase v;
  const auto compact = make_json_constraint(json_object_grammar(JsonWhitespace::kCompact), v.trie);
  auto c = make_after_reasoning_constraint(*compact, v.think, ReasoningStart::kMayOpen);
  std::vector<uint8_t> mask;
  c->allowed_tokens(mask);
  EXPECT_TRUE(mask[size_t(v.id("{"))]);
  EXPECT_FALSE(mask[size_t(v.id("x"))]);
  EXPECT_FALSE(mask[size_t(v.id("\n"))]);  // compact JSON cannot start with it, and it would trap the output
  EXPECT_FALSE(mask[size_t(v.id("</think"))]);
  ASSERT_TRUE(c->accept(v.id("{")));
  EXPECT_FALSE(c->clone()->accept(v.id("</think")));

  // Whitespace the content may start with is held, up to kMaxHeldBytes.
  const std::string spaces(kMaxHeldBytes, ' ');
  const auto spaced = make_choice_constraint({spaces + "x", spaces + "      x"}, v.trie);
  auto s = make_after_reasoning_constraint(*spaced, v.think, ReasoningStart::kMayOpen);
  for (size_t i = 0; i < kMaxHeldBytes; ++i) ASSERT_TRUE(s->accept(v.id(" "))) << i;
  EXPECT_FALSE(s->clone()->accept(v.id(" ")));
  ASSERT_TRUE(s->accept(v.id("x")));  // held whitespace and the token: all content
  EXPECT_TRUE(s->finished());
}

}  // namespace
}  // namespace aerie
