// JSON Schema `format` as regular expressions (regex.h), for the formats structured output enforces:
// date, time, date-time, duration (RFC 3339 and its Appendix A), email (RFC 5321 mailbox), hostname
// (RFC 1123), ipv4, ipv6 (RFC 4291 text forms), uuid (RFC 4122), uri and uri-reference (RFC 3986). Each is
// a full-match pattern over the decoded string, plus a length cap where the RFC has one that a regex
// would only express with a blow-up of states. Unknown formats are annotations (JSON Schema 2020-12
// 7.2.1): the caller ignores them.
//
// Deliberate narrowings (the automaton admits fewer strings than the format; every admitted one is valid),
// each also listed in docs/structured_output.md:
// - time / date-time: a leap second (:60) only as 23:59:60 in UTC (Z, +00:00 or -00:00); RFC 3339 also
//   allows the same instant written with another offset (e.g. 15:59:60-08:00).
// - hostname (and an email's domain): no label may have "--" in its third and fourth characters, so
//   IDNA A-labels ("xn--...") are refused: whether one is valid Punycode of a valid U-label is beyond a
//   regular language.
// - email: a dot-atom or quoted-string local part and a hostname or an address literal ([IPv4] without
//   leading zeros, or [IPv6:...] as RFC 5321 4.1.3 spells it: "::" for two groups or more) as the domain;
//   no General-address-literal; 254 characters at most in all. (Widening: RFC 5321's 64-octet cap on the
//   local part alone (4.5.3.1.1) is not enforced. An exact cap is a product with a counter, built and tested
//   once (git history: cap_before_last), but its per-character states defeat the mask's loop shortcut and
//   cache: schemas with an email field then took 2-6 ms per mask at p95 instead of ~0.5 ms.)
#pragma once

#include <cstdint>
#include <string_view>

#include "grammar/regex.h"

namespace aerie {

struct JsonFormat {
  const RegexDfa* automaton = nullptr;  // full match over the decoded string; shared, built once
  uint32_t max_length = 0xffffffffu;    // code points (RFC length limits)
};

// The enforced format of that name, or automaton == nullptr for an unknown one. Thread-safe; the first
// call for a format compiles it (up to tens of milliseconds), later ones share it.
JsonFormat json_format(std::string_view name);

// The ECMAScript pattern behind a known format ("" for an unknown one), for tests and messages.
std::string_view json_format_pattern(std::string_view name);

}  // namespace aerie
