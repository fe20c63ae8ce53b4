// JSON Schema -> grammar (structured output's response_format and tool parameters), then the grammar's
// byte matcher. Input: SCHEMA_JSON [\0 DOCUMENT]. The document's bytes are fed one at a time (refused ones
// skipped); when the matcher calls the result complete it must be RFC 8259 JSON in well-formed UTF-8
// (json_grammar.h: everything the grammar admits is), checked here by a small validator of its own
// (nlohmann refuses numbers beyond double's range, which JSON allows).
#include <cstddef>
#include <cstdint>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "fuzz_support.h"
#include "grammar/json_schema.h"

namespace {

// UTF-8 continuation bytes after a lead byte; -1 for a byte that never leads (0x80-0xc1, 0xf5-0xff).
int continuation_bytes(uint8_t c) {
  if (c < 0x80) return 0;
  if (c >= 0xc2 && c < 0xe0) return 1;
  if (c >= 0xe0 && c < 0xf0) return 2;
  if (c >= 0xf0 && c < 0xf5) return 3;
  return -1;
}

class JsonChecker {
 public:
  explicit JsonChecker(std::string_view text) : text_(text) {}
  bool document() {
    if (!value(0)) return false;
    skip_space();
    return at_ == text_.size();
  }

 private:
  bool value(int depth) {
    skip_space();
    if (at_ >= text_.size() || depth > 1000) return false;
    const char c = text_[at_];
    if (c == '{' || c == '[') return container(depth, c == '{' ? '}' : ']');
    if (c == '"') return string();
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    for (std::string_view word : {"true", "false", "null"}) {
      if (text_.substr(at_, word.size()) == word) {
        at_ += word.size();
        return true;
      }
    }
    return false;
  }
  bool container(int depth, char close) {
    ++at_;
    skip_space();
    if (peek(close)) return ++at_, true;
    for (;;) {
      if (close == '}') {
        skip_space();
        if (!string()) return false;
        skip_space();
        if (!peek(':')) return false;
        ++at_;
      }
      if (!value(depth + 1)) return false;
      skip_space();
      if (peek(close)) return ++at_, true;
      if (!peek(',')) return false;
      ++at_;
    }
  }
  bool string() {
    if (!peek('"')) return false;
    for (++at_; at_ < text_.size();) {
      const uint8_t c = uint8_t(text_[at_]);
      if (c == '"') return ++at_, true;
      if (c < 0x20) return false;
      if (c == '\\') {
        if (!escape()) return false;
      } else if (!utf8_character()) {
        return false;
      }
    }
    return false;
  }
  bool escape() {
    if (at_ + 1 >= text_.size()) return false;
    const char e = text_[at_ + 1];
    at_ += 2;
    if (std::string_view("\"\\/bfnrt").find(e) != std::string_view::npos) return true;
    if (e != 'u' || at_ + 4 > text_.size()) return false;
    for (int i = 0; i < 4; ++i, ++at_) {
      if (!std::isxdigit(uint8_t(text_[at_]))) return false;
    }
    return true;
  }
  bool utf8_character() {
    const uint8_t c = uint8_t(text_[at_]);
    const int n = continuation_bytes(c);
    if (n < 0 || at_ + size_t(n) >= text_.size()) return false;
    uint32_t code = n == 0 ? c : c & (0x3f >> n);
    for (int i = 1; i <= n; ++i) {
      const uint8_t next = uint8_t(text_[at_ + size_t(i)]);
      if ((next & 0xc0) != 0x80) return false;
      code = code << 6 | (next & 0x3f);
    }
    const uint32_t smallest[] = {0, 0x80, 0x800, 0x10000};
    if (code < smallest[n] || code > 0x10ffff || (code >= 0xd800 && code < 0xe000)) return false;
    at_ += size_t(n) + 1;
    return true;
  }
  bool number() {
    if (peek('-')) ++at_;
    if (peek('0')) {
      ++at_;
    } else if (!digits()) {
      return false;
    }
    if (peek('.') && (++at_, !digits())) return false;
    if (peek('e') || peek('E')) {
      ++at_;
      if (peek('+') || peek('-')) ++at_;
      if (!digits()) return false;
    }
    return true;
  }
  bool digits() {
    const size_t start = at_;
    while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') ++at_;
    return at_ > start;
  }
  bool peek(char c) const { return at_ < text_.size() && text_[at_] == c; }
  void skip_space() {
    while (at_ < text_.size() && std::string_view(" \t\n\r").find(text_[at_]) != std::string_view::npos) ++at_;
  }

  std::string_view text_;
  size_t at_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [schema_text, document] = aerie::fuzz::split_at_nul(data, size);
  std::shared_ptr<const aerie::JsonGrammar> grammar;
  try {
    grammar = aerie::compile_json_schema_text(schema_text);
  } catch (const aerie::Error&) {
    return -1;
  }
  aerie::JsonMatcher matcher(*grammar);
  std::string admitted;
  for (const char c : document) {
    if (matcher.feed(uint8_t(c))) admitted += c;
  }
  if (matcher.accepting() && !JsonChecker(admitted).document()) {
    std::fprintf(stderr, "the grammar admitted bytes that are not JSON: %s\n", admitted.c_str());
    std::abort();
  }
  return 0;
}
