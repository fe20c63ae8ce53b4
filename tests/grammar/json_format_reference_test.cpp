// The enforced `format`s (json_formats.h) against references written independently of their regexes: each
// reference is a hand-written parser that follows the RFC's rules (lengths counted, groups split and
// numbered, days per month computed), not a regex. Tens of thousands of strings per format, mutated from
// valid ones and built around the counted bounds (hostname labels of 63/64 characters and names of
// 253/254, uuid groups one digit short or long, emails of 254/255 characters, IPv6 group counts on
// either side of eight, "::" standing for one group), must get the same verdict from the automaton (with
// the format's length cap) as from the reference, and through the JSON matcher as a schema's string. The
// documented narrowings (json_formats.h) are the only allowed disagreements, and only one way: the
// reference accepts, the automaton refuses.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar/json_formats.h"
#include "grammar/json_grammar.h"
#include "grammar/json_schema.h"
#include "sample/sampling.h"

namespace aerie {
namespace {

// ---- references ----

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts(1);
  for (const char c : s) {
    if (c == sep) parts.emplace_back();
    else parts.back() += c;
  }
  return parts;
}

bool all_of(const std::string& s, bool (*f)(char)) {
  for (const char c : s)
    if (!f(c)) return false;
  return true;
}

// RFC 4122 3: 8-4-4-4-12 hex digits.
bool ref_uuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (i == 8 || i == 13 || i == 18 || i == 23 ? s[i] != '-' : !is_hex(s[i])) return false;
  return true;
}

// RFC 2673 3.2 dotted-quad: four decimal octets, no leading zeros.
bool ref_ipv4(const std::string& s) {
  const std::vector<std::string> parts = split(s, '.');
  if (parts.size() != 4) return false;
  for (const std::string& p : parts) {
    if (p.empty() || p.size() > 3 || !all_of(p, is_digit) || (p.size() > 1 && p[0] == '0')) return false;
    if (std::stoi(p) > 255) return false;
  }
  return true;
}

// RFC 4291 2.2 (RFC 3986 IPv6address): 8 groups of 1-4 hex digits, the last two possibly an IPv4 address,
// one "::" for one group or more. `smtp`: RFC 5321 4.1.3, where "::" stands for two groups or more.
bool ref_ipv6(const std::string& s, bool smtp) {
  const size_t gap = s.find("::");
  if (gap != std::string::npos && s.find("::", gap + 1) != std::string::npos) return false;
  std::vector<std::string> groups;
  auto take = [&](const std::string& part) {
    if (part.empty()) return true;
    for (const std::string& g : split(part, ':')) {
      if (g.empty()) return false;
      groups.push_back(g);
    }
    return true;
  };
  if (gap == std::string::npos ? !take(s) : !take(s.substr(0, gap)) || !take(s.substr(gap + 2))) return false;
  size_t n = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string& g = groups[i];
    if (g.find('.') != std::string::npos) {
      // An IPv4 tail only as the text's last group (not just before the "::").
      if (i + 1 != groups.size() || !ref_ipv4(g) || (s.size() >= 2 && s.compare(s.size() - 2, 2, "::") == 0))
        return false;
      n += 2;
    } else {
      if (g.size() > 4 || !all_of(g, is_hex)) return false;
      n += 1;
    }
  }
  if (gap == std::string::npos) return n == 8;
  return n <= (smtp ? 6u : 7u);
}

// RFC 1123 2.1 labels: 1-63 letters, digits and hyphens, no hyphen first or last; RFC 5891 4.2.3.1 forbids
// "--" in positions 3-4 except for A-labels ("xn--"), which `*idna` reports instead of judging (their
// Punycode is beyond this test: the documented narrowing refuses them all).
bool ref_label(const std::string& l, bool* idna) {
  if (l.empty() || l.size() > 63 || l.front() == '-' || l.back() == '-') return false;
  for (const char c : l)
    if (!is_alnum(c) && c != '-') return false;
  if (l.size() >= 4 && l[2] == '-' && l[3] == '-') {
    if ((l[0] == 'x' || l[0] == 'X') && (l[1] == 'n' || l[1] == 'N')) *idna = true;
    return *idna;
  }
  return true;
}

bool ref_domain(const std::string& s, bool* idna) {
  for (const std::string& label : split(s, '.'))
    if (!ref_label(label, idna)) return false;
  return true;
}

