#include "grammar/cfg_grammar.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/error.h"

namespace aerie {

bool CfgGrammar::class_intersects(uint32_t c, uint32_t lo, uint32_t hi) const {
  const CfgClass& cls = classes[c];
  const CfgRange* first = ranges.data() + cls.first;
  const CfgRange* last = first + cls.count;
  // The first range that ends at or after lo; it meets [lo, hi] when it starts at or before hi.
  const CfgRange* r = std::lower_bound(first, last, lo, [](const CfgRange& a, uint32_t v) { return a.hi < v; });
  return r != last && r->lo <= hi;
}

namespace {

using Alternative = std::vector<CfgElement>;

// Sorted, merged, clipped to U+0000-U+10FFFF, with the surrogates cut out.
std::vector<CfgRange> normalise(std::vector<CfgRange> in) {
  std::vector<CfgRange> clipped;
  for (CfgRange r : in) {
    r.hi = std::min(r.hi, kCfgMaxCodePoint);
    if (r.lo > r.hi) continue;
    if (r.lo < 0xD800 && r.hi > 0xDFFF) {
      clipped.push_back({r.lo, 0xD7FF});
      clipped.push_back({0xE000, r.hi});
    } else if (r.lo >= 0xD800 && r.hi <= 0xDFFF) {
      continue;
    } else if (r.lo >= 0xD800 && r.lo <= 0xDFFF) {
      clipped.push_back({0xE000, r.hi});
    } else if (r.hi >= 0xD800 && r.hi <= 0xDFFF) {
      clipped.push_back({r.lo, 0xD7FF});
    } else {
      clipped.push_back(r);
    }
  }
  std::sort(clipped.begin(), clipped.end(), [](const CfgRange& a, const CfgRange& b) { return a.lo < b.lo; });
  std::vector<CfgRange> out;
  for (const CfgRange& r : clipped) {
    if (!out.empty() && r.lo <= out.back().hi + 1) out.back().hi = std::max(out.back().hi, r.hi);
    else out.push_back(r);
  }
  return out;
}

class Lowering {
 public:
  explicit Lowering(std::string what) : what_(std::move(what)) {}

  std::shared_ptr<const CfgGrammar> run(const std::vector<CfgRuleSource>& sources, const std::string& start) {
    for (const CfgRuleSource& s : sources) {
      const auto [it, fresh] = index_.emplace(s.name, uint32_t(names_.size()));
      AERIE_CHECK(fresh, what_, ": rule '", s.name, "' is defined twice (line ", lines_[it->second], " and line ",
                  s.line, ")");
      names_.push_back(s.name);
      lines_.push_back(s.line);
      bodies_.emplace_back();
    }
    AERIE_CHECK(!sources.empty(), what_, ": the grammar defines no rules");
    const auto root = index_.find(start);
    AERIE_CHECK(root != index_.end(), what_, ": the grammar has no start rule '", start, "'");
    for (size_t r = 0; r < sources.size(); ++r) {
      current_ = uint32_t(r);
      bodies_[r] = lower_alternatives(sources[r].body);
    }
    grammar_.root = root->second;
    analyse();
    flatten();
    return std::make_shared<const CfgGrammar>(std::move(grammar_));
  }

 private:
  [[noreturn]] void fail_at(const CfgExpr& e, const std::string& message) const {
    throw_error(str_cat(what_, ": line ", e.line, ", column ", e.column, ": ", message));
  }

  uint32_t new_rule() {
    AERIE_CHECK(names_.size() < kCfgMaxRules, what_, ": more than ", kCfgMaxRules,
                " rules after expanding groups and repetitions");
    names_.push_back(names_[current_] + "-" + std::to_string(++helpers_));
    lines_.push_back(lines_[current_]);
    bodies_.emplace_back();
    return uint32_t(names_.size() - 1);
  }

  void count(size_t n) {
    n_elements_ += n;
    AERIE_CHECK(n_elements_ <= kCfgMaxElements, what_, ": more than ", kCfgMaxElements,
                " elements after expanding repetitions (rule '", names_[current_], "')");
  }

  uint32_t class_of(const CfgExpr& e) {
    std::vector<CfgRange> ranges = normalise(e.ranges);
    if (ranges.empty()) fail_at(e, "the character class matches no character");
    std::vector<std::pair<uint32_t, uint32_t>> key;
    for (const CfgRange& r : ranges) key.emplace_back(r.lo, r.hi);
    const auto [it, fresh] = classes_.emplace(std::move(key), uint32_t(grammar_.classes.size()));
    if (!fresh) return it->second;
    CfgClass c;
    c.first = uint32_t(grammar_.ranges.size());
    c.count = uint32_t(ranges.size());
    for (const CfgRange& r : ranges)
      for (uint32_t cp = r.lo; cp <= std::min<uint32_t>(r.hi, 127); ++cp) c.ascii[cp / 64] |= uint64_t(1) << (cp % 64);
    grammar_.ranges.insert(grammar_.ranges.end(), ranges.begin(), ranges.end());
    grammar_.classes.push_back(c);
    return it->second;
  }

