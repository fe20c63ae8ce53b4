// Grammar text (llama.cpp's GBNF or the Lark subset, as `grammar` / guided_grammar take it) -> the grammar,
// then its byte matcher. Input: GRAMMAR [\0 TEXT]. Compiling either succeeds or throws aerie::Error; the
// text's bytes are fed one at a time (refused ones skipped) and the matcher's state stays within its
// bounds; what it admits is well-formed UTF-8 (every terminal is a set of Unicode scalar values), checked
// by a decoder of its own.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "fuzz_support.h"
#include "grammar/cfg_matcher.h"
#include "grammar/cfg_parse.h"

namespace {

// Whole characters only when `complete`; a trailing partial character is fine otherwise.
bool well_formed_utf8(std::string_view s, bool complete) {
  for (size_t i = 0; i < s.size();) {
    const auto b = uint8_t(s[i]);
    const int n = b < 0x80 ? 0 : b >= 0xc2 && b < 0xe0 ? 1 : b >= 0xe0 && b < 0xf0 ? 2 : b >= 0xf0 && b < 0xf5 ? 3 : -1;
    if (n < 0) return false;
    if (i + size_t(n) >= s.size() && n > 0 && i + size_t(n) + 1 > s.size()) return !complete;
    uint32_t code = n == 0 ? b : b & (0x3f >> n);
    for (int k = 1; k <= n; ++k) {
      const auto c = uint8_t(s[i + size_t(k)]);
      if ((c & 0xc0) != 0x80) return false;
      code = code << 6 | (c & 0x3f);
    }
    const uint32_t smallest[] = {0, 0x80, 0x800, 0x10000};
    if (code < smallest[n] || code > 0x10ffff || (code >= 0xd800 && code < 0xe000)) return false;
    i += size_t(n) + 1;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [grammar_text, text] = aerie::fuzz::split_at_nul(data, size);
  std::shared_ptr<const aerie::CfgGrammar> grammar;
  try {
    grammar = aerie::compile_grammar(grammar_text);
    aerie::CfgMatcher start(*grammar);
  } catch (const aerie::Error&) {
    return -1;
  }
  aerie::CfgMatcher matcher(*grammar);
  std::string admitted;
  for (const char c : text) {
    if (matcher.feed(uint8_t(c))) admitted += c;
    if (matcher.n_stacks() > aerie::kCfgMaxStacks) {
      std::fprintf(stderr, "the matcher holds %zu stacks, past its bound\n", matcher.n_stacks());
      std::abort();
    }
  }
  if (!well_formed_utf8(admitted, matcher.accepting())) {
    std::fprintf(stderr, "the grammar admitted malformed UTF-8\n");
    std::abort();
  }
  return 0;
}
