// The GBNF parser, the text cursor both parsers share, and the notation detection (cfg_parse.h).
#include "grammar/cfg_parse.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "grammar/cfg_text.h"

namespace aerie {

CfgText::CfgText(std::string_view text, std::string what) : text_(text), what_(std::move(what)) {
  AERIE_CHECK(text.size() <= kCfgMaxGrammarBytes, what_, ": the grammar has ", text.size(),
              " bytes, more than the limit of ", kCfgMaxGrammarBytes);
}

void CfgText::advance(size_t n) {
  for (size_t i = 0; i < n && pos_ < text_.size(); ++i, ++pos_) {
    const auto b = uint8_t(text_[pos_]);
    if (b == '\n') {
      ++line_;
      column_ = 1;
    } else if ((b & 0xC0) != 0x80) {
      ++column_;  // columns count characters, not UTF-8 continuation bytes
    }
  }
}

void CfgText::fail_at(int line, int column, const std::string& message) const {
  throw_error(str_cat(what_, ": line ", line, ", column ", column, ": ", message));
}

uint32_t CfgText::hex(int digits) {
  uint32_t value = 0;
  for (int i = 0; i < digits; ++i) {
    const char c = peek();
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else fail(str_cat("expected ", digits, " hexadecimal digits in the escape, found ", cfg_found(*this)));
    value = value * 16 + uint32_t(d);
    advance();
  }
  return value;
}

uint32_t CfgText::character(std::string_view literal_escapes) {
  const int line = line_, column = column_;
  const auto b = uint8_t(peek());
  if (done()) fail("unexpected end of the grammar");
  if (b == '\\') {
    advance();
    const char e = peek();
    if (done()) fail("unexpected end of the grammar after '\\'");
    uint32_t cp;
    if (e == 'x') advance(), cp = hex(2);
    else if (e == 'u') advance(), cp = hex(4);
    else if (e == 'U') advance(), cp = hex(8);
    else if (e == 't') advance(), cp = '\t';
    else if (e == 'n') advance(), cp = '\n';
    else if (e == 'r') advance(), cp = '\r';
    else if (e == '\\') advance(), cp = '\\';
    else if (literal_escapes.find(e) != std::string_view::npos) advance(), cp = uint8_t(e);
    else fail(str_cat("unknown escape '\\", e, "' (known: \\x \\u \\U \\t \\n \\r \\\\ and \\", literal_escapes, ")"));
    if (cp > kCfgMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF))
      fail_at(line, column, str_cat("the escape names U+", std::hex, cp, ", which is not a Unicode scalar value"));
    return cp;
  }
  // One UTF-8 character of the text itself.
  int length = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (length == 0) fail("the grammar is not valid UTF-8");
  uint32_t cp = length == 1 ? b : length == 2 ? (b & 0x1Fu) : length == 3 ? (b & 0x0Fu) : (b & 0x07u);
  for (int i = 1; i < length; ++i) {
    const auto c = uint8_t(peek(size_t(i)));
    if ((c & 0xC0) != 0x80) fail("the grammar is not valid UTF-8");
    cp = (cp << 6) | (c & 0x3Fu);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[length] || cp > kCfgMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF))
    fail("the grammar is not valid UTF-8");
  advance(size_t(length));
  return cp;
}

void CfgText::skip_space(bool newlines, std::string_view comment) {
  while (!done()) {
    const char c = peek();
    if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
      advance();
    } else if (c == '\r' && peek(1) == '\n' && newlines) {
      advance(2);
    } else if (c == '\r' && peek(1) == '\n') {
      advance();  // CRLF: the '\n' ends the line
    } else if (starts_with(comment)) {
      while (!done() && peek() != '\n') advance();
    } else {
      return;
    }
  }
}

CfgExpr CfgText::node(CfgExpr::Kind kind) const {
  CfgExpr e;
  e.kind = kind;
  e.line = line_;
  e.column = column_;
  return e;
}

CfgExpr cfg_char(const CfgText& at, uint32_t lo, uint32_t hi) {
  CfgExpr e = at.node(CfgExpr::Kind::kClass);
  e.ranges.push_back({lo, hi});
  return e;
}

