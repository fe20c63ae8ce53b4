// The Lark subset (cfg_parse.h): vLLM's guided_grammar when the text has no "::=".
#include <cctype>

#include "core/error.h"
#include "grammar/cfg_parse.h"
#include "grammar/cfg_text.h"
#include "grammar/regex.h"

namespace aerie {
namespace {

bool is_name_start(char c) { return std::isalpha(uint8_t(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(uint8_t(c)) || c == '_'; }

class LarkParser {
 public:
  LarkParser(std::string_view text, const std::string& what) : text_(text, what) {}

  std::vector<CfgRuleSource> parse() {
    std::vector<CfgRuleSource> rules;
    for (;;) {
      space(true);
      if (text_.done()) break;
      if (text_.peek() == '%') directive();
      CfgRuleSource rule;
      rule.line = text_.line();
      if (text_.peek() == '?' || text_.peek() == '!') text_.advance();  // tree shaping only
      rule.name = name();
      if (rule.name.empty()) text_.fail("expected a rule name, found " + cfg_found(text_));
      if (text_.peek() == '{') text_.fail("rule templates (name{args}) are not supported");
      if (text_.peek() == '.') {  // a priority: it orders a lexer's or parser's choices, not what matches
        text_.advance();
        if (text_.peek() == '-') text_.advance();
        if (!std::isdigit(uint8_t(text_.peek()))) text_.fail("expected a priority number after '.', found " + cfg_found(text_));
        while (std::isdigit(uint8_t(text_.peek()))) text_.advance();
      }
      space(false);
      if (text_.peek() != ':')
        text_.fail("expected ':' after the rule name '" + rule.name + "', found " + cfg_found(text_));
      text_.advance();
      space(false);
      rule.body = alternatives(0);
      space(false);
      if (!text_.done() && text_.peek() != '\n')
        text_.fail("expected the end of rule '" + rule.name + "' (a newline), '|' or an item, found " + cfg_found(text_));
      rules.push_back(std::move(rule));
    }
    if (rules.empty()) text_.fail("the grammar is empty: expected rules such as start: \"yes\" | \"no\"");
    return rules;
  }

 private:
  void space(bool newlines) { text_.skip_space(newlines, "//"); }

  std::string name() {
    std::string out;
    if (!is_name_start(text_.peek())) return out;
    while (is_name_char(text_.peek())) out += text_.peek(), text_.advance();
    return out;
  }

  [[noreturn]] void directive() {
    text_.advance();
    const std::string which = name();
    if (which == "ignore")
      text_.fail("%ignore is not supported: this matcher reads the output byte by byte, with no lexer to drop "
                 "tokens; write the whitespace into the rules (e.g. ws: (\" \" | \"\\n\")*)");
    text_.fail("the %" + which + " directive is not supported (only rules are; %import, %declare, %override and "
               "%extend need a Lark library the grammar is resolved against)");
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
        CfgText lookahead = text_;  // a rule goes on when its next line starts with '|'
        lookahead.skip_space(true, "//");
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
      if (text_.done() || c == '|' || c == ')' || c == ']' || c == '\n' || c == '\r') break;
      if (c == '-' && text_.peek(1) == '>') {  // an alias names the tree node; it does not change what matches
        text_.advance(2);
        space(false);
        if (name().empty()) text_.fail("expected an alias name after '->', found " + cfg_found(text_));
        continue;
      }
      CfgExpr item = primary(depth);
      seq.children.push_back(postfix(std::move(item)));
    }
    return seq;
  }

  // A "string", its optional i flag, or a "a".."z" range.
  CfgExpr string_item() {
    const CfgText start = text_;
    CfgExpr seq = text_.node(CfgExpr::Kind::kSequence);
    std::vector<uint32_t> chars;
    text_.advance();
    while (text_.peek() != '"') {
      if (text_.done() || text_.peek() == '\n') text_.fail("unterminated string: expected '\"'");
      chars.push_back(text_.character("\"'/"));
    }
    text_.advance();
    if (text_.starts_with("..")) {
      text_.advance(2);
      if (text_.peek() != '"') text_.fail("expected a \"string\" after '..', found " + cfg_found(text_));
      text_.advance();
      const uint32_t hi = text_.peek() == '"' ? 0 : text_.character("\"'/");
      if (text_.peek() != '"' || chars.size() != 1)
        start.fail("a range \"a\"..\"z\" needs one character on each side");
      text_.advance();
      if (hi < chars[0]) start.fail("the range ends before it starts");
      return cfg_char(start, chars[0], hi);
    }
    const bool fold = text_.peek() == 'i' && !is_name_char(text_.peek(1));
    if (fold) text_.advance();
    if (chars.empty()) start.fail("empty strings are not allowed in Lark (leave the item out, or make it optional)");
    for (const uint32_t cp : chars) {
      CfgExpr c = cfg_char(start, cp, cp);
      if (fold && cp < 128 && std::isalpha(int(cp))) {
        const auto other = uint32_t(std::isupper(int(cp)) ? std::tolower(int(cp)) : std::toupper(int(cp)));
        c.ranges.push_back({other, other});
      }
      seq.children.push_back(std::move(c));
    }
    return seq;
  }

  // A /regex/ terminal: the pattern (regex.h, matched whole) as an expression of classes, sequences,
  // alternatives and repetitions, matched in place like any other item.
  CfgExpr regex_item() {
    const CfgText start = text_;
    text_.advance();
    const size_t begin = text_.position();
    while (text_.peek() != '/') {  // as Lark reads it, any unescaped '/' ends the pattern, even in [...]
      if (text_.done() || text_.peek() == '\n') start.fail("unterminated regular expression: expected '/'");
      if (text_.peek() == '\\' && !text_.done()) text_.advance();
      text_.advance();
    }
    const std::string_view pattern = text_.source().substr(begin, text_.position() - begin);
    text_.advance();
    if (std::isalpha(uint8_t(text_.peek())))
      text_.fail(str_cat("regular-expression flags (/.../", text_.peek(),
                         ") are not supported; write the cases into the pattern, e.g. [Aa]"));
    if (pattern.empty()) start.fail("empty regular expression //");
    RegexAst ast;
    try {
      ast = parse_regex(pattern, RegexMode::kFullMatch, RegexLimits{});
    } catch (const Error& e) {
      start.fail(e.what());
    }
    return regex_expr(start, ast, ast.root, 0);
  }

  CfgExpr regex_expr(const CfgText& at, const RegexAst& ast, uint32_t index, int depth) {
    if (depth > kCfgMaxNesting)
      at.fail(str_cat("the regular expression nests deeper than ", kCfgMaxNesting, " levels"));
    const RegexNode& n = ast.nodes[index];
    switch (n.kind) {
      case RegexNode::Kind::kEmpty: return at.node(CfgExpr::Kind::kSequence);
      case RegexNode::Kind::kSet: {
        CfgExpr c = at.node(CfgExpr::Kind::kClass);
        for (const auto& [lo, hi] : n.set) c.ranges.push_back({lo, hi});
        if (c.ranges.empty()) at.fail("the regular expression has a class that matches no character");
        return c;
      }
      case RegexNode::Kind::kConcat:
      case RegexNode::Kind::kAlternation: {
        CfgExpr e = at.node(n.kind == RegexNode::Kind::kConcat ? CfgExpr::Kind::kSequence
                                                                : CfgExpr::Kind::kAlternatives);
        for (const uint32_t child : n.children) e.children.push_back(regex_expr(at, ast, child, depth + 1));
        return e;
      }
      case RegexNode::Kind::kRepeat: {
        CfgExpr e = at.node(CfgExpr::Kind::kRepeat);
        e.min = n.min;
        e.max = n.max == kRegexUnboundedLength ? kCfgUnbounded : n.max;
        e.children.push_back(regex_expr(at, ast, n.children[0], depth + 1));
        return e;
      }
    }
    at.fail("unknown regular-expression node");
  }

  CfgExpr primary(int depth) {
    const char c = text_.peek();
    if (c == '"') return string_item();
    if (c == '/') return regex_item();
    if (c == '\'') text_.fail("strings take double quotes in Lark: \"...\"");
    if (c == '(' || c == '[') {
      const int line = text_.line(), column = text_.column();
      const char close = c == '(' ? ')' : ']';
      if (depth + 1 > kCfgMaxNesting) text_.fail(str_cat("groups nest deeper than ", kCfgMaxNesting, " levels"));
      CfgExpr optional = text_.node(CfgExpr::Kind::kRepeat);
      text_.advance();
      space(true);
      CfgExpr group = alternatives(depth + 1);
      space(true);
      if (text_.peek() != close)
        text_.fail(str_cat("expected '", close, "' to close the group opened at line ", line, ", column ", column,
                           ", found ", cfg_found(text_)));
      text_.advance();
      if (c == '(') return group;
      optional.min = 0;  // [item] is item?
      optional.max = 1;
      optional.children.push_back(std::move(group));
      return optional;
    }
    if (is_name_start(c)) {
      CfgExpr ref = text_.node(CfgExpr::Kind::kRule);
      ref.name = name();
      return ref;
    }
    text_.fail("expected an item (a \"string\", a rule or terminal name, '(' or '['), found " + cfg_found(text_));
  }

  uint32_t count() {
    if (!std::isdigit(uint8_t(text_.peek()))) text_.fail("expected a number after '~', found " + cfg_found(text_));
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
      space(false);
      const char c = text_.peek();
      if (c != '*' && c != '+' && c != '?' && c != '~') return item;
      // Each operator nests the item once more (and lowering recurses through the nesting).
      if (n == kCfgMaxNesting) text_.fail(str_cat("more than ", kCfgMaxNesting, " repetition operators on one item"));
      CfgExpr rep = text_.node(CfgExpr::Kind::kRepeat);
      text_.advance();
      if (c == '*') rep.min = 0, rep.max = kCfgUnbounded;
      if (c == '+') rep.min = 1, rep.max = kCfgUnbounded;
      if (c == '?') rep.min = 0, rep.max = 1;
      if (c == '~') {  // item ~ n, item ~ n..m
        space(false);
        rep.min = rep.max = count();
        if (text_.starts_with("..")) {
          text_.advance(2);
          rep.max = count();
          if (rep.max < rep.min) text_.fail("repetition ~ n..m needs n <= m");
        }
      }
      rep.children.push_back(std::move(item));
      item = std::move(rep);
    }
  }

  CfgText text_;
};

}  // namespace

std::vector<CfgRuleSource> parse_lark_rules(std::string_view text, const std::string& what) {
  return LarkParser(text, what).parse();
}

std::shared_ptr<const CfgGrammar> parse_lark(std::string_view text, const std::string& what) {
  return build_cfg_grammar(parse_lark_rules(text, what), "start", what);
}

}  // namespace aerie
