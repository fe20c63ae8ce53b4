// The string automaton of the JSON matcher (json_grammar_steps.h): UTF-8, escapes, length bounds and a
// pattern's automaton stepped on the decoded text.
#include <algorithm>
#include <cstring>

#include "grammar/json_grammar_steps.h"

namespace aerie::json_steps {
namespace {

// The string automaton, byte by byte (kStringTable holds it as a table: one lookup per byte keeps the mask
// walk through string content cheap). Closing quotes lead to kStrClosed.
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

}  // namespace

StringTable::StringTable() {
  for (int phase = 0; phase <= kStrClosed; ++phase)
    for (int b = 0; b < 256; ++b) next[phase][b] = string_transition(uint8_t(phase), uint8_t(b));
}
const StringTable kStringTable;

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

}  // namespace aerie::json_steps
