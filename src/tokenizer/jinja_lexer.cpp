#include "tokenizer/jinja_lexer.h"

#include <cctype>
#include <cstring>

#include "core/error.h"

namespace aerie::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Longest operators first so that "//" wins over "/".
constexpr const char* kOperators[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                      ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};

class Lexer {
 public:
  Lexer(const std::string& source, const std::string& name) : src_(source), name_(name) {}

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
    if (end + 1 < src_.size() && src_[end] == '.' && std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
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

  void lex_string(int line, int column) {
    const char quote = src_[pos_];
    std::string out;
    size_t i = pos_ + 1;
    for (; i < src_.size() && src_[i] != quote; ++i) {
      if (src_[i] != '\\' || i + 1 >= src_.size()) {
        out += src_[i];
        continue;
      }
      const char e = src_[++i];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;  // line continuation
        default:
          out += '\\';  // Python keeps unknown escapes verbatim
          out += e;
      }
    }
    if (i >= src_.size()) fail(line, column, "unterminated string");
    tokens_.push_back({TokenKind::kString, std::move(out), line, column});
    advance_to(i + 1);
  }

  const std::string& src_;
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
