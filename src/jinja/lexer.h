// Jinja lexer: splits a template into text and the tokens inside {{ }}, {% %} tags, dropping {# #}
// comments. Whitespace control follows jinja2 with trim_blocks=True and lstrip_blocks=True (what Hugging
// Face uses for chat templates): a newline right after a block or comment tag is dropped, spaces and tabs
// before a block or comment tag at the start of a line are dropped, '-' strips all whitespace on that side,
// and '+' turns the trim/lstrip off for one tag.
#pragma once

#include <string>
#include <vector>

namespace aerie::jinja {

enum class TokenKind {
  kText,        // literal template text
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,      // value holds the unescaped text
  kInteger,
  kFloat,
  kOperator,    // + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  kEnd,
};

struct Token {
  TokenKind kind;
  std::string value;
  int line;    // 1-based
  int column;  // 1-based, in bytes
};

// Throws aerie::Error naming the template, line and column on malformed input (unclosed tag, string, ...).
std::vector<Token> tokenize(const std::string& source, const std::string& template_name);

}  // namespace aerie::jinja