bool ref_hostname(const std::string& s, bool* idna) { return s.size() <= 253 && ref_domain(s, idna); }

bool is_atext(char c) { return is_alnum(c) || std::string("!#$%&'*+-/=?^_`{|}~").find(c) != std::string::npos; }

// RFC 5321 4.1.2 Mailbox (Dot-string or Quoted-string "@" Domain or address literal), at most 254 octets
// (4.5.3.1.3). No General-address-literal (the automaton has none either, and the suite has no case of
// one); IPv4 literals without leading zeros (likewise). The local part's own 64-octet cap is left out, as
// the automaton leaves it out (the documented widening in json_formats.h).
bool ref_email(const std::string& s, bool* idna) {
  if (s.size() > 254) return false;
  const size_t at = s.rfind('@');
  if (at == std::string::npos) return false;
  const std::string local = s.substr(0, at), domain = s.substr(at + 1);
  if (local.empty()) return false;
  if (local[0] == '"') {
    size_t i = 1;
    for (; i < local.size() && local[i] != '"'; ++i) {
      const char c = local[i];
      if (c == '\\') {
        if (++i == local.size() || local[i] < 32 || local[i] > 126) return false;
      } else if (c < 32 || c > 126) {
        return false;
      }
    }
    if (i + 1 != local.size()) return false;  // the closing quote must end the local part
  } else {
    for (const std::string& atom : split(local, '.'))
      if (atom.empty() || !all_of(atom, is_atext)) return false;
  }
  if (!domain.empty() && domain.front() == '[') {
    if (domain.back() != ']' || domain.size() < 2) return false;
    const std::string inner = domain.substr(1, domain.size() - 2);
    if (inner.rfind("IPv6:", 0) == 0) return ref_ipv6(inner.substr(5), true);
    return ref_ipv4(inner);
  }
  return ref_domain(domain, idna);
}

int number(const std::string& s, size_t at, size_t n) {
  for (size_t i = at; i < at + n; ++i)
    if (i >= s.size() || !is_digit(s[i])) return -1;
  return std::stoi(s.substr(at, n));
}

// RFC 3339 5.6 full-date, with the days of each month (February 29 in leap years).
bool ref_date(const std::string& s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  const int y = number(s, 0, 4), m = number(s, 5, 2), d = number(s, 8, 2);
  if (y < 0 || m < 1 || m > 12 || d < 1) return false;
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  const int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return d <= days[m - 1];
}

// RFC 3339 5.6 full-time; a leap second (:60) where the time is 23:59 in UTC (5.7). `*leap_offset` is set
// for a valid leap second written with a non-zero offset (the documented narrowing).
bool ref_time(const std::string& s, bool* leap_offset) {
  if (s.size() < 9 || s[2] != ':' || s[5] != ':') return false;
  const int h = number(s, 0, 2), m = number(s, 3, 2), sec = number(s, 6, 2);
  if (h < 0 || h > 23 || m < 0 || m > 59 || sec < 0 || sec > 60) return false;
  size_t i = 8;
  if (i < s.size() && s[i] == '.') {
    const size_t start = ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
    if (i == start) return false;
  }
  int offset = 0;  // minutes east of UTC
  const std::string zone = s.substr(i);
  if (zone == "Z" || zone == "z") {
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
    const int oh = number(zone, 1, 2), om = number(zone, 4, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59) return false;
    offset = (zone[0] == '+' ? 1 : -1) * (oh * 60 + om);
  } else {
    return false;
  }
  if (sec != 60) return true;
  const int utc = ((h * 60 + m - offset) % 1440 + 1440) % 1440;
  if (utc != 23 * 60 + 59) return false;
  *leap_offset = offset != 0;
  return true;
}

bool ref_date_time(const std::string& s, bool* leap_offset) {
  return s.size() > 11 && (s[10] == 'T' || s[10] == 't') && ref_date(s.substr(0, 10)) &&
         ref_time(s.substr(11), leap_offset);
}