  std::vector<Alternative> lower_alternatives(const CfgExpr& e) {
    std::vector<Alternative> out;
    if (e.kind == CfgExpr::Kind::kAlternatives) {
      for (const CfgExpr& child : e.children) lower_sequence(child, out.emplace_back());
    } else {
      lower_sequence(e, out.emplace_back());
    }
    return out;
  }

  void lower_sequence(const CfgExpr& e, Alternative& out) {
    switch (e.kind) {
      case CfgExpr::Kind::kSequence:
        for (const CfgExpr& child : e.children) lower_sequence(child, out);
        return;
      case CfgExpr::Kind::kClass:
        count(1);
        out.push_back({CfgElementKind::kTerminal, class_of(e)});
        return;
      case CfgExpr::Kind::kRule: {
        const auto it = index_.find(e.name);
        if (it == index_.end()) fail_at(e, "undefined rule '" + e.name + "'");
        count(1);
        out.push_back({CfgElementKind::kRule, it->second});
        return;
      }
      case CfgExpr::Kind::kAlternatives: {
        if (e.children.size() == 1) return lower_sequence(e.children[0], out);
        const uint32_t helper = new_rule();
        bodies_[helper] = lower_alternatives(e);
        count(1);
        out.push_back({CfgElementKind::kRule, helper});
        return;
      }
      case CfgExpr::Kind::kRepeat:
        return lower_repeat(e, out);
    }
  }

  // One element standing for the repeated item: itself when it lowers to one element, else a helper rule.
  CfgElement item_of(const CfgExpr& item) {
    Alternative body;
    lower_sequence(item, body);
    if (body.size() == 1) return body[0];
    const uint32_t helper = new_rule();
    bodies_[helper].push_back(std::move(body));
    return {CfgElementKind::kRule, helper};
  }

  void lower_repeat(const CfgExpr& e, Alternative& out) {
    if (e.min > kCfgMaxRepetition || (e.max != kCfgUnbounded && e.max > kCfgMaxRepetition))
      fail_at(e, "repetition counts above " + std::to_string(kCfgMaxRepetition) + " are not supported");
    if (e.max != kCfgUnbounded && e.max < e.min) fail_at(e, "repetition {m,n} needs m <= n");
    const CfgElement item = item_of(e.children[0]);
    if (e.max == kCfgUnbounded || e.max > 1) repeats_.push_back({item, &e});
    count(e.min);
    for (uint32_t i = 0; i < e.min; ++i) out.push_back(item);
    if (e.max == kCfgUnbounded) {
      const uint32_t star = new_rule();
      count(3);
      bodies_[star] = {{item, {CfgElementKind::kRule, star}}, {}};
      out.push_back({CfgElementKind::kRule, star});
      return;
    }
    // O_k ::= item O_(k-1) | "", O_1 ::= item | "".
    uint32_t previous = 0;
    for (uint32_t k = 1; k <= e.max - e.min; ++k) {
      const uint32_t optional = new_rule();
      count(3);
      if (k == 1) bodies_[optional] = {{item}, {}};
      else bodies_[optional] = {{item, {CfgElementKind::kRule, previous}}, {}};
      previous = optional;
    }
    if (e.max > e.min) {
      count(1);
      out.push_back({CfgElementKind::kRule, previous});
    }
  }

  bool nullable(const CfgElement& e) const { return e.kind == CfgElementKind::kRule && nullable_[e.index]; }

  // Nullable and productive rules by worklists, linear in the grammar's size (a fixpoint that sweeps all
  // rules until nothing changes is quadratic on a long chain of rules defined in the wrong order).
  // waiting[a]: the elements of alternative a that do not yet have the property (a terminal never does).
  std::vector<uint8_t> solve(bool nullable_property) const {
    const size_t n = bodies_.size();
    std::vector<uint8_t> has(n, 0);
    std::vector<uint32_t> rule_of, waiting;
    std::vector<std::vector<uint32_t>> uses(n);  // per rule: the alternatives referring to it, per reference
    std::vector<uint32_t> ready;
    for (size_t r = 0; r < n; ++r)
      for (const Alternative& alt : bodies_[r]) {
        const auto a = uint32_t(waiting.size());
        rule_of.push_back(uint32_t(r));
        uint32_t count = 0;
        for (const CfgElement& e : alt) {
          if (e.kind == CfgElementKind::kRule) uses[e.index].push_back(a), ++count;
          else if (nullable_property) count = UINT32_MAX / 2;  // never nullable
        }
        waiting.push_back(count);
        if (count == 0) ready.push_back(uint32_t(r));
      }
    while (!ready.empty()) {
      const uint32_t r = ready.back();
      ready.pop_back();
      if (has[r]) continue;
      has[r] = 1;
      for (const uint32_t a : uses[r])
        if (--waiting[a] == 0) ready.push_back(rule_of[a]);
    }
    return has;
  }

