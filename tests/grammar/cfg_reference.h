// Independent references for the grammar matcher's tests:
// - ast_matches: whole-string membership straight from the parser's expression tree (a memoised
//   recogniser over code points that tries every split), which checks the lowering to the IR too;
// - EarleyReference: an Earley recogniser over the lowered IR, a chart algorithm with nothing in common
//   with the matcher's stacks, for which a prefix can be continued exactly when its last set is not empty.
// Both read UTF-8 and refuse malformed input. Small inputs only (they are cubic or worse).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "grammar/cfg_grammar.h"

namespace aerie::testing {

// Code points of well-formed UTF-8, or nothing (bytes past the last whole character go to `rest`).
inline std::optional<std::vector<uint32_t>> decode_utf8(const std::string& s, std::string* rest = nullptr) {
  std::vector<uint32_t> out;
  size_t i = 0;
  while (i < s.size()) {
    const auto b = uint8_t(s[i]);
    const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0) return std::nullopt;
    if (i + size_t(n) > s.size()) {
      if (!rest) return std::nullopt;
      *rest = s.substr(i);
      return out;
    }
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto c = uint8_t(s[i + size_t(k)]);
      if ((c & 0xC0) != 0x80) return std::nullopt;
      cp = cp << 6 | (c & 0x3F);
    }
    const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
    out.push_back(cp);
    i += size_t(n);
  }
  if (rest) rest->clear();
  return out;
}

// Whole-string membership from the expression tree: rules by name, `start` the start rule.
inline bool ast_matches(const std::vector<CfgRuleSource>& rules, const std::string& start, const std::string& text) {
  const auto cps = decode_utf8(text);
  if (!cps) return false;
  std::map<std::string, const CfgExpr*> by_name;
  for (const auto& r : rules) by_name[r.name] = &r.body;
  std::map<std::tuple<const void*, size_t, size_t, uint32_t>, bool> memo;
  std::function<bool(const CfgExpr&, size_t, size_t)> match;
  // children[k..] of a sequence derive [i, j).
  std::function<bool(const CfgExpr&, size_t, size_t, size_t)> seq = [&](const CfgExpr& e, size_t k, size_t i, size_t j) {
    if (k == e.children.size()) return i == j;
    for (size_t m = i; m <= j; ++m)
      if (match(e.children[k], i, m) && seq(e, k + 1, m, j)) return true;
    return false;
  };
  // `count` copies of the item so far; the rest derive [i, j).
  std::function<bool(const CfgExpr&, uint32_t, size_t, size_t)> rep = [&](const CfgExpr& e, uint32_t count, size_t i,
                                                                             size_t j) {
    const auto key = std::make_tuple((const void*)&e, i, j, count + 1);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    memo[key] = false;
    bool ok = i == j && count >= e.min;
    if (!ok && (e.max == kCfgUnbounded || count < e.max))
      for (size_t m = (count < e.min ? i : i + 1); m <= j && !ok; ++m)
        ok = match(e.children[0], i, m) && rep(e, count + 1, m, j);
    return memo[key] = ok;
  };
  match = [&](const CfgExpr& e, size_t i, size_t j) -> bool {
    const auto key = std::make_tuple((const void*)&e, i, j, 0u);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    memo[key] = false;  // a cycle at the same span would be left recursion, which the compiler refuses
    bool ok = false;
    switch (e.kind) {
      case CfgExpr::Kind::kSequence: ok = seq(e, 0, i, j); break;
      case CfgExpr::Kind::kAlternatives:
        for (const CfgExpr& c : e.children) ok = ok || match(c, i, j);
        break;
      case CfgExpr::Kind::kClass:
        if (j == i + 1) {
          const uint32_t cp = (*cps)[i];
          if (cp < 0xD800 || cp > 0xDFFF)
            for (const CfgRange& r : e.ranges) ok = ok || (cp >= r.lo && cp <= r.hi);
        }
        break;
      case CfgExpr::Kind::kRule: ok = match(*by_name.at(e.name), i, j); break;
      case CfgExpr::Kind::kRepeat: ok = rep(e, 0, i, j); break;
    }
    return memo[key] = ok;
  };
  return match(*by_name.at(start), 0, cps->size());
}