std::string cfg_found(const CfgText& text) {
  if (text.done()) return "the end of the grammar";
  const auto c = uint8_t(text.peek());
  if (c == '\n') return "a newline";
  if (c < 0x20 || c >= 0x7F) return str_cat("byte 0x", std::hex, int(c));
  return str_cat("'", char(c), "'");
}

namespace {

bool is_gbnf_name_char(char c) { return std::isalnum(uint8_t(c)) || c == '-' || c == '_'; }

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const std::string& what) : text_(text, what) {}

  std::vector<CfgRuleSource> parse() {
    std::vector<CfgRuleSource> rules;
    for (;;) {
      space(true);
      if (text_.done()) break;
      CfgRuleSource rule;
      rule.line = text_.line();
      rule.name = name();
      if (rule.name.empty()) text_.fail("expected a rule name, found " + cfg_found(text_));
      space(false);
      if (!text_.starts_with("::=")) text_.fail("expected '::=' after the rule name '" + rule.name + "', found " + cfg_found(text_));
      text_.advance(3);
      space(true);
      rule.body = alternatives(0);
      space(false);
      if (!text_.done() && text_.peek() != '\n')
        text_.fail("expected the end of rule '" + rule.name + "' (a newline), '|' or an item, found " + cfg_found(text_));
      rules.push_back(std::move(rule));
    }
    if (rules.empty()) text_.fail("the grammar is empty: expected rules such as root ::= \"yes\" | \"no\"");
    return rules;
  }

 private:
  void space(bool newlines) { text_.skip_space(newlines, "#"); }

  std::string name() {
    std::string out;
    while (is_gbnf_name_char(text_.peek())) out += text_.peek(), text_.advance();
    return out;
  }

  CfgExpr alternatives(int depth) {
    CfgExpr alts = text_.node(CfgExpr::Kind::kAlternatives);
    alts.children.push_back(sequence(depth));
    for (;;) {
      space(depth > 0);
      if (text_.peek() == '|') {
        text_.advance();
        space(true);
        alts.children.push_back(sequence(depth));
        continue;
      }
      if (depth == 0 && text_.peek() == '\n') {
        // A rule goes on when its next line starts with '|'.
        CfgText lookahead = text_;
        lookahead.skip_space(true, "#");
        if (lookahead.peek() == '|') {
          text_ = lookahead;
          continue;
        }
      }
      break;
    }
    return alts.children.size() == 1 ? std::move(alts.children[0]) : alts;
  }

  CfgExpr sequence(int depth) {
    CfgExpr seq = text_.node(CfgExpr::Kind::kSequence);
    for (;;) {
      space(depth > 0);
      const char c = text_.peek();
      if (text_.done() || c == '|' || c == ')' || c == '\n' || c == '\r') break;
      CfgExpr item = primary(depth);
      seq.children.push_back(postfix(std::move(item)));
    }
    return seq;
  }

  CfgExpr primary(int depth) {
    const char c = text_.peek();
    if (c == '"') return literal();
    if (c == '[') return char_class();
    if (c == '.') {
      CfgExpr any = cfg_char(text_, 0, kCfgMaxCodePoint);
      text_.advance();
      return any;
    }
    if (c == '(') {
      const int line = text_.line(), column = text_.column();
      if (depth + 1 > kCfgMaxNesting) text_.fail(str_cat("groups nest deeper than ", kCfgMaxNesting, " levels"));
      text_.advance();
      space(true);
      CfgExpr group = alternatives(depth + 1);
      space(true);
      if (text_.peek() != ')')
        text_.fail(str_cat("expected ')' to close the group opened at line ", line, ", column ", column, ", found ",
                           cfg_found(text_)));
      text_.advance();
      return group;
    }
    if (is_gbnf_name_char(c)) {
      CfgExpr ref = text_.node(CfgExpr::Kind::kRule);
      ref.name = name();
      return ref;
    }
    text_.fail("expected an item (a \"literal\", a [class], a rule name, '(' or '.'), found " + cfg_found(text_));
  }

  CfgExpr literal() {
    CfgExpr seq = text_.node(CfgExpr::Kind::kSequence);
    text_.advance();  // the opening quote
    while (text_.peek() != '"') {
      if (text_.done() || text_.peek() == '\n') text_.fail("unterminated literal: expected '\"'");
      const CfgText at = text_;
      const uint32_t cp = text_.character("\"[]-^");
      seq.children.push_back(cfg_char(at, cp, cp));
    }
    text_.advance();
    return seq;
  }

  CfgExpr char_class() {
    CfgExpr cls = text_.node(CfgExpr::Kind::kClass);
    text_.advance();  // '['
    const bool negated = text_.peek() == '^';
    if (negated) text_.advance();
    std::vector<CfgRange> ranges;
    while (text_.peek() != ']') {
      if (text_.done() || text_.peek() == '\n') text_.fail("unterminated character class: expected ']'");
      const uint32_t lo = text_.character("\"[]-^");
      uint32_t hi = lo;
      if (text_.peek() == '-' && text_.peek(1) != ']') {
        text_.advance();
        if (text_.done()) text_.fail("unterminated character class: expected ']'");
        hi = text_.character("\"[]-^");
        if (hi < lo) text_.fail("the range in the character class ends before it starts");
      }
      ranges.push_back({lo, hi});
    }
    text_.advance();
    if (!negated) {
      cls.ranges = std::move(ranges);
      return cls;
    }
    // The complement over all code points (cfg_grammar.cpp cuts the surrogates out).
    std::sort(ranges.begin(), ranges.end(), [](const CfgRange& a, const CfgRange& b) { return a.lo < b.lo; });
    uint32_t next = 0;
    for (const CfgRange& r : ranges) {
      if (r.lo > next) cls.ranges.push_back({next, r.lo - 1});
      next = std::max(next, r.hi + 1);
    }
    if (next <= kCfgMaxCodePoint) cls.ranges.push_back({next, kCfgMaxCodePoint});
    return cls;
  }

  uint32_t count() {
    if (!std::isdigit(uint8_t(text_.peek()))) text_.fail("expected a number in the repetition, found " + cfg_found(text_));
    uint64_t value = 0;
    while (std::isdigit(uint8_t(text_.peek()))) {
      value = std::min<uint64_t>(value * 10 + uint64_t(text_.peek() - '0'), uint64_t(1) << 32);
      text_.advance();
    }
    if (value > kCfgMaxRepetition)
      text_.fail(str_cat("repetition counts above ", kCfgMaxRepetition, " are not supported"));
    return uint32_t(value);
  }

  CfgExpr postfix(CfgExpr item) {
    for (int n = 0;; ++n) {
      const char c = text_.peek();
      if (c != '*' && c != '+' && c != '?' && c != '{') return item;
      // Each operator nests the item once more (and lowering recurses through the nesting).
      if (n == kCfgMaxNesting) text_.fail(str_cat("more than ", kCfgMaxNesting, " repetition operators on one item"));
      CfgExpr rep = text_.node(CfgExpr::Kind::kRepeat);
      text_.advance();
      if (c == '*') rep.min = 0, rep.max = kCfgUnbounded;
      if (c == '+') rep.min = 1, rep.max = kCfgUnbounded;
      if (c == '?') rep.min = 0, rep.max = 1;
      if (c == '{') {
        space(false);
        rep.min = text_.peek() == ',' ? 0 : count();
        space(false);
        rep.max = rep.min;
        if (text_.peek() == ',') {
          text_.advance();
          space(false);
          rep.max = text_.peek() == '}' ? kCfgUnbounded : count();
          space(false);
        }
        if (text_.peek() != '}') text_.fail("expected '}' to close the repetition, found " + cfg_found(text_));
        text_.advance();
        if (rep.max < rep.min) text_.fail("repetition {m,n} needs m <= n");
      }
      rep.children.push_back(std::move(item));
      item = std::move(rep);
    }
  }

  CfgText text_;
};

}  // namespace

std::vector<CfgRuleSource> parse_gbnf_rules(std::string_view text, const std::string& what) {
  return GbnfParser(text, what).parse();
}

std::shared_ptr<const CfgGrammar> parse_gbnf(std::string_view text, const std::string& what) {
  return build_cfg_grammar(parse_gbnf_rules(text, what), "root", what);
}

std::shared_ptr<const CfgGrammar> compile_grammar(std::string_view text, const std::string& what) {
  if (text.find("::=") != std::string_view::npos) return parse_gbnf(text, what);
  return parse_lark(text, what);
}

}  // namespace aerie
