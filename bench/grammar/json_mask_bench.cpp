// Token-mask cost of structured output on a real vocabulary: the Llama 3.1 tokenizer (128k tokens) as a
// TokenTrie, masks computed by JsonConstraint at several positions of a few grammars. Prints, per position,
// the median and best milliseconds per mask over repeats, the allowed-token count and the trie size.
//   json_mask_bench [tokenizer_dir]        (bash tools/gen/tokenizer/fetch_tokenizers.sh fetches it)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "grammar/json_constraint.h"
#include "grammar/json_schema.h"
#include "grammar/token_trie.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Position {
  const char* grammar;  // a label
  std::shared_ptr<const aerie::JsonGrammar> compiled;
  const char* prefix;       // the output so far (encoded with the tokenizer)
  const char* raw = "";     // then these bytes, one single-byte token each (e.g. half a character)
};

const char* kPersonSchema = R"({"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": ["string", "null"]}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string", "maxLength": 5}},
                "required": ["city"], "additionalProperties": false}},
  "required": ["name", "age"], "additionalProperties": false})";

// tool_choice "required" over eight tools: an array of {"name": const, "parameters": schema} alternatives
// that share the prefix {"name": " until the name tells them apart.
std::string tool_calls_schema() {
  std::string alternatives;
  for (int i = 0; i < 8; ++i) {
    if (i) alternatives += ",";
    alternatives += R"({"type": "object", "properties": {"name": {"const": "tool_)" + std::to_string(i) +
                    R"("}, "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                    "limit": {"type": "integer"}}, "required": ["query"], "additionalProperties": false}},
                    "required": ["name", "parameters"], "additionalProperties": false})";
  }
  return R"({"type": "array", "minItems": 1, "items": {"anyOf": [)" + alternatives + "]}}";
}

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("AERIE_TOKENIZER_DIR");
  const std::string dir = argc > 1 ? argv[1] : std::string(env ? env : AERIE_SOURCE_DIR "/.cache/tokenizers") + "/llama3_1";
  const aerie::Tokenizer tokenizer = aerie::Tokenizer::load(dir);

  auto start = Clock::now();
  std::vector<std::string> token_bytes;
  std::vector<int32_t> end_tokens, never_tokens;
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    token_bytes.emplace_back(tokenizer.token_bytes(id));
    const std::string_view name = tokenizer.id_to_token(id);
    if (name == "<|eot_id|>" || name == "<|end_of_text|>" || name == "<|eom_id|>") end_tokens.push_back(id);
    else if (tokenizer.is_special(id) || tokenizer.is_added(id)) never_tokens.push_back(id);
  }
  const auto vocabulary = std::make_shared<const aerie::TokenTrie>(token_bytes, end_tokens, never_tokens);
  std::printf("vocabulary %d tokens (%zu end, %zu never), trie %zu nodes, longest token %zu bytes; built in %.0f ms\n",
              vocabulary->n_vocab(), end_tokens.size(), never_tokens.size(), vocabulary->n_nodes(),
              vocabulary->max_depth(), milliseconds_since(start));

  // The positions below are laid out with spaces (as the figures in docs were measured): kAny admits them.
  constexpr aerie::JsonWhitespace kAny = aerie::JsonWhitespace::kAny;
  start = Clock::now();
  const auto person = aerie::compile_json_schema_text(kPersonSchema, {}, kAny);
  const auto tools = aerie::compile_json_schema_text(tool_calls_schema(), {}, kAny);
  std::printf("schemas compiled in %.2f ms\n\n", milliseconds_since(start));
  const auto short_string = aerie::compile_json_schema_text(
      R"({"type": "object", "properties": {"code": {"type": "string", "maxLength": 64}}, "required": ["code"]})", {}, kAny);
  const auto two_parses = aerie::compile_json_schema_text(R"({"anyOf": [
      {"type": "object", "properties": {"text": {"type": "string"}, "n": {"type": "integer"}}, "required": ["text", "n"]},
      {"type": "object", "properties": {"text": {"type": "string"}, "ok": {"type": "boolean"}}, "required": ["text", "ok"]}]})",
      {}, kAny);
  const auto object = aerie::json_object_grammar(kAny);
  const auto value = aerie::json_value_grammar(kAny);

  const Position positions[] = {
      {"json_object", object, ""},
      {"json_object", object, "{\"summary\": \"The quick brown"},
      {"json_object", object, "{\"summary\": \"x\", "},
      {"json_object", object, "{\"a\": [1, 2.5"},
      {"any value", value, "[true, {\"k\": [null, \""},
      {"person", person, ""},
      {"person", person, "{\"name\": \"Ada Love"},
      {"person", person, "{\"name\": \"Ada\", "},
      {"person", person, "{\"name\": \"Ada\", \"age\": 3"},
      {"person", person, "{\"name\": \"Ada\", \"age\": 36, \"address\": {\"city\": \"London\", \"zip\": \"N1"},
      {"8 tools", tools, "[{\"name\": \"tool_"},
      {"8 tools", tools, "[{\"name\": \"tool_3\", \"parameters\": {\"query\": \"weather in Par"},
      // Slower paths: the walk steps through every live token (no plain-text shortcut).
      {"json_object", object, "{\"summary\": \"caf", "\xc3"},
      {"maxLength", short_string, "{\"code\": \"AB"},
      {"2 parses", two_parses, "{\"text\": \"Hello wor"},
  };
  constexpr int kRepeats = 31;
  std::printf("%-12s %-70s %9s %9s %8s\n", "grammar", "output so far", "median ms", "best ms", "allowed");
  std::vector<uint8_t> allowed;
  for (const Position& p : positions) {
    aerie::JsonConstraint constraint(p.compiled, vocabulary);
    std::vector<int32_t> ids = tokenizer.encode(p.prefix, false);
    for (const char* c = p.raw; *c; ++c)
      for (int32_t id = 0; id < vocabulary->n_vocab(); ++id)
        if (vocabulary->is_text(id) && vocabulary->token_bytes(id) == std::string_view(c, 1)) {
          ids.push_back(id);
          break;
        }
    for (const int32_t id : ids)
      if (!constraint.accept(id)) {
        std::fprintf(stderr, "json_mask_bench: the prefix %s%s is refused\n", p.prefix, p.raw);
        return 1;
      }
    std::vector<double> times;
    for (int r = 0; r < kRepeats; ++r) {
      start = Clock::now();
      constraint.allowed_tokens(allowed);
      times.push_back(milliseconds_since(start));
    }
    std::sort(times.begin(), times.end());
    const auto n_allowed = std::count(allowed.begin(), allowed.end(), uint8_t(1));
    std::string shown = std::string("'") + p.prefix;
    for (const char* c = p.raw; *c; ++c) shown += "\\x" + std::to_string(uint8_t(*c));  // bytes in decimal
    std::printf("%-12s %-70s %9.3f %9.3f %8td\n", p.grammar, (shown + "'").c_str(),
                times[times.size() / 2], times[0], n_allowed);
  }
  return 0;
}
