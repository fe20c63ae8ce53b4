// Token-mask cost of grammar-constrained output (GBNF, grammar/cfg_constraint.h) on the real Llama 3.1
// vocabulary, at a few positions of a JSON-like grammar, an arithmetic grammar and a word list. Prints, per
// position, the median and best milliseconds per mask over repeats and the allowed-token count.
//   cfg_mask_bench [tokenizer_dir]        (bash tools/gen/tokenizer/fetch_tokenizers.sh fetches it)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "grammar/cfg_constraint.h"
#include "grammar/cfg_parse.h"
#include "grammar/token_trie.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

const char* kJson = R"g(root ::= value
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws (string ws ":" ws value ws ("," ws string ws ":" ws value ws)*)? "}"
array ::= "[" ws (value ws ("," ws value ws)*)? "]"
string ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt])* "\""
number ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)?
ws ::= [ \t\n]{0,16})g";

const char* kArithmetic = R"g(root ::= expr
expr ::= term ws (("+" | "-") ws term ws)*
term ::= factor (ws [*/] ws factor)*
factor ::= "-"? [0-9]+ ("." [0-9]+)? | "(" ws expr ws ")"
ws ::= " "?)g";

std::string word_list() {
  std::string g = "root ::= word (\", \" word){0,9}\nword ::= ";
  const char* words[] = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"};
  for (int i = 0; i < 200; ++i) g += std::string(i ? " | \"" : "\"") + words[i % 10] + std::to_string(i) + "\"";
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("AERIE_TOKENIZER_DIR");
  const std::string dir = argc > 1 ? argv[1] : std::string(env ? env : AERIE_SOURCE_DIR "/.cache/tokenizers") + "/llama3_1";
  const aerie::Tokenizer tokenizer = aerie::Tokenizer::load(dir);
  std::vector<std::string> token_bytes;
  std::vector<int32_t> end_tokens, never_tokens;
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    token_bytes.emplace_back(tokenizer.token_bytes(id));
    const std::string_view name = tokenizer.id_to_token(id);
    if (name == "<|eot_id|>" || name == "<|end_of_text|>" || name == "<|eom_id|>") end_tokens.push_back(id);
    else if (tokenizer.is_special(id) || tokenizer.is_added(id)) never_tokens.push_back(id);
  }
  const auto vocabulary = std::make_shared<const aerie::TokenTrie>(token_bytes, end_tokens, never_tokens);
  auto start = Clock::now();
  const auto json = aerie::parse_gbnf(kJson);
  const auto arithmetic = aerie::parse_gbnf(kArithmetic);
  const auto words = aerie::parse_gbnf(word_list());
  std::printf("vocabulary %d tokens; grammars compiled in %.2f ms\n\n", vocabulary->n_vocab(), milliseconds_since(start));

  struct Position {
    const char* label;
    std::shared_ptr<const aerie::CfgGrammar> grammar;
    const char* prefix;
  };
  const Position positions[] = {
      {"json", json, ""},
      {"json", json, "{\"summary\": \"The quick brown"},
      {"json", json, "{\"summary\": \"x\", "},
      {"json", json, "{\"a\": [1, 2.5"},
      {"json", json, "[true, {\"k\": [null, {\"deep\": [\""},
      {"arithmetic", arithmetic, "(1 + 2) * (3"},
      {"200 words", words, ""},
      {"200 words", words, "alpha0, gam"},
  };
  constexpr int kRepeats = 21;
  std::printf("%-12s %-50s %9s %9s %8s\n", "grammar", "output so far", "median ms", "best ms", "allowed");
  std::vector<uint8_t> allowed;
  for (const Position& p : positions) {
    aerie::CfgConstraint constraint(p.grammar, vocabulary);
    for (const int32_t id : tokenizer.encode(p.prefix, false))
      if (!constraint.accept(id)) {
        std::fprintf(stderr, "cfg_mask_bench: the prefix %s is refused\n", p.prefix);
        return 1;
      }
    std::vector<double> times;
    for (int r = 0; r < kRepeats; ++r) {
      start = Clock::now();
      constraint.allowed_tokens(allowed);
      times.push_back(milliseconds_since(start));
    }
    std::sort(times.begin(), times.end());
    std::printf("%-12s %-50s %9.3f %9.3f %8td\n", p.label, (std::string("'") + p.prefix + "'").c_str(),
                times[times.size() / 2], times[0], std::count(allowed.begin(), allowed.end(), uint8_t(1)));
  }
  return 0;
}
