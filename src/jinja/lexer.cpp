#include "jinja/lexer.h"

#include <cctype>
#include <cstring>

#include "core/error.h"
#include "jinja/value.h"

namespace aerie::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Longest operators first so that "//" wins over "/".
constexpr const char* kOperators[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                      ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};

// jinja2's newline handling: \r\n and \r become \n, and one newline at the very end is dropped
// (keep_trailing_newline=False).
std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] != '\r') {
      out += source[i];
    } else {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(const std::string& source, const std::string& name) : src_(normalize_newlines(source)), name_(name) {}

  std::vector<Token> run() {
    bool strip_next_text = false;  // the previous tag ended with '-'
    bool trim_newline = false;     // the previous tag was a block/comment without '+' (trim_blocks)
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      std::string text = src_.substr(pos_, tag - pos_);
      const bool text_at_line_start = pos_ == 0 || src_[pos_ - 1] == '\n';
      advance_to(tag);
      if (strip_next_text) {
        size_t n = 0;
        while (n < text.size() && is_space(text[n])) ++n;
        text.erase(0, n);
      } else if (trim_newline && !text.empty() && text[0] == '\n') {
        text.erase(0, 1);
      }
      strip_next_text = trim_newline = false;
      if (tag == src_.size()) {
        emit_text(std::move(text));
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (sign == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (kind != '{' && sign != '+') {
        lstrip_line(text, text_at_line_start);
      }
      emit_text(std::move(text));
      const int line = line_, column = column_;
      advance_to(tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0));
      if (kind == '%' && lex_raw(line, column)) continue;
      char end_sign = '\0';
      if (kind == '#') {
        end_sign = skip_comment(line, column);
      } else {
        tokens_.push_back({kind == '{' ? TokenKind::kVarBegin : TokenKind::kBlockBegin, "", line, column});
        end_sign = lex_tag(kind == '{' ? '}' : '%', line, column);
      }
      strip_next_text = end_sign == '-';
      trim_newline = kind != '{' && end_sign != '+';
      if (strip_next_text) {
        while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
      } else if (trim_newline && pos_ < src_.size() && src_[pos_] == '\n') {
        advance_to(pos_ + 1);
      }
      trim_newline = false;  // already applied to the source position
    }
    tokens_.push_back({TokenKind::kEnd, "", line_, column_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  // lstrip_blocks: drop spaces and tabs between the start of the line and the tag.
  static void lstrip_line(std::string& text, bool text_at_line_start) {
    const size_t newline = text.rfind('\n');
    const size_t line_start = newline == std::string::npos ? 0 : newline + 1;
    if (newline == std::string::npos && !text_at_line_start) return;
    for (size_t i = line_start; i < text.size(); ++i) {
      if (text[i] != ' ' && text[i] != '\t') return;
    }
    text.erase(line_start);
  }

  void emit_text(std::string text) {
    if (!text.empty()) tokens_.push_back({TokenKind::kText, std::move(text), line_, column_});
  }

  void advance_to(size_t target) {
    for (; pos_ < target; ++pos_) {
      if (src_[pos_] == '\n') {
        ++line_;
        column_ = 1;
      } else {
        ++column_;
      }
    }
  }

  [[noreturn]] void fail(int line, int column, const std::string& what) const {
    throw_error(str_cat("chat template '", name_, "' line ", line, " column ", column, ": syntax error: ", what));
  }

  // The rest of a block tag from pos_ if it is `raw %}` (with an optional sign before "%}"): its length, else 0.
  size_t raw_tag_length(size_t from, const char* keyword) const {
    size_t i = from;
    while (i < src_.size() && is_space(src_[i])) ++i;
    const size_t n = std::strlen(keyword);
    if (src_.compare(i, n, keyword) != 0) return 0;
    i += n;
    if (i < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[i])) || src_[i] == '_')) return 0;
    while (i < src_.size() && is_space(src_[i])) ++i;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    return src_.compare(i, 2, "%}") == 0 ? i + 2 - from : 0;
  }

  // {% raw %}...{% endraw %}: the text between is output as it is. As in jinja2, the newline after
  // `raw %}` stays (no trim_blocks), `-%}` strips the whitespace after it, the endraw tag is lstripped
  // (or stripped with `{%-`), and trim_blocks or `-%}` apply after it.
  bool lex_raw(int line, int column) {
    const size_t begin_length = raw_tag_length(pos_, "raw");
    if (begin_length == 0) return false;
    const bool strip_inside = src_[pos_ + begin_length - 3] == '-';
    advance_to(pos_ + begin_length);
    size_t end = pos_, end_length = 0;
    for (;; ++end) {
      end = src_.find("{%", end);
      if (end == std::string::npos) fail(line, column, "missing end of raw directive");
      const size_t sign_at = end + 2;
      const bool signed_tag = sign_at < src_.size() && (src_[sign_at] == '-' || src_[sign_at] == '+');
      end_length = raw_tag_length(sign_at + (signed_tag ? 1 : 0), "endraw");
      if (end_length != 0) {
        end_length += 2 + (signed_tag ? 1 : 0);
        break;
      }
    }
    std::string text = src_.substr(pos_, end - pos_);
    if (strip_inside) {
      size_t n = 0;
      while (n < text.size() && is_space(text[n])) ++n;
      text.erase(0, n);
    }
    const char end_sign = src_[end + 2];
    if (end_sign == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (end_sign != '+') {
      lstrip_line(text, pos_ == 0 || src_[pos_ - 1] == '\n');
    }
    emit_text(std::move(text));
    advance_to(end + end_length);
    const char close_sign = src_[end + end_length - 3];
    if (close_sign == '-') {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
    } else if (close_sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);
    }
    return true;
  }

  // Returns the sign before the closing "#}" ('-', '+' or '\0').
  char skip_comment(int line, int column) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail(line, column, "unclosed comment '{#'");
    const char sign = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    advance_to(end + 2);
    return sign;
  }

  // Lexes tokens up to the closing "}}" or "%}" (outside brackets) and returns the sign before it.
  char lex_tag(char closer, int line, int column) {
    int depth = 0;  // open ( [ {: a "}}" inside a dict literal does not close the tag
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= src_.size()) fail(line, column, closer == '}' ? "unclosed '{{'" : "unclosed '{%'");
      if (depth == 0) {
        for (char sign : {'-', '+', '\0'}) {
          const size_t at = pos_ + (sign ? 1 : 0);
          if (sign && src_[pos_] != sign) continue;
          if (at + 1 < src_.size() && src_[at] == closer && src_[at + 1] == '}') {
            tokens_.push_back({closer == '}' ? TokenKind::kVarEnd : TokenKind::kBlockEnd, "", line_, column_});
            advance_to(at + 2);
            return sign;
          }
        }
      }
      lex_token(depth);
    }
  }

  void lex_token(int& depth) {
    const char c = src_[pos_];
    const int line = line_, column = column_;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos_;
      while (end < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) ++end;
      tokens_.push_back({TokenKind::kName, src_.substr(pos_, end - pos_), line, column});
      advance_to(end);
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      lex_number(line, column);
    } else if (c == '\'' || c == '"') {
      lex_string(line, column);
    } else {
      for (const char* op : kOperators) {
        const size_t n = std::strlen(op);
        if (src_.compare(pos_, n, op) == 0) {
          if (n == 1 && std::strchr("([{", op[0])) ++depth;
          if (n == 1 && std::strchr(")]}", op[0])) --depth;
          tokens_.push_back({TokenKind::kOperator, op, line, column});
          advance_to(pos_ + n);
          return;
        }
      }
      fail(line, column, std::string("unexpected character '") + c + "'");
    }
  }

  void lex_number(int line, int column) {
    size_t end = pos_;
    bool is_float = false;
    auto digits = [&] {
      while (end < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) ++end;
    };
    digits();
    // As jinja2's lexer: no float right after a dot, so `matrix.0.1` is matrix[0][1].
    const bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
    if (!after_dot && end + 1 < src_.size() && src_[end] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      is_float = true;
      ++end;
      digits();
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t e = end + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
        is_float = true;
        end = e;
        digits();
      }
    }
    std::string text;
    for (size_t i = pos_; i < end; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    tokens_.push_back({is_float ? TokenKind::kFloat : TokenKind::kInteger, text, line, column});
    advance_to(end);
  }

  // Python's unicode-escape decoding (what jinja2 applies to string literals) of the escape whose letter
  // is at `i`; appends the character and returns the index after the escape. Unknown escapes stay as
  // they are ("\d" is a backslash and a d); \N{name} is not supported (an error).
  size_t unescape(size_t i, std::string& out, int line, int column) {
    const char e = src_[i];
    auto hex_code = [&](size_t digits) {
      if (i + digits >= src_.size()) fail(line, column, "truncated \\x, \\u or \\U escape in string");
      uint32_t code = 0;
      for (size_t k = 1; k <= digits; ++k) {
        const char h = src_[i + k];
        if (!std::isxdigit(static_cast<unsigned char>(h))) {
          fail(line, column, "truncated \\x, \\u or \\U escape in string");
        }
        code = code * 16 + static_cast<uint32_t>(
                               std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
      }
      if (code > 0x10FFFF) fail(line, column, "illegal Unicode character in string escape");
      append_utf8(out, code);
      return i + 1 + digits;
    };
    switch (e) {
      case 'n': out += '\n'; return i + 1;
      case 't': out += '\t'; return i + 1;
      case 'r': out += '\r'; return i + 1;
      case 'a': out += '\a'; return i + 1;
      case 'b': out += '\b'; return i + 1;
      case 'f': out += '\f'; return i + 1;
      case 'v': out += '\v'; return i + 1;
      case '\\': out += '\\'; return i + 1;
      case '\'': out += '\''; return i + 1;
      case '"': out += '"'; return i + 1;
      case '\n': return i + 1;  // line continuation
      case 'x': return hex_code(2);
      case 'u': return hex_code(4);
      case 'U': return hex_code(8);
      case 'N': fail(line, column, "\\N{...} escapes are not supported");
      default: break;
    }
    if (e >= '0' && e <= '7') {  // up to three octal digits
      uint32_t code = 0;
      size_t k = i;
      for (; k < src_.size() && k < i + 3 && src_[k] >= '0' && src_[k] <= '7'; ++k) {
        code = code * 8 + static_cast<uint32_t>(src_[k] - '0');
      }
      append_utf8(out, code);
      return k;
    }
    out += '\\';  // Python keeps unknown escapes verbatim
    out += e;
    return i + 1;
  }

  void lex_string(int line, int column) {
    const char quote = src_[pos_];
    std::string out;
    size_t i = pos_ + 1;
    for (; i < src_.size() && src_[i] != quote; ++i) {
      if (src_[i] != '\\' || i + 1 >= src_.size()) {
        out += src_[i];
        continue;
      }
      i = unescape(i + 1, out, line, column) - 1;
    }
    if (i >= src_.size()) fail(line, column, "unterminated string");
    tokens_.push_back({TokenKind::kString, std::move(out), line, column});
    advance_to(i + 1);
  }

  const std::string src_;
  const std::string& name_;
  size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const std::string& template_name) {
  return Lexer(source, template_name).run();
}

}  // namespace aerie::jinja
