#include "grammar/json_grammar.h"

#include <algorithm>
#include <cstring>

namespace aerie {
namespace {

// What a frame does with a byte: refuse it; consume it; hand it to the frame below after popping this
// (complete) one; or push a new value (or key) frame, the node in `push`, which then takes the byte.
enum class Step { kRefuse, kConsume, kPopRetry, kPush };

// The frame to push: its node and its starting `extra` (the values a literal must not end in).
struct Push {
  uint32_t node = kJsonNoNode;
  uint64_t extra = 0;
};

enum DocumentPhase : uint8_t { kDocStart, kDocDone };
enum ObjectPhase : uint8_t { kObjOpen, kObjFirstKey, kObjColon, kObjValue, kObjNext, kObjKey, kObjClosed };
enum ArrayPhase : uint8_t { kArrOpen, kArrFirst, kArrNext, kArrValue, kArrClosed };
enum NumberPhase : uint8_t { kNumStart, kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumExp, kNumExpSign,
                             kNumExpDigits };
// String phases. kStrHex*: the digits of a \u escape (kStrHex2AfterD: the first was d/D, so the second
// says whether it is a surrogate); kStrHigh*: a high surrogate, which must be followed by \u and a low one
// (kStrLow*). kStrCont1..3: UTF-8 continuation bytes still due; kStrE0/ED/F0/F4: the second byte of those
// lead bytes has a narrower range (no overlongs, no surrogates, nothing above U+10FFFF).
enum StringPhase : uint8_t {
  kStrOpen, kStrChar, kStrEscape, kStrHex1, kStrHex2, kStrHex2AfterD, kStrHex3, kStrHex4, kStrHighHex3,
  kStrHighHex4, kStrLowBackslash, kStrLowU, kStrLowHex1, kStrLowHex2, kStrLowHex3, kStrLowHex4, kStrCont1,
  kStrCont2, kStrCont3, kStrE0, kStrED, kStrF0, kStrF4, kStrClosed
};

bool is_whitespace(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }
bool is_hex(uint8_t b) { return is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }
bool in_range(uint8_t b, uint8_t lo, uint8_t hi) { return b >= lo && b <= hi; }

Step gap_whitespace(const JsonGrammar& g, JsonFrame& f) {
  if (g.whitespace == JsonWhitespace::kCompact || f.whitespace >= kJsonMaxWhitespace) return Step::kRefuse;
  ++f.whitespace;
  return Step::kConsume;
}

Step to_phase(JsonFrame& f, uint8_t phase) {
  f.phase = phase;
  f.whitespace = 0;
  return Step::kConsume;
}

Step step_document(JsonFrame& f, uint8_t b, Push& push) {
  if (f.phase == kDocDone || is_whitespace(b)) return Step::kRefuse;
  f.phase = kDocDone;
  push.node = uint32_t(f.value);
  return Step::kPush;
}

// Whether a string, array or map node has length bounds, so that its frame counts characters, items or
// members; an unbounded one keeps 0 (equal frames for equal states: the mask cache keys on them).
bool counts(const JsonNode& n) { return n.min != 0 || n.max != 0xffffffffu; }

uint64_t low_bits(uint32_t n) { return n >= 64 ? ~uint64_t(0) : (uint64_t(1) << n) - 1; }

// Rules of a listed object (JsonObjectRules): with properties before `position` decided and `written`
// the mask of those written, can the object still be completed — every property needed (required, or a
// dependency of one written or needed) still ahead, and a member count within [min, max] reachable? The
// count can reach every value between "only what is needed" and "everything still writable" (the
// compiler refuses member counts together with cyclic dependencies, where it could jump).
bool object_completable(const JsonGrammar& g, const JsonNode& n, uint32_t position, uint64_t written) {
  const JsonObjectRules& rules = g.object_rules[n.child];
  const uint64_t* depends = g.dependency_masks.data() + rules.dependencies;
  const uint64_t ahead = low_bits(n.count) & ~low_bits(position);
  uint64_t needed = rules.required | written;
  for (uint64_t m = needed; m != 0; m &= m - 1) needed |= depends[__builtin_ctzll(m)];
  // `never` covers written properties too: one whose dependency was pruned cannot be written at all.
  if ((needed & rules.never) != 0) return false;
  needed &= ~written;
  if ((needed & ~ahead) != 0) return false;
  uint64_t writable = needed;
  for (uint64_t m = ahead & ~rules.never; m != 0; m &= m - 1) {
    const int i = __builtin_ctzll(m);
    if ((depends[i] & ~(ahead | written)) == 0 && (depends[i] & rules.never) == 0) writable |= uint64_t(1) << i;
  }
  const auto fewest = uint32_t(__builtin_popcountll(written | needed));
  const auto most = uint32_t(__builtin_popcountll(written | writable));
  return std::max(fewest, n.min) <= std::min(most, n.max);  // some count in both ranges
}

// The keys a listed object with rules may write next: those after which it can still be completed.
uint64_t allowed_keys(const JsonGrammar& g, const JsonNode& n, const JsonFrame& f) {
  uint64_t allowed = 0;
  for (uint64_t m = low_bits(n.count) & ~low_bits(uint32_t(f.value)); m != 0; m &= m - 1) {
    const auto i = uint32_t(__builtin_ctzll(m));
    if (object_completable(g, n, i + 1, f.extra | (uint64_t(1) << i))) allowed |= uint64_t(1) << i;
  }
  return allowed;
}

bool object_can_close(const JsonGrammar& g, const JsonNode& n, const JsonFrame& f) {
  if (n.map) return f.value >= n.min;
  if (n.child == kJsonNoNode) return f.value >= n.close_from;
  return object_completable(g, n, n.count, f.extra);
}

// Whether another member may follow (after '{' or ','); for a listed object with rules, `keys` is set to
// the keys allowed next.
bool object_can_continue(const JsonGrammar& g, const JsonNode& n, const JsonFrame& f, uint64_t& keys) {
  if (n.map) return f.value < n.max;
  if (n.child == kJsonNoNode) return f.value < n.count;
  keys = allowed_keys(g, n, f);
  return keys != 0;
}

Step step_object(const JsonGrammar& g, const JsonNode& n, JsonFrame& f, uint8_t b, Push& push) {
  if (f.phase != kObjOpen && is_whitespace(b)) return gap_whitespace(g, f);
  uint64_t keys = ~uint64_t(0);
  switch (f.phase) {
    case kObjOpen:
      return b == '{' ? to_phase(f, kObjFirstKey) : Step::kRefuse;
    case kObjFirstKey:
    case kObjKey:
      if (b == '"') {
        if (!object_can_continue(g, n, f, keys)) return Step::kRefuse;
        push.node = n.map ? n.key : g.key_nodes[n.keys + f.value];
        if (push.node == kJsonNoNode) return Step::kRefuse;
        push.extra = ~keys;
        to_phase(f, kObjColon);  // the key frame's pop sets the position (see on_child_done)
        return Step::kPush;
      }
      if (b == '}' && f.phase == kObjFirstKey && object_can_close(g, n, f)) return to_phase(f, kObjClosed);
      return Step::kRefuse;
    case kObjColon:
      return b == ':' ? to_phase(f, kObjValue) : Step::kRefuse;
    case kObjValue:
      // A map counts its members when it has minProperties/maxProperties (else the frame stays the same
      // from member to member, which the mask cache keys on).
      if (n.map && counts(n)) ++f.value;
      push.node = n.map ? n.child : g.properties[n.first + f.value - 1].value;
      to_phase(f, kObjNext);
      return Step::kPush;
    case kObjNext:
      if (b == ',' && object_can_continue(g, n, f, keys)) return to_phase(f, kObjKey);
      if (b == '}' && object_can_close(g, n, f)) return to_phase(f, kObjClosed);
      return Step::kRefuse;
    default:
      return Step::kRefuse;
  }
}

// The node of item number `index` (0-based): the tuple's, then the rest's.
uint32_t array_item(const JsonGrammar& g, const JsonNode& n, uint64_t index) {
  return index < n.count ? g.tuple_items[n.first + index] : n.child;
}

Step step_array(const JsonGrammar& g, const JsonNode& n, JsonFrame& f, uint8_t b, Push& push) {
  if (f.phase != kArrOpen && is_whitespace(b)) return gap_whitespace(g, f);
  switch (f.phase) {
    case kArrOpen:
      return b == '[' ? to_phase(f, kArrFirst) : Step::kRefuse;
    case kArrFirst:
      if (b == ']') return n.min == 0 ? to_phase(f, kArrClosed) : Step::kRefuse;
      if (n.max == 0) return Step::kRefuse;
      [[fallthrough]];
    case kArrValue:
      push.node = array_item(g, n, f.value);
      // A unique array's item must not repeat a value used; the ',' that led here checked the count
      // against max.
      push.extra = n.unique ? f.extra : 0;
      if (n.count != 0 || counts(n)) ++f.value;  // the position matters to a tuple or to bounds only
      to_phase(f, kArrNext);
      return Step::kPush;
    case kArrNext:
      // A unique array's max is at most its number of values (the compiler's), so one is left here.
      if (b == ',' && f.value < n.max) return to_phase(f, kArrValue);
      if (b == ']' && f.value >= n.min) return to_phase(f, kArrClosed);
      return Step::kRefuse;
    default:
      return Step::kRefuse;
  }
}

// The string automaton as a table: kStringTable[phase][byte] is the next phase, with kStartsCharacter set
// when the byte starts a character (counted against minLength/maxLength), or kStringRefused. Closing
// quotes lead to kStrClosed. One lookup per byte keeps the mask walk through string content cheap.
constexpr uint8_t kStringRefused = 0xff;
constexpr uint8_t kStartsCharacter = 0x80;

uint8_t string_transition(uint8_t phase, uint8_t b) {
  auto next_if = [](bool ok, uint8_t next) { return ok ? next : kStringRefused; };
  switch (phase) {
    case kStrOpen: return next_if(b == '"', kStrChar);
    case kStrChar: {
      if (b == '"') return kStrClosed;
      uint8_t next;
      if (b < 0x20) return kStringRefused;
      if (b == '\\') next = kStrEscape;
      else if (b < 0x80) next = kStrChar;
      else if (in_range(b, 0xC2, 0xDF)) next = kStrCont1;
      else if (b == 0xE0) next = kStrE0;
      else if (b == 0xED) next = kStrED;
      else if (in_range(b, 0xE1, 0xEF)) next = kStrCont2;
      else if (b == 0xF0) next = kStrF0;
      else if (in_range(b, 0xF1, 0xF3)) next = kStrCont3;
      else if (b == 0xF4) next = kStrF4;
      else return kStringRefused;  // 0x80-0xC1 (continuation or overlong lead), 0xF5-0xFF
      return next | kStartsCharacter;
    }
    case kStrEscape:
      if (b == 'u') return kStrHex1;
      return next_if(b != 0 && std::strchr("\"\\/bfnrt", b) != nullptr, kStrChar);
    case kStrHex1: return next_if(is_hex(b), (b == 'd' || b == 'D') ? kStrHex2AfterD : kStrHex2);
    case kStrHex2: return next_if(is_hex(b), kStrHex3);
    case kStrHex2AfterD:
      if (in_range(b, '0', '7')) return kStrHex3;
      // 8-b: a high surrogate; c-f would be a lone low surrogate (refused).
      return next_if(b == '8' || b == '9' || in_range(b, 'a', 'b') || in_range(b, 'A', 'B'), kStrHighHex3);
    case kStrHex3: return next_if(is_hex(b), kStrHex4);
    case kStrHex4: return next_if(is_hex(b), kStrChar);
    case kStrHighHex3: return next_if(is_hex(b), kStrHighHex4);
    case kStrHighHex4: return next_if(is_hex(b), kStrLowBackslash);
    case kStrLowBackslash: return next_if(b == '\\', kStrLowU);
    case kStrLowU: return next_if(b == 'u', kStrLowHex1);
    case kStrLowHex1: return next_if(b == 'd' || b == 'D', kStrLowHex2);
    case kStrLowHex2: return next_if(in_range(b, 'c', 'f') || in_range(b, 'C', 'F'), kStrLowHex3);
    case kStrLowHex3: return next_if(is_hex(b), kStrLowHex4);
    case kStrLowHex4: return next_if(is_hex(b), kStrChar);
    case kStrCont1: return next_if(in_range(b, 0x80, 0xBF), kStrChar);
    case kStrCont2: return next_if(in_range(b, 0x80, 0xBF), kStrCont1);
    case kStrCont3: return next_if(in_range(b, 0x80, 0xBF), kStrCont2);
    case kStrE0: return next_if(in_range(b, 0xA0, 0xBF), kStrCont1);
    case kStrED: return next_if(in_range(b, 0x80, 0x9F), kStrCont1);
    case kStrF0: return next_if(in_range(b, 0x90, 0xBF), kStrCont2);
    case kStrF4: return next_if(in_range(b, 0x80, 0x8F), kStrCont2);
    default: return kStringRefused;
  }
}

struct StringTable {
  uint8_t next[kStrClosed + 1][256];
  StringTable() {
    for (int phase = 0; phase <= kStrClosed; ++phase)
      for (int b = 0; b < 256; ++b) next[phase][b] = string_transition(uint8_t(phase), uint8_t(b));
  }
};
const StringTable kStringTable;

// A string with a pattern (JsonNode::pattern). Its frame's value holds the character count in the low 32
// bits; inside a \u escape, the escape's hex digits so far (bits 32-47) and, after a high surrogate, that
// surrogate's offset from U+D800 (bits 48-57). Back at kStrChar the upper bits are zero again.
constexpr uint64_t kCountMask = 0xffffffffu;
constexpr int kUnitShift = 32, kHighShift = 48;

int hex_digit(uint8_t b) { return is_digit(b) ? b - '0' : (b | 0x20) - 'a' + 10; }

// Some completion from automaton state s fits the length bounds, `count` characters having been read.
bool pattern_length_ok(const RegexDfa& dfa, const JsonNode& n, uint64_t count, uint32_t s) {
  if (s == kRegexDead || count + dfa.min_chars(s) > n.max) return false;
  return dfa.max_chars(s) == kRegexUnboundedLength || count + dfa.max_chars(s) >= n.min;
}

// The pattern's side of byte b, read in phase f.phase on the way to `next`: steps the automaton on each
// decoded byte (raw UTF-8 bytes as they come; an escape once it is decoded) and, while a \u escape's digits
// come in, checks that some code point they may still spell leads on.
bool step_pattern(const RegexDfa& dfa, const JsonNode& n, JsonFrame& f, uint8_t b, uint8_t next) {
  const uint64_t count = f.value & kCountMask;
  const uint32_t state = f.pattern_state;
  const auto keep = [&](uint32_t s) { return pattern_length_ok(dfa, n, count, s); };
  const auto move_to = [&](uint32_t s) {
    if (!keep(s)) return false;
    f.pattern_state = uint16_t(s);
    return true;
  };
  // The astral code points whose high surrogate lies in [lo, hi] (clipped to high surrogates).
  const auto astral_ok = [&](uint32_t lo, uint32_t hi) {
    lo = std::max<uint32_t>(lo, 0xD800), hi = std::min<uint32_t>(hi, 0xDBFF);
    return lo <= hi && dfa.admits_code_points(state, 0x10000 + ((lo - 0xD800) << 10),
                                              0x10000 + ((hi - 0xD800) << 10) + 0x3FF, keep);
  };
  switch (f.phase) {
    case kStrChar:
      if (next == kStrClosed) return dfa.accepting(state);
      // An escape is decoded once complete; some character it may spell must lead on.
      if (next == kStrEscape) return dfa.admits_code_points(state, 0, 0x10FFFF, keep);
      return move_to(dfa.next(state, b));
    case kStrCont1:
    case kStrCont2:
    case kStrCont3:
    case kStrE0:
    case kStrED:
    case kStrF0:
    case kStrF4: return move_to(dfa.next(state, b));
    case kStrEscape: {
      if (b == 'u') return dfa.admits_code_points(state, 0, 0x10FFFF, keep);
      const uint8_t decoded = b == 'b'   ? 0x08
                              : b == 'f' ? 0x0C
                              : b == 'n' ? 0x0A
                              : b == 'r' ? 0x0D
                              : b == 't' ? 0x09
                                         : b;
      return move_to(dfa.next(state, decoded));
    }
    case kStrHex1:
    case kStrHex2:
    case kStrHex2AfterD:
    case kStrHex3:
    case kStrHex4:
    case kStrHighHex3:
    case kStrHighHex4: {
      const int digits = f.phase == kStrHex1                                ? 1
                         : f.phase <= kStrHex2AfterD                        ? 2
                         : (f.phase == kStrHex3 || f.phase == kStrHighHex3) ? 3
                                                                            : 4;
      const uint32_t unit = ((uint32_t(f.value >> kUnitShift) & 0xffff) << 4) | uint32_t(hex_digit(b));
      if (digits == 4 && next == kStrChar) {
        f.value = count;
        return move_to(dfa.step_code_point(state, unit));
      }
      if (digits == 4) {  // a high surrogate: its low half follows
        f.value = count | (uint64_t(unit - 0xD800) << kHighShift);
        return astral_ok(unit, unit);
      }
      f.value = count | (uint64_t(unit) << kUnitShift);
      const int free_bits = 4 * (4 - digits);
      const uint32_t lo = unit << free_bits, hi = lo + (uint32_t(1) << free_bits) - 1;
      return dfa.admits_code_points(state, lo, hi, keep) || astral_ok(lo, hi);
    }
    case kStrLowHex1:
    case kStrLowHex2:
    case kStrLowHex3:
    case kStrLowHex4: {
      const int digits = f.phase - kStrLowHex1 + 1;
      const uint32_t high = uint32_t(f.value >> kHighShift) & 0x3ff;
      const uint32_t unit = ((uint32_t(f.value >> kUnitShift) & 0xffff) << 4) | uint32_t(hex_digit(b));
      const int free_bits = 4 * (4 - digits);
      const uint32_t lo = std::max<uint32_t>(unit << free_bits, 0xDC00);
      const uint32_t hi = std::min<uint32_t>((unit << free_bits) + (uint32_t(1) << free_bits) - 1, 0xDFFF);
      const uint32_t base = 0x10000 + (high << 10) - 0xDC00;
      if (digits == 4) {
        f.value = count;
        return move_to(dfa.step_code_point(state, base + unit));
      }
      f.value = count | (uint64_t(high) << kHighShift) | (uint64_t(unit) << kUnitShift);
      return lo <= hi && dfa.admits_code_points(state, base + lo, base + hi, keep);
    }
    default: return true;  // kStrLowBackslash, kStrLowU: the high surrogate was checked
  }
}

Step step_string(const JsonGrammar& g, const JsonNode& n, JsonFrame& f, uint8_t b) {
  const uint8_t t = kStringTable.next[f.phase][b];
  if (t == kStringRefused) return Step::kRefuse;
  if (t & kStartsCharacter) {
    if (f.value >= n.max) return Step::kRefuse;
    if (counts(n)) ++f.value;
  }
  const uint8_t next = t & ~kStartsCharacter;
  if (next == kStrClosed && f.value < n.min) return Step::kRefuse;
  if (n.pattern != kJsonNoNode && !step_pattern(g.patterns[n.pattern], n, f, b, next)) return Step::kRefuse;
  f.phase = next;
  return Step::kConsume;
}

// Number bounds. A value is s * (P + f): sign s, integer part P (the magnitude, saturating at
// kJsonUnbounded), fraction f in [0, 1). With integer bounds lo/hi, whether a value is in range depends on
// f only through f == 0 or f > 0, so a bounded number's frame keeps P, the sign and "f > 0 so far".
constexpr uint64_t kNegativeBit = uint64_t(1) << 63;
constexpr uint64_t kFractionBit = uint64_t(1) << 62;
constexpr uint64_t kMagnitudeMask = kFractionBit - 1;

enum class Fraction { kZero, kPositive };

struct Span {
  int64_t min, max;
  bool contains(int64_t p) const { return p >= min && p <= max; }
};

// The integer parts P for which s * (P + f), with f == 0 or f > 0 as given, lies within the node's bounds.
Span magnitudes(const JsonNode& n, bool negative, Fraction f) {
  const bool positive_fraction = f == Fraction::kPositive;
  Span span;
  if (!negative) {  // P + f >= lo (> lo), P + f <= hi (< hi)
    span.min = !positive_fraction && n.lo_exclusive ? n.lo + 1 : n.lo;
    span.max = positive_fraction || n.hi_exclusive ? n.hi - 1 : n.hi;
  } else {  // P + f <= -lo (< -lo), P + f >= -hi (> -hi)
    span.min = !positive_fraction && n.hi_exclusive ? -n.hi + 1 : -n.hi;
    span.max = positive_fraction || n.lo_exclusive ? -n.lo - 1 : -n.lo;
  }
  span.min = std::max<int64_t>(span.min, 0);
  return span;
}

// The fractions a value may still get: none for an integer; zero or positive for a number.
template <typename Test>
bool any_fraction(const JsonNode& n, Test&& test) {
  return test(Fraction::kZero) || (!n.integer && test(Fraction::kPositive));
}

// Whether an integer part that starts with the digits of p (p >= 1; more digits may follow) can end in
// the span: p itself, or p * 10^j + r for r < 10^j.
bool reachable(int64_t p, const Span& span) {
  if (span.min > span.max) return false;
  if (span.contains(p)) return true;
  if (span.max >= kJsonUnbounded) return true;  // the integer part can grow past any minimum
  for (int64_t low = p, width = 1; low <= span.max;) {
    if (low > kJsonUnbounded / 10) return false;
    low *= 10;
    width *= 10;
    if (low <= span.max && low + width - 1 >= span.min) return true;
  }
  return false;
}

// multipleOf k: whether an integer part that starts with the digits of p (remainder mod k: `remainder`)
// can end in the span as a multiple of k. Candidates with j more digits fill [p * 10^j, p * 10^j + 10^j - 1].
bool reachable_multiple(int64_t p, uint64_t remainder, const Span& span, uint32_t k) {
  if (span.min > span.max) return false;
  if (remainder == 0 && span.contains(p)) return true;
  // No upper bound: ten more digits reach every remainder (k < 2^32), and the frame's remainder is exact
  // however long the number grows.
  if (span.max >= kJsonUnbounded) return true;
  for (int64_t low = p, width = 1;;) {
    // Past the span (or, for p = 0 after a minus, ranges [0, 10^j) that already cover it): none left.
    if (low > kJsonUnbounded / 10 || low > span.max || width > span.max) return false;
    low *= 10;
    width *= 10;
    const int64_t lo = std::max(low, span.min), hi = std::min(low + width - 1, span.max);
    if (lo > hi) continue;
    const int64_t first_multiple = lo + (int64_t(k) - lo % int64_t(k)) % int64_t(k);
    if (first_multiple <= hi) return true;
  }
}

bool number_complete(uint8_t phase) {
  return phase == kNumZero || phase == kNumInt || phase == kNumFrac || phase == kNumExpDigits;
}

// The number read so far is a complete value within the bounds (and a multiple of multipleOf: `remainder`).
bool number_done(const JsonNode& n, uint8_t phase, uint64_t value, uint64_t remainder) {
  if (!number_complete(phase)) return false;
  if (n.multiple_of != 0 && remainder != 0) return false;
  if (!n.bounded) return true;
  const bool negative = value & kNegativeBit;
  const Fraction f = phase == kNumFrac && (value & kFractionBit) ? Fraction::kPositive : Fraction::kZero;
  return magnitudes(n, negative, f).contains(int64_t(value & kMagnitudeMask));
}

// Some continuation of the number read so far ends within the bounds.
bool number_feasible(const JsonNode& n, uint8_t phase, uint64_t value, uint64_t remainder) {
  const bool negative = value & kNegativeBit;
  const auto p = int64_t(value & kMagnitudeMask);
  if (n.multiple_of != 0) {  // an integer node (the compiler's): no fraction
    if (phase == kNumMinus) return reachable_multiple(0, 0, magnitudes(n, true, Fraction::kZero), n.multiple_of);
    if (phase == kNumZero) return magnitudes(n, negative, Fraction::kZero).contains(0);
    return reachable_multiple(p, remainder, magnitudes(n, negative, Fraction::kZero), n.multiple_of);
  }
  switch (phase) {
    case kNumMinus:  // any integer part may follow
      return any_fraction(n, [&](Fraction f) {
        const Span span = magnitudes(n, true, f);
        return span.min <= span.max;
      });
    case kNumZero: return any_fraction(n, [&](Fraction f) { return magnitudes(n, negative, f).contains(0); });
    case kNumInt: return any_fraction(n, [&](Fraction f) { return reachable(p, magnitudes(n, negative, f)); });
    case kNumDot: return any_fraction(n, [&](Fraction f) { return magnitudes(n, negative, f).contains(p); });
    case kNumFrac:
      if (value & kFractionBit) return magnitudes(n, negative, Fraction::kPositive).contains(p);
      return any_fraction(n, [&](Fraction f) { return magnitudes(n, negative, f).contains(p); });
    default: return false;  // a bounded number has no exponent
  }
}

// A bounded number's value bits after byte b (read in `phase`).
uint64_t number_value_after(uint64_t value, uint8_t phase, uint8_t b) {
  if (b == '-') return value | kNegativeBit;
  if (!is_digit(b)) return value;
  const auto digit = uint64_t(b - '0');
  if (phase == kNumStart || phase == kNumMinus) return value | digit;
  if (phase == kNumInt) {
    const uint64_t p = value & kMagnitudeMask;
    const auto saturated = uint64_t(kJsonUnbounded);
    const uint64_t next = p >= saturated / 10 ? saturated : std::min<uint64_t>(p * 10 + digit, saturated);
    return (value & ~kMagnitudeMask) | next;
  }
  if ((phase == kNumDot || phase == kNumFrac) && digit != 0) return value | kFractionBit;
  return value;
}

Step step_number(const JsonNode& n, JsonFrame& f, uint8_t b) {
  const bool digit = is_digit(b);
  const bool fraction = !n.integer, exponent = !n.integer && !n.bounded;
  uint8_t next = 0xff;
  switch (f.phase) {
    case kNumStart:
      if (b == '-') next = kNumMinus;
      [[fallthrough]];
    case kNumMinus:
      if (b == '0') next = kNumZero;
      else if (digit) next = kNumInt;
      break;
    case kNumInt:
      if (digit) next = kNumInt;
      [[fallthrough]];
    case kNumZero:
      if (fraction && b == '.') next = kNumDot;
      else if (exponent && (b == 'e' || b == 'E')) next = kNumExp;
      break;
    case kNumDot:
      if (digit) next = kNumFrac;
      break;
    case kNumFrac:
      if (digit) next = kNumFrac;
      else if (exponent && (b == 'e' || b == 'E')) next = kNumExp;
      break;
    case kNumExp:
      if (b == '+' || b == '-') next = kNumExpSign;
      else if (digit) next = kNumExpDigits;
      break;
    case kNumExpSign:
    case kNumExpDigits:
      if (digit) next = kNumExpDigits;
      break;
  }
  if (next == 0xff) return number_done(n, f.phase, f.value, f.extra) ? Step::kPopRetry : Step::kRefuse;
  if (n.bounded || n.multiple_of != 0) {
    const uint64_t value = number_value_after(f.value, f.phase, b);
    const uint64_t remainder = n.multiple_of != 0 && digit ? (f.extra * 10 + uint64_t(b - '0')) % n.multiple_of
                                                           : f.extra;
    if (!number_feasible(n, next, value, remainder)) return Step::kRefuse;
    f.value = value;
    f.extra = remainder;
  }
  return to_phase(f, next);
}

uint64_t value_bit(int32_t value) { return uint64_t(1) << std::min(value, 63); }

// A literal ends at the frame's state, in a value the frame does not forbid.
bool literal_ends(const JsonGrammar& g, const JsonFrame& f) {
  const int32_t value = g.literal_states[f.value].value;
  return value >= 0 && (f.extra & value_bit(value)) == 0;
}

Step step_literal(const JsonGrammar& g, JsonFrame& f, uint8_t b) {
  const uint32_t target = g.literal_step(uint32_t(f.value), b);
  if (target != kJsonNoNode && (g.literal_states[target].below & ~f.extra) != 0) {
    f.value = target;
    return Step::kConsume;
  }
  return literal_ends(g, f) ? Step::kPopRetry : Step::kRefuse;
}

Step step_frame(const JsonGrammar& g, JsonFrame& f, uint8_t b, Push& push) {
  if (f.node == kJsonNoNode) return step_document(f, b, push);
  const JsonNode& n = g.nodes[f.node];
  switch (n.kind) {
    case JsonNodeKind::kObject: return step_object(g, n, f, b, push);
    case JsonNodeKind::kArray: return step_array(g, n, f, b, push);
    case JsonNodeKind::kString: return step_string(g, n, f, b);
    case JsonNodeKind::kNumber: return step_number(n, f, b);
    case JsonNodeKind::kLiteral: return step_literal(g, f, b);
    case JsonNodeKind::kAnyOf: break;  // never on a stack: push_value dispatches to an alternative
  }
  return Step::kRefuse;
}

// Complete, and no byte can extend it: popped at once, so that a finished document is seen as such.
bool is_closed(const JsonGrammar& g, const JsonFrame& f) {
  if (f.node == kJsonNoNode) return false;
  const JsonNode& n = g.nodes[f.node];
  switch (n.kind) {
    case JsonNodeKind::kObject: return f.phase == kObjClosed;
    case JsonNodeKind::kArray: return f.phase == kArrClosed;
    case JsonNodeKind::kString: return f.phase == kStrClosed;
    case JsonNodeKind::kNumber: return n.integer && f.phase == kNumZero && number_done(n, f.phase, f.value, f.extra);
    case JsonNodeKind::kLiteral: return literal_ends(g, f) && g.literal_states[f.value].n_edges == 0;
    case JsonNodeKind::kAnyOf: break;
  }
  return false;
}

// Complete but extendable (a number, an enum literal that is a prefix of another).
bool is_complete(const JsonGrammar& g, const JsonFrame& f) {
  if (f.node == kJsonNoNode) return f.phase == kDocDone;
  const JsonNode& n = g.nodes[f.node];
  if (n.kind == JsonNodeKind::kNumber) return number_done(n, f.phase, f.value, f.extra);
  if (n.kind == JsonNodeKind::kLiteral) return literal_ends(g, f);
  return false;
}

// A child frame was popped: a listed object learns which key was read (and, with rules, marks it
// written); a unique array marks the value its item used.
void on_child_done(const JsonGrammar& g, JsonFrame& parent, const JsonFrame& child) {
  if (parent.node == kJsonNoNode) return;
  const JsonNode& n = g.nodes[parent.node];
  if (n.kind == JsonNodeKind::kObject && !n.map && parent.phase == kObjColon) {
    const int32_t index = g.literal_states[child.value].value;
    parent.value = uint32_t(index) + 1;
    if (n.child != kJsonNoNode) parent.extra |= value_bit(index);
  } else if (n.kind == JsonNodeKind::kArray && n.unique) {
    parent.extra |= value_bit(g.literal_states[child.value].value);
  }
}

JsonFrame initial_frame(const JsonGrammar& g, const Push& push) {
  JsonFrame f;
  f.node = push.node;
  if (g.nodes[push.node].kind == JsonNodeKind::kLiteral) {
    f.value = g.nodes[push.node].child;
    f.extra = push.extra;
  }
  return f;
}

// The stack being forked at an anyOf value (push_value never nests, so one buffer per thread will do).
thread_local std::vector<JsonFrame> fork_stash;

}  // namespace

bool json_number_satisfiable(const JsonNode& n) {
  if (n.multiple_of != 0)  // an integer node: some multiple within the positive or the negative span
    return reachable_multiple(0, 0, magnitudes(n, false, Fraction::kZero), n.multiple_of) ||
           reachable_multiple(0, 0, magnitudes(n, true, Fraction::kZero), n.multiple_of);
  return any_fraction(n, [&](Fraction f) {
    const Span positive = magnitudes(n, false, f), negative = magnitudes(n, true, f);
    return positive.min <= positive.max || negative.min <= negative.max;
  });
}

bool json_object_completable(const JsonGrammar& grammar, const JsonNode& object) {
  return object_completable(grammar, object, 0, 0);
}

uint32_t JsonGrammar::literal_step(uint32_t state, uint8_t byte) const {
  const JsonLiteralState& s = literal_states[state];
  const JsonLiteralEdge* begin = literal_edges.data() + s.first_edge;
  const JsonLiteralEdge* end = begin + s.n_edges;
  const JsonLiteralEdge* it =
      std::lower_bound(begin, end, byte, [](const JsonLiteralEdge& e, uint8_t b) { return e.byte < b; });
  return it != end && it->byte == byte ? it->target : kJsonNoNode;
}

JsonMatcher::JsonMatcher(const JsonGrammar& grammar) : grammar_(&grammar) {
  JsonFrame document;
  document.value = grammar.root;
  frames_.push_back(document);
  ends_.push_back(1);
}

bool JsonMatcher::advance(uint8_t byte, JsonMatcher& next) const {
  next.grammar_ = grammar_;
  next.frames_.clear();
  next.ends_.clear();
  uint32_t begin = 0;
  for (const uint32_t end : ends_) {
    const size_t base = next.frames_.size();
    next.frames_.insert(next.frames_.end(), frames_.begin() + begin, frames_.begin() + end);
    next.feed_stack(base, byte);
    begin = end;
  }
  if (next.ends_.size() > 1) next.remove_duplicate_stacks();
  return !next.ends_.empty() && next.ends_.size() <= size_t(kJsonMaxParses);
}

bool JsonMatcher::feed(uint8_t byte) {
  thread_local JsonMatcher next;
  if (!advance(byte, next)) return false;
  std::swap(frames_, next.frames_);
  std::swap(ends_, next.ends_);
  return true;
}

bool JsonMatcher::feed(std::string_view bytes) {
  JsonMatcher copy = *this;
  for (const char c : bytes)
    if (!copy.feed(uint8_t(c))) return false;
  *this = std::move(copy);
  return true;
}

// The stack frames_[base, end) takes `byte`. On success its end is recorded (forks record several); on
// refusal it is removed.
bool JsonMatcher::feed_stack(size_t base, uint8_t byte) {
  const JsonGrammar& g = *grammar_;
  for (;;) {
    Push push;
    switch (step_frame(g, frames_.back(), byte, push)) {
      case Step::kRefuse:
        frames_.resize(base);
        return false;
      case Step::kConsume:
        close_top(base);
        ends_.push_back(uint32_t(frames_.size()));
        return true;
      case Step::kPopRetry: {
        const JsonFrame child = frames_.back();
        frames_.pop_back();
        on_child_done(g, frames_.back(), child);
        break;
      }
      case Step::kPush: return push_value(base, push.node, push.extra, byte);
    }
  }
}

// Pushes a frame for `node` that takes `byte` as its first; an anyOf forks the stack once per alternative
// that may start with the byte.
bool JsonMatcher::push_value(size_t base, uint32_t node, uint64_t extra, uint8_t byte) {
  const JsonGrammar& g = *grammar_;
  if (frames_.size() - base >= size_t(kJsonMaxDepth)) {
    frames_.resize(base);
    return false;
  }
  auto push_and_step = [&](size_t stack_base, uint32_t concrete) {
    frames_.push_back(initial_frame(g, Push{concrete, extra}));
    Push unused;
    if (step_frame(g, frames_.back(), byte, unused) != Step::kConsume) {
      frames_.resize(stack_base);
      return false;
    }
    close_top(stack_base);
    ends_.push_back(uint32_t(frames_.size()));
    return true;
  };
  if (g.nodes[node].kind != JsonNodeKind::kAnyOf) return push_and_step(base, node);

  const uint32_t* offsets = g.dispatch_offsets.data() + g.nodes[node].keys;
  const uint32_t first = offsets[byte], last = offsets[byte + 1];
  if (first == last) {
    frames_.resize(base);
    return false;
  }
  if (last - first == 1) return push_and_step(base, g.dispatch_nodes[first]);
  fork_stash.assign(frames_.begin() + std::ptrdiff_t(base), frames_.end());
  frames_.resize(base);
  bool any = false;
  for (uint32_t i = first; i < last; ++i) {
    const size_t stack_base = frames_.size();
    frames_.insert(frames_.end(), fork_stash.begin(), fork_stash.end());
    any |= push_and_step(stack_base, g.dispatch_nodes[i]);
  }
  return any;
}

JsonMatcher::TopStep JsonMatcher::step_top(const JsonGrammar& grammar, JsonFrame& top, uint8_t byte) {
  // String content first, inline: the bulk of a mask walk inside a string.
  if (top.node != kJsonNoNode && grammar.nodes[top.node].kind == JsonNodeKind::kString) {
    const JsonNode& n = grammar.nodes[top.node];
    if (n.pattern != kJsonNoNode) {
      JsonFrame f = top;
      if (step_string(grammar, n, f, byte) == Step::kRefuse) return TopStep::kRefused;
      if (f.phase == kStrClosed) return TopStep::kOther;
      top = f;
      return TopStep::kTopOnly;
    }
    const uint8_t t = kStringTable.next[top.phase][byte];
    if (t == kStringRefused) return TopStep::kRefused;
    const uint8_t next = t & ~kStartsCharacter;
    if (next == kStrClosed) return top.value >= n.min ? TopStep::kOther : TopStep::kRefused;
    if (t & kStartsCharacter) {
      if (top.value >= n.max) return TopStep::kRefused;
      if (counts(n)) ++top.value;
    }
    top.phase = next;
    return TopStep::kTopOnly;
  }
  JsonFrame f = top;
  Push push;
  const Step step = step_frame(grammar, f, byte, push);
  if (step == Step::kRefuse) return TopStep::kRefused;
  if (step != Step::kConsume || is_closed(grammar, f)) return TopStep::kOther;
  top = f;
  return TopStep::kTopOnly;
}

// Mirrors feed_stack and push_value for one stack (the tests compare the masks of both paths).
JsonMatcher::TopStep JsonMatcher::step_light(JsonLightStack& s, uint8_t byte, uint32_t floor) const {
  const JsonGrammar& g = *grammar_;
  // Makes the top frame one of the stack's own, taking over the root's next one; false below `floor`.
  const auto own_top = [&] {
    if (s.n_own > 0) return true;
    if (s.kept <= floor) return false;
    s.own[s.n_own++] = frames_[--s.kept];
    return true;
  };
  // close_top: pops a closed top frame into its parent. False when the parent is below `floor`.
  const auto close_light_top = [&] {
    if (s.kept + s.n_own < 2 || !is_closed(g, s.own[s.n_own - 1])) return true;
    const JsonFrame child = s.own[--s.n_own];
    if (!own_top()) return false;
    on_child_done(g, s.own[s.n_own - 1], child);
    return true;
  };
  for (;;) {
    if (!own_top()) return TopStep::kOther;
    Push push;
    switch (step_frame(g, s.own[s.n_own - 1], byte, push)) {
      case Step::kRefuse: return TopStep::kRefused;
      case Step::kConsume: return close_light_top() ? TopStep::kTopOnly : TopStep::kOther;
      case Step::kPopRetry: {
        const JsonFrame child = s.own[--s.n_own];
        if (!own_top()) return TopStep::kOther;
        on_child_done(g, s.own[s.n_own - 1], child);
        break;
      }
      case Step::kPush: {
        if (s.kept + s.n_own >= uint32_t(kJsonMaxDepth)) return TopStep::kRefused;
        uint32_t node = push.node;
        if (g.nodes[node].kind == JsonNodeKind::kAnyOf) {
          const uint32_t* offsets = g.dispatch_offsets.data() + g.nodes[node].keys;
          if (offsets[byte] == offsets[byte + 1]) return TopStep::kRefused;
          if (offsets[byte + 1] - offsets[byte] > 1) return TopStep::kOther;
          node = g.dispatch_nodes[offsets[byte]];
        }
        if (s.n_own == kJsonLightFrames) return TopStep::kOther;
        JsonFrame& pushed = s.own[s.n_own++];
        pushed = initial_frame(g, Push{node, push.extra});
        Push unused;
        if (step_frame(g, pushed, byte, unused) != Step::kConsume) return TopStep::kRefused;
        return close_light_top() ? TopStep::kTopOnly : TopStep::kOther;
      }
    }
  }
}

void JsonMatcher::from_light(const JsonLightStack& s, JsonMatcher& out) const {
  out.grammar_ = grammar_;
  out.frames_.assign(frames_.begin(), frames_.begin() + s.kept);
  out.frames_.insert(out.frames_.end(), s.own, s.own + s.n_own);
  out.ends_.assign(1, uint32_t(out.frames_.size()));
}

size_t JsonMatcher::plain_text_budget() const {
  size_t budget = SIZE_MAX;
  for (const uint32_t end : ends_) {
    const JsonFrame& top = frames_[end - 1];
    if (top.node == kJsonNoNode) return 0;
    const JsonNode& n = grammar_->nodes[top.node];
    // A pattern admits only some text: no shortcut.
    if (n.kind != JsonNodeKind::kString || top.phase != kStrChar || n.pattern != kJsonNoNode) return 0;
    if (n.max != 0xffffffffu) budget = std::min<size_t>(budget, size_t(n.max - top.value));
  }
  return budget;
}

void JsonMatcher::close_top(size_t base) {
  if (frames_.size() - base < 2 || !is_closed(*grammar_, frames_.back())) return;
  const JsonFrame child = frames_.back();
  frames_.pop_back();
  on_child_done(*grammar_, frames_.back(), child);
}

// Alternatives that have converged (e.g. integer and number after "1,") would double the work from here.
void JsonMatcher::remove_duplicate_stacks() {
  size_t n_kept = 0;
  uint32_t begin = 0, write = 0;
  for (size_t i = 0; i < ends_.size(); ++i) {
    const uint32_t end = ends_[i], size = end - begin;
    bool duplicate = false;
    uint32_t kept_begin = 0;
    for (size_t k = 0; k < n_kept && !duplicate; ++k) {
      const uint32_t kept_end = ends_[k];
      duplicate = kept_end - kept_begin == size &&
                  std::equal(frames_.begin() + kept_begin, frames_.begin() + kept_end, frames_.begin() + begin);
      kept_begin = kept_end;
    }
    if (!duplicate) {
      std::copy(frames_.begin() + begin, frames_.begin() + end, frames_.begin() + write);
      write += size;
      ends_[n_kept++] = write;
    }
    begin = end;
  }
  frames_.resize(write);
  ends_.resize(n_kept);
}

bool JsonMatcher::accepting() const {
  uint32_t begin = 0;
  for (const uint32_t end : ends_) {
    const uint32_t depth = end - begin;
    if ((depth == 1 || depth == 2) && is_complete(*grammar_, frames_[end - 1])) return true;
    begin = end;
  }
  return false;
}

bool JsonMatcher::finished() const {
  uint32_t begin = 0;
  for (const uint32_t end : ends_) {
    if (end - begin != 1 || frames_[begin].phase != kDocDone) return false;
    begin = end;
  }
  return !ends_.empty();
}

}  // namespace aerie
