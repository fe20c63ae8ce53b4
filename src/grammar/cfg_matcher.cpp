#include "grammar/cfg_matcher.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace aerie {
namespace {

// A character begun but not finished at a stack's top, packed in 32 bits (0: none): the code point's
// bits so far (21), the continuation bytes still due (2) and the character's length in bytes (3).
constexpr uint32_t kValueMask = 0x1FFFFF;
uint32_t pack(uint32_t value, uint32_t remaining, uint32_t length) { return value | remaining << 24 | length << 28; }

// The code points a UTF-8 sequence of each length may encode (shorter forms are overlong).
constexpr uint32_t kMinOfLength[5] = {0, 0, 0x80, 0x800, 0x10000};
constexpr uint32_t kMaxOfLength[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};

enum class CharStep { kRefused, kPartial, kComplete };

// Moves the character at a stack's top (`partial`) past byte b against class `cls`: refused unless some
// code point of the class is encoded by a sequence that starts with the bytes so far.
CharStep step_char(const CfgGrammar& g, uint32_t cls, uint32_t& partial, uint8_t b) {
  uint32_t value, remaining, length;
  if (partial == 0) {
    if (b < 0x80) return (g.classes[cls].ascii[b >> 6] >> (b & 63)) & 1 ? CharStep::kComplete : CharStep::kRefused;
    if ((b & 0xE0) == 0xC0) length = 2, value = b & 0x1Fu;
    else if ((b & 0xF0) == 0xE0) length = 3, value = b & 0x0Fu;
    else if ((b & 0xF8) == 0xF0) length = 4, value = b & 0x07u;
    else return CharStep::kRefused;  // a continuation byte, or 0xF8-0xFF
    remaining = length - 1;
  } else {
    if ((b & 0xC0) != 0x80) return CharStep::kRefused;
    value = (partial & kValueMask) << 6 | (b & 0x3Fu);
    remaining = ((partial >> 24) & 3) - 1;
    length = (partial >> 28) & 7;
  }
  const uint32_t shift = 6 * remaining;
  const uint32_t lo = std::max(value << shift, kMinOfLength[length]);
  const uint32_t hi = std::min(value << shift | ((uint32_t(1) << shift) - 1), kMaxOfLength[length]);
  if (lo > hi || !g.class_intersects(cls, lo, hi)) return CharStep::kRefused;
  if (remaining == 0) return CharStep::kComplete;
  partial = pack(value, remaining, length);
  return CharStep::kPartial;
}

uint64_t hash_stack(const uint32_t* frames, size_t n, uint32_t partial) {
  uint64_t h = 1469598103934665603ull ^ partial;
  for (size_t i = 0; i < n; ++i) h = (h ^ frames[i]) * 1099511628211ull;
  return (h ^ n) * 1099511628211ull;
}

}  // namespace

CfgMatcher::CfgMatcher(const CfgGrammar& grammar) : grammar_(&grammar) {
  // The start: one work item per alternative of the root, on an empty stack.
  const CfgRule& root = grammar.rules[grammar.root];
  for (uint32_t a = root.first; a < root.first + root.count; ++a) {
    work_.push_back(grammar.alternatives[a]);
    work_.push_back(1);
  }
  AERIE_CHECK(expand(), "grammar: the start rule '", root.name, "' expands to more than the matcher's bounds (",
              kCfgMaxStacks, " parse stacks, ", kCfgMaxStackDepth, " nested rules, ", kCfgMaxExpansions,
              " expansions)");
}

bool CfgMatcher::add_stack(const uint32_t* frames, size_t n, uint32_t partial) {
  const uint64_t h = hash_stack(frames, n, partial);
  uint64_t& word = seen_[(h >> 6) & 63];
  const uint64_t bit = uint64_t(1) << (h & 63);
  for (size_t s = 0; (word & bit) && s < ends_.size(); ++s) {
    if (hashes_[s] != h || partial_[s] != partial) continue;
    const size_t begin = s == 0 ? 0 : ends_[s - 1];
    if (ends_[s] - begin == n && std::equal(frames, frames + n, frames_.begin() + std::ptrdiff_t(begin))) return true;
  }
  if (ends_.size() >= kCfgMaxStacks) return false;
  word |= bit;
  frames_.insert(frames_.end(), frames, frames + n);
  ends_.push_back(uint32_t(frames_.size()));
  partial_.push_back(partial);
  hashes_.push_back(h);
  return true;
}

