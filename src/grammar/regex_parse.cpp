// The ECMAScript pattern parser (regex.h): pattern text -> RegexAst over code points. A recursive descent
// over the grammar of ECMA-262 22.2.1 (Disjunction / Alternative / Term / Atom / ClassRanges), refusing by
// name what the automaton cannot express.
#include <algorithm>

#include "core/error.h"
#include "grammar/regex.h"

namespace aerie {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

RegexRanges normalise(RegexRanges r) {
  std::sort(r.begin(), r.end());
  RegexRanges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) out.back().second = std::max(out.back().second, hi);
    else out.emplace_back(lo, hi);
  }
  return out;
}

// The code points UTF-8 can encode that are not in r.
RegexRanges complement(const RegexRanges& r) {
  RegexRanges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  RegexRanges without_surrogates;
  for (const auto& [lo, hi] : out) {
    if (lo < 0xD800 && hi >= 0xD800) {
      without_surrogates.emplace_back(lo, 0xD7FF);
      if (hi > 0xDFFF) without_surrogates.emplace_back(0xE000, hi);
    } else if (lo >= 0xD800 && lo <= 0xDFFF) {
      if (hi > 0xDFFF) without_surrogates.emplace_back(0xE000, hi);
    } else {
      without_surrogates.emplace_back(lo, hi);
    }
  }
  return without_surrogates;
}

const RegexRanges kDigit = {{'0', '9'}};
const RegexRanges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
// ECMAScript's WhiteSpace and LineTerminator code points (ECMA-262 12.2, 12.3; Unicode Zs).
const RegexRanges kSpace = normalise({{'\t', '\r'},
                                      {' ', ' '},
                                      {0xA0, 0xA0},
                                      {0x1680, 0x1680},
                                      {0x2000, 0x200A},
                                      {0x2028, 0x2029},
                                      {0x202F, 0x202F},
                                      {0x205F, 0x205F},
                                      {0x3000, 0x3000},
                                      {0xFEFF, 0xFEFF}});
const RegexRanges kLineTerminators = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};

bool is_syntax_character(uint32_t c) {
  return c < 0x80 && std::string_view("^$\\.*+?()[]{}|/").find(char(c)) != std::string_view::npos;
}
bool is_ascii_alnum(uint32_t c) { return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); }
int hex_value(uint32_t c) {
  if (c >= '0' && c <= '9') return int(c - '0');
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return int((c | 0x20) - 'a' + 10);
  return -1;
}

class Parser {
 public:
  Parser(std::string_view pattern, RegexMode mode, const RegexLimits& limits)
      : pattern_(pattern), mode_(mode), limits_(limits) {
    decode();
  }