// RFC 3339 Appendix A: "P" then weeks alone, or a date part whose units run Y, M, D without a gap
// (a year may drop the month only with the day: no "P1Y1D") and/or "T" and a time part H, M, S likewise.
bool ref_duration(const std::string& s) {
  if (s.size() < 3 || s[0] != 'P') return false;
  std::vector<std::pair<std::string, char>> date, time;  // (digits, unit)
  bool in_time = false;
  for (size_t i = 1; i < s.size();) {
    if (s[i] == 'T') {
      if (in_time) return false;
      in_time = true;
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    if (i == start || i == s.size()) return false;
    (in_time ? time : date).emplace_back(s.substr(start, i - start), s[i]);
    ++i;
  }
  if (in_time && time.empty()) return false;
  if (date.size() == 1 && date[0].second == 'W') return !in_time;
  auto run = [](const std::vector<std::pair<std::string, char>>& parts, const std::string& units) {
    if (parts.empty()) return true;
    const size_t first = units.find(parts[0].second);
    if (first == std::string::npos) return false;
    for (size_t k = 0; k < parts.size(); ++k)
      if (first + k >= units.size() || parts[k].second != units[first + k]) return false;
    return true;
  };
  return (!date.empty() || !time.empty()) && run(date, "YMD") && run(time, "HMS");
}

// ---- samples ----

struct Sampler {
  Rng rng;
  explicit Sampler(uint64_t seed) : rng(seed) {}
  size_t below(size_t n) { return size_t(rng.next_u64() % n); }
  bool chance(float p) { return rng.next_unit_float() < p; }
  char pick(const std::string& alphabet) { return alphabet[below(alphabet.size())]; }
  std::string run(const std::string& alphabet, size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += pick(alphabet);
    return s;
  }
  // One to three edits: replace, insert, delete, or repeat a piece.
  std::string mutate(std::string s, const std::string& alphabet) {
    for (size_t k = 1 + below(3); k-- > 0;) {
      const size_t op = below(4), at = s.empty() ? 0 : below(s.size());
      if (op == 0 && !s.empty()) s[at] = pick(alphabet);
      else if (op == 1) s.insert(s.begin() + std::ptrdiff_t(std::min(at, s.size())), pick(alphabet));
      else if (op == 2 && !s.empty()) s.erase(at, 1);
      else if (!s.empty()) s.insert(at, s.substr(at, 1 + below(std::min<size_t>(8, s.size() - at))));
    }
    return s;
  }
};

const std::string kHexDigits = "0123456789abcdefABCDEF";
const std::string kLabelChars = "abcxnXN019-";

std::string label(Sampler& r, size_t n) {
  std::string l = r.run(kLabelChars, n);
  if (r.chance(0.7f) && !l.empty()) l.front() = r.pick("abz09"), l.back() = r.pick("abz09");
  return l;
}

// A name of about `total` characters in labels of 1-64 (mostly near the 63 cap, or short ones).
std::string hostname(Sampler& r, size_t total) {
  std::string s;
  while (s.size() < total) {
    if (!s.empty()) s += '.';
    const size_t n = r.chance(0.5f) ? 61 + r.below(4) : 1 + r.below(6);
    s += label(r, std::min(n, std::max<size_t>(1, total - s.size())));
  }
  return s;
}

std::string ipv4(Sampler& r) {
  std::string s;
  for (int i = 0; i < 4; ++i) s += (i ? "." : "") + std::to_string(r.chance(0.1f) ? 250 + r.below(10) : r.below(256));
  return s;
}

// 5-9 groups, "::" (for one group or more) or none, sometimes an IPv4 tail.
std::string ipv6(Sampler& r) {
  const size_t n = 5 + r.below(5);
  std::vector<std::string> groups;
  for (size_t i = 0; i < n; ++i) groups.push_back(r.run(kHexDigits, 1 + r.below(4)));
  if (r.chance(0.3f)) groups.back() = ipv4(r);
  std::string s;
  const size_t gap = r.chance(0.7f) ? r.below(n + 1) : n + 1;
  for (size_t i = 0; i < n; ++i) {
    if (i == gap) s += "::";
    else if (i > 0) s += ':';
    s += groups[i];
  }
  if (gap == n) s += "::";
  return s;
}

std::string two(Sampler& r, int max) {
  const int v = int(r.below(size_t(max) + 1));
  return (v < 10 ? "0" : "") + std::to_string(v);
}

std::string date(Sampler& r) {
  static const int kYears[] = {1900, 2000, 2004, 2023, 2024, 2100, 2400, 1, 9999};
  const int y = r.chance(0.5f) ? kYears[r.below(9)] : int(r.below(10000));
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "%04d", y);
  return std::string(buffer) + "-" + two(r, 13) + "-" + two(r, 32);
}