// Runs the work items in work_ (each: positions bottom first, then their count) until every one is a stack
// whose top is a terminal (added to the state) or empty (the start rule is complete). False when a bound
// is passed.
bool CfgMatcher::expand() {
  const CfgGrammar& g = *grammar_;
  while (!work_.empty()) {
    if (++expansions_ > kCfgMaxExpansions) return false;
    size_t n = work_.back();
    work_.pop_back();
    const size_t begin = work_.size() - n;
    // Pop finished alternatives (the top at an end marker) until a terminal or a rule is on top.
    while (n > 0 && g.elements[work_[begin + n - 1]].kind == CfgElementKind::kEnd) --n;
    if (n == 0) {
      accepting_ = true;
      work_.resize(begin);
      continue;
    }
    if (n > kCfgMaxStackDepth) return false;
    const uint32_t top = work_[begin + n - 1];
    const CfgElement& e = g.elements[top];
    if (e.kind == CfgElementKind::kTerminal) {
      const bool ok = add_stack(work_.data() + begin, n, 0);
      work_.resize(begin);
      if (!ok) return false;
      continue;
    }
    // A rule: the top becomes the position after the reference (left out when that ends the alternative:
    // a tail call), and each alternative of the rule goes on top of a copy.
    if (g.elements[top + 1].kind == CfgElementKind::kEnd) --n;
    else work_[begin + n - 1] = top + 1;
    const CfgRule& rule = g.rules[e.index];
    work_.resize(begin + n);
    for (uint32_t a = 0; a < rule.count; ++a) {
      if (a > 0)
        for (size_t i = 0; i < n; ++i) {
          const uint32_t position = work_[begin + i];  // a copy: push_back may reallocate
          work_.push_back(position);
        }
      work_.push_back(g.alternatives[rule.first + a]);
      work_.push_back(uint32_t(n + 1));
    }
    if (rule.count == 0) work_.resize(begin);  // a rule with no alternative left matches nothing
  }
  return true;
}

bool CfgMatcher::advance(uint8_t byte, CfgMatcher& next) const {
  const CfgGrammar& g = *grammar_;
  next.grammar_ = grammar_;
  next.frames_.clear();
  next.ends_.clear();
  next.partial_.clear();
  next.hashes_.clear();
  next.seen_.fill(0);
  next.work_.clear();
  next.expansions_ = 0;
  next.accepting_ = false;
  for (size_t s = 0; s < ends_.size(); ++s) {
    const size_t begin = s == 0 ? 0 : ends_[s - 1], end = ends_[s];
    const uint32_t top = frames_[end - 1];
    uint32_t partial = partial_[s];
    switch (step_char(g, g.elements[top].index, partial, byte)) {
      case CharStep::kRefused:
        break;
      case CharStep::kPartial:
        if (!next.add_stack(frames_.data() + begin, end - begin, partial)) return false;
        break;
      case CharStep::kComplete:
        // The terminal is matched: go on from the position after it.
        next.work_.insert(next.work_.end(), frames_.begin() + std::ptrdiff_t(begin),
                          frames_.begin() + std::ptrdiff_t(end));
        next.work_.back() = top + 1;
        next.work_.push_back(uint32_t(end - begin));
        if (!next.expand()) return false;
        break;
    }
  }
  return !next.ends_.empty() || next.accepting_;
}

bool CfgMatcher::same_after_any_non_ascii() const {
  const CfgGrammar& g = *grammar_;
  for (size_t s = 0; s < ends_.size(); ++s) {
    if (partial_[s] != 0) return false;
    const uint32_t cls = g.elements[frames_[ends_[s] - 1]].index;
    if (!g.class_intersects(cls, 0x80, kCfgMaxCodePoint)) continue;
    // Classes are merged and cut around the surrogates: all of non-ASCII is [.., U+D7FF] and
    // [U+E000, U+10FFFF].
    const CfgClass& c = g.classes[cls];
    const CfgRange* first = g.ranges.data() + c.first;
    const CfgRange* last = first + c.count;
    const CfgRange* low = std::lower_bound(first, last, 0x80u, [](const CfgRange& r, uint32_t v) { return r.hi < v; });
    if (low == last || low->lo > 0x80 || low->hi != 0xD7FF || low + 1 == last || low[1].lo != 0xE000 ||
        low[1].hi != kCfgMaxCodePoint)
      return false;
  }
  return true;
}

uint64_t CfgMatcher::hash() const {
  uint64_t h = accepting_ ? 0x9E3779B97F4A7C15ull : 0;
  for (const uint64_t s : hashes_) h = (h ^ s) * 1099511628211ull + 0x632BE59BD9B4E019ull;
  return h;
}

bool CfgMatcher::feed(uint8_t byte) {
  CfgMatcher next;
  if (!advance(byte, next)) return false;
  *this = std::move(next);
  return true;
}

bool CfgMatcher::feed(std::string_view bytes) {
  CfgMatcher a = *this, b;
  for (const char c : bytes) {
    if (!a.advance(uint8_t(c), b)) return false;
    std::swap(a, b);
  }
  *this = std::move(a);
  return true;
}

}  // namespace aerie