  RegexAst parse() {
    ast_.nodes.emplace_back();  // the root, filled below
    std::vector<uint32_t> alternatives;
    for (;;) {
      alternatives.push_back(top_alternative());
      if (at_end()) break;
      if (peek() == '|') {
        ++pos_;
        continue;
      }
      fail(peek() == ')' ? "unmatched ')'" : "unexpected character");
    }
    RegexNode root;
    root.kind = RegexNode::Kind::kAlternation;
    root.children = std::move(alternatives);
    ast_.nodes[0] = std::move(root);
    return std::move(ast_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    const size_t offset = pos_ < offsets_.size() ? offsets_[pos_] : pattern_.size();
    std::string shown(pattern_.substr(0, 200));
    if (pattern_.size() > 200) shown += "...";
    throw_error(str_cat("regex /", shown, "/: ", what, " (at byte ", offset, ")"));
  }

  // The pattern as code points (it is UTF-8 text), with each one's byte offset for messages.
  void decode() {
    if (pattern_.size() > limits_.max_pattern_bytes) fail(str_cat("longer than ", limits_.max_pattern_bytes, " bytes"));
    for (size_t i = 0; i < pattern_.size();) {
      const auto b = uint8_t(pattern_[i]);
      const int n = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
      uint32_t cp = n == 1 ? b : n == 2 ? b & 0x1F : n == 3 ? b & 0x0F : b & 0x07;
      bool ok = n > 0 && i + size_t(n) <= pattern_.size();
      for (int k = 1; ok && k < n; ++k) {
        const auto c = uint8_t(pattern_[i + size_t(k)]);
        ok = (c & 0xC0) == 0x80;
        cp = (cp << 6) | (c & 0x3F);
      }
      if (!ok) {
        pos_ = code_points_.size();
        offsets_.push_back(i);
        fail("not valid UTF-8");
      }
      code_points_.push_back(cp);
      offsets_.push_back(i);
      i += size_t(n);
    }
  }

  bool at_end() const { return pos_ >= code_points_.size(); }
  uint32_t peek(size_t ahead = 0) const { return pos_ + ahead < code_points_.size() ? code_points_[pos_ + ahead] : 0; }
  bool has(size_t ahead) const { return pos_ + ahead < code_points_.size(); }

  uint32_t add(RegexNode node) {
    ast_.nodes.push_back(std::move(node));
    return uint32_t(ast_.nodes.size() - 1);
  }
  uint32_t add_set(RegexRanges set) {
    RegexNode n;
    n.kind = RegexNode::Kind::kSet;
    n.set = std::move(set);
    return add(std::move(n));
  }
  uint32_t any_text() {  // [\s\S]*: what an unpinned end of a search pattern may skip
    RegexNode star;
    star.kind = RegexNode::Kind::kRepeat;
    star.children = {add_set(regex_any_code_point())};
    star.min = 0;
    star.max = kRegexUnboundedLength;
    return add(std::move(star));
  }

  // A top-level alternative: the only place ^ (first) and $ (last) may stand.
  uint32_t top_alternative() {
    bool pinned_start = false, pinned_end = false;
    if (has(0) && peek() == '^') {
      pinned_start = true;
      ++pos_;
    }
    RegexNode concat;
    concat.kind = RegexNode::Kind::kConcat;
    if (mode_ == RegexMode::kSearch && !pinned_start) concat.children.push_back(any_text());
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        ++pos_;
        if (!at_end() && peek() != '|')
          fail("'$' is supported only at the end of the pattern or of a top-level alternative");
        pinned_end = true;
        break;
      }
      concat.children.push_back(term());
    }
    if (mode_ == RegexMode::kSearch && !pinned_end) concat.children.push_back(any_text());
    return add(std::move(concat));
  }

  uint32_t disjunction() {  // inside a group
    RegexNode alternation;
    alternation.kind = RegexNode::Kind::kAlternation;
    for (;;) {
      RegexNode concat;
      concat.kind = RegexNode::Kind::kConcat;
      while (!at_end() && peek() != '|' && peek() != ')') concat.children.push_back(term());
      alternation.children.push_back(add(std::move(concat)));
      if (at_end() || peek() != '|') break;
      ++pos_;
    }
    return add(std::move(alternation));
  }

  uint32_t term() {
    const uint32_t c = peek();
    if (c == '^' || c == '$')
      fail(str_cat("'", char(c),
                   "' is supported only at the start ('^') or end ('$') of the pattern or of a top-level alternative"));
    if (c == '*' || c == '+' || c == '?') fail("nothing to repeat");
    if (c == '{' && quantifier_ahead()) fail("nothing to repeat");
    const uint32_t a = atom();
    return quantified(a);
  }

  // Whether a `{` at pos_ starts a {n}, {n,} or {n,m} quantifier (otherwise it is a literal, Annex B).
  bool quantifier_ahead() const {
    size_t i = 1;
    auto digits = [&]() {
      const size_t start = i;
      while (has(i) && peek(i) >= '0' && peek(i) <= '9') ++i;
      return i > start;
    };
    if (!digits()) return false;
    if (has(i) && peek(i) == ',') {
      ++i;
      digits();
    }
    return has(i) && peek(i) == '}';
  }

  uint32_t read_count() {
    uint64_t n = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      n = std::min<uint64_t>(n * 10 + (peek() - '0'), uint64_t(1) << 40);
      ++pos_;
    }
    if (n > limits_.max_repeat) fail(str_cat("repetition count ", n, " is above the limit of ", limits_.max_repeat));
    return uint32_t(n);
  }

  uint32_t quantified(uint32_t atom_node) {
    if (at_end()) return atom_node;
    uint32_t min = 0, max = 0;
    const uint32_t c = peek();
    if (c == '*') min = 0, max = kRegexUnboundedLength, ++pos_;
    else if (c == '+') min = 1, max = kRegexUnboundedLength, ++pos_;
    else if (c == '?') min = 0, max = 1, ++pos_;
    else if (c == '{' && quantifier_ahead()) {
      ++pos_;
      min = max = read_count();
      if (peek() == ',') {
        ++pos_;
        max = peek() == '}' ? kRegexUnboundedLength : read_count();
      }
      ++pos_;  // '}'
      if (max < min) fail("numbers out of order in {n,m} quantifier");
    } else {
      return atom_node;
    }
    if (!at_end() && peek() == '?') ++pos_;  // lazy: the same language
    if (!at_end() && (peek() == '*' || peek() == '+' || peek() == '?' || (peek() == '{' && quantifier_ahead())))
      fail("nothing to repeat (a quantifier after a quantifier)");
    RegexNode repeat;
    repeat.kind = RegexNode::Kind::kRepeat;
    repeat.children = {atom_node};
    repeat.min = min;
    repeat.max = max;
    return add(std::move(repeat));
  }

  uint32_t atom() {
    const uint32_t c = peek();
    ++pos_;
    switch (c) {
      case '.': return add_set(complement(kLineTerminators));
      case '(': return group();
      case '[': return add_set(character_class());
      case '\\': return atom_escape();
      case ')': fail("unmatched ')'");
      default: return add_set({{c, c}});
    }
  }

  uint32_t group() {
    if (!at_end() && peek() == '?') {
      const uint32_t kind = peek(1);
      if (kind == ':') {
        pos_ += 2;
      } else if (kind == '=' || kind == '!') {
        fail("lookahead assertions ((?= and (?!) are not supported");
      } else if (kind == '<' && (peek(2) == '=' || peek(2) == '!')) {
        fail("lookbehind assertions ((?<= and (?<!) are not supported");
      } else if (kind == '<') {
        pos_ += 2;
        while (!at_end() && peek() != '>') {
          if (!(is_ascii_alnum(peek()) || peek() == '_' || peek() == '$' || peek() >= 0x80)) fail("bad group name");
          ++pos_;
        }
        if (at_end()) fail("unterminated group name");
        ++pos_;
      } else {
        fail("inline flags and other (? groups are not supported (only (?: and (?<name>)");
      }
    }
    const uint32_t inner = disjunction();
    if (at_end() || peek() != ')') fail("missing ')'");
    ++pos_;
    return inner;
  }

  // \ at pos_ - 1, outside a class.
  uint32_t atom_escape() {
    if (at_end()) fail("'\\' at the end of the pattern");
    const uint32_t c = peek();
    if (c == 'b' || c == 'B') fail(str_cat("word-boundary assertions (\\", char(c), ") are not supported"));
    if (c >= '1' && c <= '9') fail("backreferences (\\1 ...) are not supported");
    if (c == 'k') fail("named backreferences (\\k<name>) are not supported");
    RegexRanges set;
    if (class_escape(set)) return add_set(std::move(set));
    const uint32_t cp = character_escape(false);
    return add_set({{cp, cp}});
  }

  // \d \D \w \W \s \S at pos_ (after the '\'): consumes it and fills `set`.
  bool class_escape(RegexRanges& set) {
    const uint32_t c = peek();
    if (c == 'p' || c == 'P') fail(str_cat("Unicode property escapes (\\", char(c), "{...}) are not supported"));
    const RegexRanges* base = c == 'd' || c == 'D'   ? &kDigit
                              : c == 'w' || c == 'W' ? &kWord
                              : c == 's' || c == 'S' ? &kSpace
                                                     : nullptr;
    if (!base) return false;
    ++pos_;
    set = (c == 'd' || c == 'w' || c == 's') ? *base : complement(*base);
    return true;
  }

  uint32_t hex_digits(size_t n) {
    uint32_t v = 0;
    for (size_t i = 0; i < n; ++i) {
      const int h = hex_value(peek());
      if (at_end() || h < 0) fail("bad hexadecimal escape");
      v = v * 16 + uint32_t(h);
      ++pos_;
    }
    return v;
  }

  // A character escape at pos_ (after the '\'); in_class: \b is backspace and \- a hyphen.
  uint32_t character_escape(bool in_class) {
    const uint32_t c = peek();
    ++pos_;
    switch (c) {
      case 't': return '\t';
      case 'n': return '\n';
      case 'v': return '\v';
      case 'f': return '\f';
      case 'r': return '\r';
      case '0':
        if (!at_end() && peek() >= '0' && peek() <= '9') fail("octal escapes are not supported");
        return 0;
      case 'c': {
        const uint32_t letter = peek();
        if (at_end() || (letter | 0x20) < 'a' || (letter | 0x20) > 'z') fail("bad control escape (\\c needs a letter)");
        ++pos_;
        return letter % 32;
      }
      case 'x': return hex_digits(2);
      case 'u': return unicode_escape();
      case 'b':
        if (in_class) return 0x08;
        break;
      case '-':
        if (in_class) return '-';
        break;
      default: break;
    }
    if (is_syntax_character(c) || !is_ascii_alnum(c)) return c;  // identity escape
    --pos_;
    fail(str_cat("unknown escape \\", c < 0x80 ? std::string(1, char(c)) : "(non-ASCII)"));
  }

  uint32_t unicode_escape() {
    if (!at_end() && peek() == '{') {
      ++pos_;
      uint32_t v = 0;
      size_t n = 0;
      while (!at_end() && peek() != '}') {
        const int h = hex_value(peek());
        if (h < 0) fail("bad \\u{...} escape");
        v = v * 16 + uint32_t(h);
        if (v > kMaxCodePoint) fail("\\u{...} escape above U+10FFFF");
        ++pos_, ++n;
      }
      if (at_end() || n == 0) fail("bad \\u{...} escape");
      ++pos_;
      return v;
    }
    const uint32_t unit = hex_digits(4);
    // A high surrogate escape followed by a low one is one astral code point (UTF-16 source text).
    if (unit >= 0xD800 && unit <= 0xDBFF && peek() == '\\' && peek(1) == 'u' && has(5)) {
      uint32_t low = 0;
      bool all_hex = true;
      for (size_t i = 2; i < 6; ++i) {
        const int h = hex_value(peek(i));
        all_hex = all_hex && h >= 0;
        low = low * 16 + uint32_t(std::max(h, 0));
      }
      if (all_hex && low >= 0xDC00 && low <= 0xDFFF) {
        pos_ += 6;
        return 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
      }
    }
    return unit;  // a lone surrogate matches nothing (see regex.h)
  }

  // After '[': the class's code points.
  RegexRanges character_class() {
    bool negated = false;
    if (!at_end() && peek() == '^') negated = true, ++pos_;
    RegexRanges set;
    while (!at_end() && peek() != ']') {
      RegexRanges escape_set;
      bool lo_is_set = false;
      const uint32_t lo = class_atom(escape_set, lo_is_set);
      if (!at_end() && peek() == '-' && has(1) && peek(1) != ']') {
        ++pos_;
        RegexRanges hi_set;
        bool hi_is_set = false;
        const uint32_t hi = class_atom(hi_set, hi_is_set);
        if (lo_is_set || hi_is_set) fail("a class escape (\\d, \\w, \\s ...) cannot be the end of a range");
        if (hi < lo) fail("range out of order in character class");
        set.emplace_back(lo, hi);
        continue;
      }
      if (lo_is_set) set.insert(set.end(), escape_set.begin(), escape_set.end());
      else set.emplace_back(lo, lo);
    }
    if (at_end()) fail("missing ']'");
    ++pos_;
    set = normalise(std::move(set));
    return negated ? complement(set) : clip_surrogates(set);
  }

  static RegexRanges clip_surrogates(const RegexRanges& set) { return complement(complement(set)); }

  uint32_t class_atom(RegexRanges& set, bool& is_set) {
    const uint32_t c = peek();
    ++pos_;
    if (c != '\\') return c;
    if (at_end()) fail("'\\' at the end of the pattern");
    if (peek() >= '1' && peek() <= '9') fail("backreferences (\\1 ...) are not supported");
    if (class_escape(set)) {
      is_set = true;
      return 0;
    }
    return character_escape(true);
  }

  std::string_view pattern_;
  RegexMode mode_;
  const RegexLimits& limits_;
  std::vector<uint32_t> code_points_;
  std::vector<size_t> offsets_;
  size_t pos_ = 0;
  RegexAst ast_;
};

}  // namespace

const RegexRanges& regex_any_code_point() {
  static const RegexRanges kAny = {{0, 0xD7FF}, {0xE000, kMaxCodePoint}};
  return kAny;
}

RegexAst parse_regex(std::string_view pattern, RegexMode mode, const RegexLimits& limits) {
  return Parser(pattern, mode, limits).parse();
}

}  // namespace aerie