// Earley over the IR, one set per code point. feed() a whole character at a time.
class EarleyReference {
 public:
  explicit EarleyReference(const CfgGrammar& g) : g_(g), nullable_(g.rules.size(), 0) {
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < g.rules.size(); ++r)
        for (uint32_t a = 0; a < g.rules[r].count && !nullable_[r]; ++a) {
          bool all = true;
          for (uint32_t p = g.alternatives[g.rules[r].first + a]; g.elements[p].kind != CfgElementKind::kEnd; ++p)
            all = all && g.elements[p].kind == CfgElementKind::kRule && nullable_[g.elements[p].index];
          if (all) nullable_[r] = 1, changed = true;
        }
    }
    sets_.emplace_back();
    predict(g.root, 0);
    close(0);
  }

  // Moves past one code point; false when the set after it is empty (the prefix cannot go on).
  bool feed(uint32_t cp) {
    const size_t i = sets_.size() - 1;
    sets_.emplace_back();
    for (const Item& it : std::vector<Item>(sets_[i].begin(), sets_[i].end())) {
      const CfgElement& e = g_.elements[it.pos];
      if (e.kind == CfgElementKind::kTerminal && contains(e.index, cp)) add(i + 1, {it.rule, it.pos + 1, it.origin});
    }
    close(i + 1);
    return !sets_.back().empty();
  }
  bool alive() const { return !sets_.back().empty(); }
  bool accepting() const {
    for (const Item& it : sets_.back())
      if (it.rule == g_.root && it.origin == 0 && g_.elements[it.pos].kind == CfgElementKind::kEnd) return true;
    return false;
  }
  // Some item waits for a character of a class containing a code point in [lo, hi].
  bool expects(uint32_t lo, uint32_t hi) const {
    for (const Item& it : sets_.back()) {
      const CfgElement& e = g_.elements[it.pos];
      if (e.kind != CfgElementKind::kTerminal) continue;
      const CfgClass& c = g_.classes[e.index];
      for (uint32_t k = 0; k < c.count; ++k)
        if (g_.ranges[c.first + k].lo <= hi && g_.ranges[c.first + k].hi >= lo) return true;
    }
    return false;
  }

 private:
  struct Item {
    uint32_t rule, pos;
    size_t origin;
    bool operator<(const Item& o) const { return std::tie(rule, pos, origin) < std::tie(o.rule, o.pos, o.origin); }
  };
  bool contains(uint32_t cls, uint32_t cp) const {
    const CfgClass& c = g_.classes[cls];
    for (uint32_t k = 0; k < c.count; ++k)
      if (cp >= g_.ranges[c.first + k].lo && cp <= g_.ranges[c.first + k].hi) return true;
    return false;
  }
  void add(size_t i, Item it) {
    if (sets_[i].insert(it).second) pending_.push_back(it);
  }
  void predict(uint32_t rule, size_t i) {
    for (uint32_t a = 0; a < g_.rules[rule].count; ++a) add(i, {rule, g_.alternatives[g_.rules[rule].first + a], i});
  }
  // Prediction and completion to a fixpoint (a nullable rule is also stepped over when predicted).
  void close(size_t i) {
    for (const Item& it : sets_[i]) pending_.push_back(it);
    while (!pending_.empty()) {
      const Item it = pending_.back();
      pending_.pop_back();
      const CfgElement& e = g_.elements[it.pos];
      if (e.kind == CfgElementKind::kRule) {
        predict(e.index, i);
        if (nullable_[e.index]) add(i, {it.rule, it.pos + 1, it.origin});
      } else if (e.kind == CfgElementKind::kEnd) {
        for (const Item& w : std::vector<Item>(sets_[it.origin].begin(), sets_[it.origin].end())) {
          const CfgElement& we = g_.elements[w.pos];
          if (we.kind == CfgElementKind::kRule && we.index == it.rule) add(i, {w.rule, w.pos + 1, w.origin});
        }
      }
    }
  }

  const CfgGrammar& g_;
  std::vector<uint8_t> nullable_;
  std::vector<std::set<Item>> sets_;
  std::vector<Item> pending_;
};

// Whether `bytes` can be continued to a string of the grammar (exactly, for whole characters; a trailing
// partial character counts when some expected class has a code point whose UTF-8 starts with it).
inline bool earley_viable(const CfgGrammar& g, const std::string& bytes, bool* accepting = nullptr,
                          bool* can_continue = nullptr) {
  std::string rest;
  const auto cps = decode_utf8(bytes, &rest);
  if (!cps) return false;
  EarleyReference e(g);
  for (uint32_t cp : *cps)
    if (!e.feed(cp)) return false;
  if (accepting) *accepting = rest.empty() && e.accepting();
  if (can_continue) *can_continue = e.expects(0, 0x10FFFF);
  if (rest.empty()) return true;
  // The code points whose UTF-8 starts with `rest`: pad with the smallest and largest continuation bits.
  const auto b = uint8_t(rest[0]);
  const int n = (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0) return false;
  uint32_t lo = b & (0x7F >> n), hi = lo;
  for (int k = 1; k < n; ++k) {
    if (size_t(k) < rest.size()) {
      const auto c = uint8_t(rest[size_t(k)]);
      if ((c & 0xC0) != 0x80) return false;
      lo = lo << 6 | (c & 0x3F), hi = hi << 6 | (c & 0x3F);
    } else {
      lo = lo << 6, hi = hi << 6 | 0x3F;
    }
  }
  const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
  lo = std::max(lo, min[n]);
  hi = std::min<uint32_t>(hi, n == 2 ? 0x7FF : n == 3 ? 0xFFFF : 0x10FFFF);
  if (lo > hi) return false;
  // Surrogates cannot be encoded; classes never hold them, so the overlap test below needs no cut.
  if (can_continue) *can_continue = true;
  return e.expects(lo, hi);
}

}  // namespace aerie::testing
