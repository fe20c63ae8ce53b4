// The reading position in a grammar's text, shared by the GBNF and Lark parsers (cfg_parse.h): line and
// column tracking, UTF-8 characters, escapes, and errors that name where they happened.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "grammar/cfg_grammar.h"

namespace aerie {

class CfgText {
 public:
  CfgText(std::string_view text, std::string what);

  bool done() const { return pos_ >= text_.size(); }
  // The byte `ahead` bytes on, '\0' past the end.
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  bool starts_with(std::string_view s) const { return text_.substr(pos_).substr(0, s.size()) == s; }
  void advance(size_t n = 1);
  size_t position() const { return pos_; }
  std::string_view source() const { return text_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& what() const { return what_; }

  // "<what>: line L, column C: <message>" at the current position (or the given one).
  [[noreturn]] void fail(const std::string& message) const { fail_at(line_, column_, message); }
  [[noreturn]] void fail_at(int line, int column, const std::string& message) const;

  // One character of the text (UTF-8, checked), or after a backslash an escape: \xHH \uHHHH \UHHHHHHHH
  // \t \n \r \\ and `\c` for any c in `literal_escapes`. Returns the code point.
  uint32_t character(std::string_view literal_escapes);
  // Skips spaces and tabs, newlines too when `newlines`, and comments from `comment` to the end of the line.
  void skip_space(bool newlines, std::string_view comment);
  // A node of `kind` at the current position.
  CfgExpr node(CfgExpr::Kind kind) const;

 private:
  uint32_t hex(int digits);

  std::string_view text_;
  std::string what_;
  size_t pos_ = 0;
  int line_ = 1, column_ = 1;
};

// "c" as a one-code-point class, and the class of code points [lo, hi].
CfgExpr cfg_char(const CfgText& at, uint32_t lo, uint32_t hi);
// A human-readable form of the byte at the cursor, for "expected ..., found X" messages.
std::string cfg_found(const CfgText& text);

}  // namespace aerie
