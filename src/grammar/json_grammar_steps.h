// Internals of the JSON matcher (json_grammar.h) shared by its files: json_grammar.cpp (stacks, objects,
// arrays, literals, the matcher), json_grammar_strings.cpp (the string automaton and patterns) and
// json_grammar_numbers.cpp (numbers and their bounds). Not for use elsewhere.
#pragma once

#include <cstdint>

#include "grammar/json_grammar.h"

namespace aerie::json_steps {

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

inline bool is_whitespace(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
inline bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }
inline bool is_hex(uint8_t b) { return is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }
inline bool in_range(uint8_t b, uint8_t lo, uint8_t hi) { return b >= lo && b <= hi; }

inline Step to_phase(JsonFrame& f, uint8_t phase) {
  f.phase = phase;
  f.whitespace = 0;
  return Step::kConsume;
}

// Whether a string, array or map node has length bounds, so that its frame counts characters, items or
// members; an unbounded one keeps 0 (equal frames for equal states: the mask cache keys on them).
inline bool counts(const JsonNode& n) { return n.min != 0 || n.max != 0xffffffffu; }

// The string automaton as a table: kStringTable.next[phase][byte] is the next phase, with kStartsCharacter
// set when the byte starts a character (counted against minLength/maxLength), or kStringRefused
// (json_grammar_strings.cpp).
inline constexpr uint8_t kStringRefused = 0xff;
inline constexpr uint8_t kStartsCharacter = 0x80;
struct StringTable {
  uint8_t next[kStrClosed + 1][256];
  StringTable();
};
extern const StringTable kStringTable;

Step step_string(const JsonGrammar& g, const JsonNode& n, JsonFrame& f, uint8_t b);

// The number read so far is a complete value within the bounds (and a multiple of multipleOf: `remainder`).
bool number_done(const JsonNode& n, uint8_t phase, uint64_t value, uint64_t remainder);
Step step_number(const JsonNode& n, JsonFrame& f, uint8_t b);

}  // namespace aerie::json_steps