std::string time_of_day(Sampler& r) {
  if (r.chance(0.05f)) {  // a leap second at 23:59 UTC, written with some offset
    const int offset = int(r.below(24 * 60)) * (r.chance(0.5f) ? 1 : -1), local = (23 * 60 + 59 + offset + 1440) % 1440;
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%02d:%02d:60%c%02d:%02d", local / 60, local % 60, offset < 0 ? '-' : '+',
                  std::abs(offset) / 60, std::abs(offset) % 60);
    return buffer;
  }
  std::string s = r.chance(0.3f) ? "23:59" : two(r, 24) + ":" + two(r, 60);
  s += ":" + (r.chance(0.3f) ? std::string("60") : two(r, 60));
  if (r.chance(0.3f)) s += "." + r.run("0123456789", 1 + r.below(4));
  if (r.chance(0.3f)) return s + r.pick("Zz");
  return s + r.pick("+-") + (r.chance(0.4f) ? "00:00" : two(r, 24) + ":" + two(r, 60));
}

std::string duration(Sampler& r) {
  std::string s = "P";
  if (r.chance(0.15f)) return s + std::to_string(r.below(60)) + "W";
  for (const char u : std::string("YMD"))
    if (r.chance(0.45f)) s += std::to_string(r.below(40)) + u;
  if (r.chance(0.6f)) {
    s += "T";
    for (const char u : std::string("HMS"))
      if (r.chance(0.45f)) s += std::to_string(r.below(70)) + u;
  }
  return s;
}

std::string email(Sampler& r) {
  std::string local;
  if (r.chance(0.3f)) {
    local = "\"";
    while (local.size() < 60 + r.below(7))
      local += r.chance(0.1f) ? std::string("\\") + r.pick("\"\\a@") : std::string(1, r.pick("ab @.(\""));
    local += "\"";
  } else {
    const size_t n = r.chance(0.5f) ? 62 + r.below(4) : 1 + r.below(10);
    while (local.size() < n) local += r.chance(0.1f) && !local.empty() ? '.' : r.pick("ab~!{#09");
  }
  if (r.chance(0.1f)) local = local.substr(0, 1 + r.below(local.size()));
  std::string domain = r.chance(0.15f)  ? "[" + ipv4(r) + "]"
                       : r.chance(0.2f) ? "[IPv6:" + ipv6(r) + "]"
                                        : hostname(r, r.chance(0.3f) ? 180 + r.below(80) : 5 + r.below(20));
  return local + "@" + domain;
}

struct FormatCase {
  std::string format;
  std::function<std::string(Sampler&)> make;
  std::string alphabet;  // what mutations insert
  // The reference's verdict; *narrowed is set where a valid string falls under a documented narrowing.
  std::function<bool(const std::string&, bool* narrowed)> valid;
};