  // The dead alternatives, left recursion and nullable repetitions (see the header).
  void analyse() {
    nullable_ = solve(true);
    const std::vector<uint8_t> productive = solve(false);
    AERIE_CHECK(productive[grammar_.root], what_, ": the start rule '", names_[grammar_.root],
                "' matches no finite string (every alternative recurses without end)");
    for (auto& alts : bodies_)
      alts.erase(std::remove_if(alts.begin(), alts.end(),
                                [&](const Alternative& alt) {
                                  return std::any_of(alt.begin(), alt.end(), [&](const CfgElement& e) {
                                    return e.kind == CfgElementKind::kRule && !productive[e.index];
                                  });
                                }),
                 alts.end());
    for (const auto& [item, expr] : repeats_)
      if (nullable(item))
        fail_at(*expr, "the repeated item can match the empty string, so repeating it is ambiguous without end; "
                       "make the item non-empty (e.g. x* instead of (x?)*)");
    find_left_recursion();
  }

  // A depth-first search over "r may start with s" edges (s after only nullable elements of r).
  void find_left_recursion() {
    const size_t n = bodies_.size();
    std::vector<uint8_t> state(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<uint32_t> path;
    struct Frame {
      uint32_t rule;
      size_t alt = 0, pos = 0;
    };
    for (uint32_t start = 0; start < n; ++start) {
      if (state[start]) continue;
      std::vector<Frame> stack{{start}};
      state[start] = 1;
      path = {start};
      while (!stack.empty()) {
        Frame& f = stack.back();
        const auto& alts = bodies_[f.rule];
        uint32_t next = UINT32_MAX;
        while (f.alt < alts.size() && next == UINT32_MAX) {
          const Alternative& alt = alts[f.alt];
          if (f.pos < alt.size() && alt[f.pos].kind == CfgElementKind::kRule) next = alt[f.pos].index;
          // Go on along this alternative only past a nullable element.
          if (f.pos < alt.size() && nullable(alt[f.pos])) ++f.pos;
          else ++f.alt, f.pos = 0;
        }
        if (next == UINT32_MAX) {
          state[f.rule] = 2;
          stack.pop_back();
          path.pop_back();
          continue;
        }
        if (state[next] == 1) {
          std::string cycle;
          const auto from = std::find(path.begin(), path.end(), next);
          for (auto it = from; it != path.end(); ++it) cycle += names_[*it] + " -> ";
          throw_error(str_cat(what_, ": rule '", names_[next], "' is left-recursive (", cycle, names_[next],
                              "), directly or through rules that can match the empty string; this matcher expands "
                              "rules top-down: rewrite it with repetition, e.g. expr ::= term (\"+\" term)*"));
        }
        if (state[next] == 0) {
          state[next] = 1;
          path.push_back(next);
          stack.push_back({next});
        }
      }
    }
  }

  void flatten() {
    for (size_t r = 0; r < bodies_.size(); ++r) {
      CfgRule rule;
      rule.name = names_[r];
      rule.first = uint32_t(grammar_.alternatives.size());
      rule.count = uint32_t(bodies_[r].size());
      for (const Alternative& alt : bodies_[r]) {
        grammar_.alternatives.push_back(uint32_t(grammar_.elements.size()));
        grammar_.elements.insert(grammar_.elements.end(), alt.begin(), alt.end());
        grammar_.elements.push_back({CfgElementKind::kEnd, 0});
      }
      grammar_.rules.push_back(std::move(rule));
    }
  }

  std::string what_;
  CfgGrammar grammar_;
  std::unordered_map<std::string, uint32_t> index_;
  std::vector<std::string> names_;
  std::vector<int> lines_;
  std::vector<std::vector<Alternative>> bodies_;
  std::map<std::vector<std::pair<uint32_t, uint32_t>>, uint32_t> classes_;
  std::vector<std::pair<CfgElement, const CfgExpr*>> repeats_;
  std::vector<uint8_t> nullable_;
  uint32_t current_ = 0;
  uint32_t helpers_ = 0;
  size_t n_elements_ = 0;
};

}  // namespace

std::shared_ptr<const CfgGrammar> build_cfg_grammar(const std::vector<CfgRuleSource>& rules, const std::string& start,
                                                    const std::string& what) {
  return Lowering(what).run(rules, start);
}

}  // namespace aerie
