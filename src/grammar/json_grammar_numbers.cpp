// Numbers in the JSON matcher (json_grammar_steps.h): RFC 8259 syntax, integer bounds checked digit by
// digit, multipleOf on integers by the remainder so far.
#include <algorithm>

#include "grammar/json_grammar_steps.h"

namespace aerie::json_steps {
namespace {

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

}  // namespace

// The number read so far is a complete value within the bounds (and a multiple of multipleOf: `remainder`).
bool number_done(const JsonNode& n, uint8_t phase, uint64_t value, uint64_t remainder) {
  if (!number_complete(phase)) return false;
  if (n.multiple_of != 0 && remainder != 0) return false;
  if (!n.bounded) return true;
  const bool negative = value & kNegativeBit;
  const Fraction f = phase == kNumFrac && (value & kFractionBit) ? Fraction::kPositive : Fraction::kZero;
  return magnitudes(n, negative, f).contains(int64_t(value & kMagnitudeMask));
}

namespace {

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

}  // namespace

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

}  // namespace aerie::json_steps

namespace aerie {

using namespace json_steps;

bool json_number_satisfiable(const JsonNode& n) {
  if (n.multiple_of != 0)  // an integer node: some multiple within the positive or the negative span
    return reachable_multiple(0, 0, magnitudes(n, false, Fraction::kZero), n.multiple_of) ||
           reachable_multiple(0, 0, magnitudes(n, true, Fraction::kZero), n.multiple_of);
  return any_fraction(n, [&](Fraction f) {
    const Span positive = magnitudes(n, false, f), negative = magnitudes(n, true, f);
    return positive.min <= positive.max || negative.min <= negative.max;
  });
}

}  // namespace aerie