std::vector<FormatCase> cases() {
  return {
      {"uuid",
       [](Sampler& r) {
         std::string s;
         for (const int n : {8, 4, 4, 4, 12})
           s += (s.empty() ? "" : "-") + r.run(kHexDigits, size_t(n) + (r.chance(0.1f) ? r.below(3) : 1) - 1);
         return s;
       },
       "0aF-g:", [](const std::string& s, bool*) { return ref_uuid(s); }},
      {"ipv4", ipv4, "0129.a:", [](const std::string& s, bool*) { return ref_ipv4(s); }},
      {"ipv6", ipv6, "0aF:.g", [](const std::string& s, bool*) { return ref_ipv6(s, false); }},
      {"hostname", [](Sampler& r) { return hostname(r, r.chance(0.5f) ? 245 + r.below(12) : 1 + r.below(70)); },
       "a0-.xn_", [](const std::string& s, bool* narrowed) { return ref_hostname(s, narrowed); }},
      {"email", email, "a.@\"\\[]:-0 ", [](const std::string& s, bool* narrowed) { return ref_email(s, narrowed); }},
      {"date", date, "0129-:", [](const std::string& s, bool*) { return ref_date(s); }},
      {"time", time_of_day, "0129:.Zz+-", [](const std::string& s, bool* narrowed) { return ref_time(s, narrowed); }},
      {"date-time", [](Sampler& r) { return date(r) + (r.chance(0.5f) ? "T" : "t") + time_of_day(r); }, "0129:-Tt.Z+",
       [](const std::string& s, bool* narrowed) { return ref_date_time(s, narrowed); }},
      {"duration", duration, "0129PTYMDHSW", [](const std::string& s, bool*) { return ref_duration(s); }},
  };
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (const char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

TEST(JsonFormatReference, AutomataAgreeWithIndependentParsers) {
  for (const FormatCase& fc : cases()) {
    SCOPED_TRACE(fc.format);
    const JsonFormat format = json_format(fc.format);
    ASSERT_NE(format.automaton, nullptr);
    const auto grammar = compile_json_schema(nlohmann::ordered_json{{"type", "string"}, {"format", fc.format}});
    Sampler r(std::hash<std::string>{}(fc.format));
    size_t n_valid = 0, n_invalid = 0, n_narrowed = 0, n_mismatches = 0;
    for (int i = 0; i < 20000; ++i) {
      std::string s = fc.make(r);
      if (r.chance(0.5f)) s = r.mutate(s, fc.alphabet);
      bool narrowed = false;
      const bool valid = fc.valid(s, &narrowed);
      const bool accepted = format.automaton->matches(s) && code_points(s) <= format.max_length;
      if (valid && narrowed) {
        ++n_narrowed;
        EXPECT_FALSE(accepted) << "a documented narrowing that the automaton accepts: " << s;
        continue;
      }
      (valid ? n_valid : n_invalid)++;
      if (accepted != valid && n_mismatches++ < 10) ADD_FAILURE() << (valid ? "refused: " : "accepted: ") << s;
      if (i % 8 == 0) {  // the same verdict through the matcher, as a schema's string
        JsonMatcher m(*grammar);
        const std::string document = nlohmann::json(s).dump();
        EXPECT_EQ(m.feed(std::string_view(document)) && m.accepting(), accepted) << document;
      }
    }
    EXPECT_EQ(n_mismatches, 0u);
    // Both verdicts are well represented, so neither side can pass by accepting or refusing everything.
    EXPECT_GE(n_valid, 1500u);
    EXPECT_GE(n_invalid, 1500u);
    std::printf("%-10s %5zu valid, %5zu invalid, %4zu under a documented narrowing\n", fc.format.c_str(), n_valid,
                n_invalid, n_narrowed);
  }
}

// The counted bounds one by one, at and past each limit.
TEST(JsonFormatReference, CountedBoundsAreExact) {
  auto accepts = [](const std::string& name, const std::string& s) {
    const JsonFormat f = json_format(name);
    return f.automaton->matches(s) && code_points(s) <= f.max_length;
  };
  const std::string l63(63, 'a');
  EXPECT_TRUE(accepts("hostname", l63 + ".com"));
  EXPECT_FALSE(accepts("hostname", l63 + "a.com"));
  const std::string name253 = l63 + "." + l63 + "." + l63 + "." + std::string(61, 'b');
  ASSERT_EQ(name253.size(), 253u);
  EXPECT_TRUE(accepts("hostname", name253));
  EXPECT_FALSE(accepts("hostname", name253 + "b"));
  EXPECT_TRUE(accepts("uuid", "0123abcd-ef01-2345-6789-ABCDEF012345"));
  EXPECT_FALSE(accepts("uuid", "0123abcd-ef01-2345-6789-ABCDEF0123456"));
  EXPECT_FALSE(accepts("uuid", "0123abc-def01-2345-6789-ABCDEF012345"));
  // An "@" inside a quoted local part belongs to the local part; 254 characters in all at most.
  EXPECT_TRUE(accepts("email", "\"a@b\"@" + l63 + "." + l63 + "." + l63 + "." + std::string(56, 'c')));
  EXPECT_FALSE(accepts("email", "\"a@b\"@" + l63 + "." + l63 + "." + l63 + "." + std::string(57, 'c')));
  // RFC 5321's "::" stands for two groups or more; RFC 4291's for one or more.
  EXPECT_TRUE(accepts("email", "a@[IPv6:1:2:3:4:5::6]"));
  EXPECT_FALSE(accepts("email", "a@[IPv6:1:2:3:4:5:6::7]"));
  EXPECT_TRUE(accepts("ipv6", "1:2:3:4:5:6::7"));
  EXPECT_TRUE(accepts("email", "a@[IPv6:1:2:3::4:1.2.3.4]"));
  EXPECT_FALSE(accepts("email", "a@[IPv6:1:2:3:4::5:1.2.3.4]"));
}

}  // namespace
}  // namespace aerie
