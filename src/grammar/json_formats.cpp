#include "grammar/json_formats.h"

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "core/error.h"

namespace aerie {
namespace {

std::string group(const std::string& s) { return "(?:" + s + ")"; }

// RFC 3339 section 5.6, with exact days per month: 31-day months, 30-day months, February up to 28, and
// February 29 in leap years (divisible by 4 and not by 100, or by 400).
const std::string kLeapYear = group("\\d\\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00");
const std::string kDate = group(
    "\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)"
    "|02-(?:0[1-9]|1\\d|2[0-8]))|" +
    kLeapYear + "-02-29");
const std::string kOffset = group("[Zz]|[+-](?:[01]\\d|2[0-3]):[0-5]\\d");
// A leap second only at 23:59:60 UTC (see json_formats.h).
const std::string kTime = group("(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d+)?" + kOffset +
                                "|23:59:60(?:\\.\\d+)?(?:[Zz]|[+-]00:00)");
const std::string kDateTime = kDate + "[Tt]" + kTime;
// RFC 3339 Appendix A.
const std::string kDurationTime = group("T(?:\\d+H(?:\\d+M(?:\\d+S)?)?|\\d+M(?:\\d+S)?|\\d+S)");
const std::string kDuration = "P(?:(?:\\d+D|\\d+M(?:\\d+D)?|\\d+Y(?:\\d+M(?:\\d+D)?)?)" + kDurationTime + "?|" +
                              kDurationTime + "|\\d+W)";

const std::string kDecOctet = group("25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d");
const std::string kIpv4 = kDecOctet + "(?:\\." + kDecOctet + "){3}";
// RFC 4291 2.2 (as RFC 3986's IPv6address spells it out): eight groups, one :: for a run of zero groups,
// the last two groups optionally an IPv4 address.
const std::string kH16 = "[0-9A-Fa-f]{1,4}";
const std::string kLs32 = group(kH16 + ":" + kH16 + "|" + kIpv4);
std::string h16_colon(int n) { return "(?:" + kH16 + ":){" + std::to_string(n) + "}"; }
std::string h16_upto(int n) { return group("(?:" + kH16 + ":){0," + std::to_string(n) + "}" + kH16) + "?"; }
const std::string kIpv6 = group(h16_colon(6) + kLs32 + "|::" + h16_colon(5) + kLs32 + "|" + h16_upto(0) +
                                "::" + h16_colon(4) + kLs32 + "|" + h16_upto(1) + "::" + h16_colon(3) + kLs32 + "|" +
                                h16_upto(2) + "::" + h16_colon(2) + kLs32 + "|" + h16_upto(3) + "::" + kH16 + ":" +
                                kLs32 + "|" + h16_upto(4) + "::" + kLs32 + "|" + h16_upto(5) + "::" + kH16 + "|" +
                                h16_upto(6) + "::");

// RFC 1123 labels of 1-63 letters, digits and hyphens, not starting or ending with a hyphen, and not
// "--" in positions 3-4 (see json_formats.h): lengths 1-4, then 5-63 with (3, 4) in {AH, -A}.
const std::string kAlnum = "[A-Za-z0-9]", kHyphenated = "[A-Za-z0-9-]";
const std::string kLabel = group(kAlnum + "(?:" + kHyphenated + "{0,2}" + kAlnum + ")?|" + kAlnum + kHyphenated +
                                 "(?:" + kAlnum + kHyphenated + "|-" + kAlnum + ")" + kHyphenated + "{0,58}" + kAlnum);
const std::string kHostname = kLabel + "(?:\\." + kLabel + ")*";

// RFC 5321 4.1.3's IPv6 address literal, narrower than RFC 4291's text form: "::" stands for two groups or
// more, so at most 6 groups beside it (at most 4 before an IPv4 tail), where RFC 4291 allows 7 (5).
std::string smtp_ipv6() {
  // str_cat, not operator+ chains: GCC 12's -Wrestrict misfires on those here.
  auto exactly = [](int n) { return n == 0 ? std::string() : str_cat(kH16, "(?::", kH16, "){", n - 1, "}"); };
  auto up_to = [](int n, const char* tail) {
    return n == 0 ? std::string() : str_cat("(?:", kH16, "(?::", kH16, "){0,", n - 1, "}", tail, ")?");
  };
  std::string out = str_cat(exactly(8), "|", exactly(6), ":", kIpv4);
  for (int before = 0; before <= 6; ++before) out += str_cat("|", exactly(before), "::", up_to(6 - before, ""));
  for (int before = 0; before <= 4; ++before) out += str_cat("|", exactly(before), "::", up_to(4 - before, ":"), kIpv4);
  return group(out);
}

// RFC 5321 4.1.2 Mailbox, with RFC 5322 atext.
const std::string kAtext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
const std::string kLocalPart = group(kAtext + "+(?:\\." + kAtext + "+)*|\"(?:[ !#-\\[\\]-~]|\\\\[ -~])*\"");
const std::string kEmail = kLocalPart + "@" + group(kHostname + "|\\[" + kIpv4 + "\\]|\\[IPv6:" + smtp_ipv6() + "\\]");

// RFC 3986 appendix A.
const std::string kUnreserved = "A-Za-z0-9\\-._~", kSubDelims = "!$&'()*+,;=";
const std::string kPct = "%[0-9A-Fa-f]{2}";
std::string chars(const std::string& extra) { return group("[" + kUnreserved + kSubDelims + extra + "]|" + kPct); }
const std::string kPchar = chars(":@");
const std::string kSegment = kPchar + "*", kSegmentNz = kPchar + "+", kSegmentNzNc = chars("@") + "+";
const std::string kIpLiteral = "\\[" + group(kIpv6 + "|[Vv][0-9A-Fa-f]+\\.[" + kUnreserved + kSubDelims + ":]+") +
                               "\\]";
const std::string kAuthority = group(chars(":") + "*@") + "?" + group(kIpLiteral + "|" + chars("") + "*") +
                               "(?::\\d*)?";
const std::string kQueryFragment = "(?:\\?" + group(kPchar + "|[/?]") + "*)?(?:#" + group(kPchar + "|[/?]") + "*)?";
const std::string kPathAbempty = "(?:/" + kSegment + ")*";
const std::string kPathAbsolute = "/(?:" + kSegmentNz + kPathAbempty + ")?";
const std::string kScheme = "[A-Za-z][A-Za-z0-9+\\-.]*";
const std::string kUri = kScheme + ":" +
                         group("//" + kAuthority + kPathAbempty + "|" + kPathAbsolute + "|" + kSegmentNz +
                               kPathAbempty + "|") +
                         kQueryFragment;
const std::string kRelativeRef = group("//" + kAuthority + kPathAbempty + "|" + kPathAbsolute + "|" + kSegmentNzNc +
                                       kPathAbempty + "|") +
                                 kQueryFragment;
const std::string kUriReference = group(kUri + "|" + kRelativeRef);

const std::string kUuid = "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}";

struct FormatEntry {
  std::string pattern;
  uint32_t max_length;
};

const std::map<std::string, FormatEntry, std::less<>>& format_table() {
  static const std::map<std::string, FormatEntry, std::less<>> kTable = {
      {"date", {kDate, 0xffffffffu}},
      {"time", {kTime, 0xffffffffu}},
      {"date-time", {kDateTime, 0xffffffffu}},
      {"duration", {kDuration, 0xffffffffu}},
      {"email", {kEmail, 254}},        // RFC 5321 4.5.3.1.3: a path of 256 octets, less the angle brackets
      {"hostname", {kHostname, 253}},  // RFC 1123 2.1 / RFC 1035 2.3.4
      {"ipv4", {kIpv4, 0xffffffffu}},
      {"ipv6", {kIpv6, 0xffffffffu}},
      {"uuid", {kUuid, 0xffffffffu}},
      {"uri", {kUri, 0xffffffffu}},
      {"uri-reference", {kUriReference, 0xffffffffu}},
  };
  return kTable;
}

}  // namespace

JsonFormat json_format(std::string_view name) {
  // Each format is compiled on its first use (once per process, thread-safe): a schema with one `format`
  // does not pay for the others (uri-reference and email alone take tens of milliseconds).
  struct Lazy {
    std::once_flag once;
    std::optional<RegexDfa> automaton;
  };
  static std::map<std::string, Lazy, std::less<>> lazy = [] {
    std::map<std::string, Lazy, std::less<>> formats;
    for (const auto& entry : format_table()) formats.try_emplace(entry.first);
    return formats;
  }();
  const auto it = lazy.find(name);
  if (it == lazy.end()) return {};
  const FormatEntry& entry = format_table().find(name)->second;
  Lazy& format = it->second;
  std::call_once(format.once, [&] { format.automaton.emplace(compile_regex(entry.pattern, RegexMode::kFullMatch)); });
  return JsonFormat{&*format.automaton, entry.max_length};
}

std::string_view json_format_pattern(std::string_view name) {
  const auto it = format_table().find(name);
  return it == format_table().end() ? std::string_view() : std::string_view(it->second.pattern);
}

}  // namespace aerie
