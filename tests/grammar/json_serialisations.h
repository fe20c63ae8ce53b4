// Which serialisations of a parsed JSON value a JsonMatcher accepts: the judge of "producible" for the
// JSON-Schema-Test-Suite test (json_schema_suite_test.cpp) and the property test.
//
// A value has many texts; the grammar emits some of them (json_grammar.h: compact, listed properties in
// schema order, bounded numbers without an exponent). The search feeds every text in this family and
// reports the first one the matcher accepts as a complete document:
// - no whitespace (the grammar's default kCompact);
// - object members in every order: the instance's own order first, then the others, depth first, each
//   key written as its compact JSON string. The matcher refuses a wrong key at its first byte, so a
//   listed object costs about one probe per remaining key; a map object admits all n! orders, which is
//   why the search has a budget;
// - numbers as nlohmann's dump (the shortest text that round-trips, as Python's json.dumps writes it,
//   e.g. 1.0, 2.5, 1e-05, 1.2e+52) and in plain decimal (no exponent, an integral value without ".0":
//   1, 0.00001, 12000...0) and, when integral, with ".0" (so 1.0 is found as the integer 1, and -2 as the
//   enum literal -2.0: JSON Schema compares numbers by value);
// - strings as UTF-8 (nlohmann's dump: \" \\ \b \f \n \r \t, other controls as \u00XX) and, when that
//   differs, with every non-ASCII character \u-escaped (json.dumps' default ensure_ascii), so maxLength
//   is judged over both.
// "Valid" instances must have some accepted text; "invalid" ones must have none.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_grammar.h"

namespace aerie::test {

// `text`, a JSON number, in plain decimal: no exponent, no trailing fraction zeros, no "." when integral.
inline std::string plain_decimal(std::string_view text) {
  const bool negative = !text.empty() && text[0] == '-';
  std::string digits;
  int64_t point = -1;  // integer digits in `digits`
  size_t i = negative ? 1 : 0;
  for (; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
    if (text[i] == '.') point = int64_t(digits.size());
    else digits += text[i];
  }
  if (point < 0) point = int64_t(digits.size());
  if (i < text.size()) point += std::stoll(std::string(text.substr(i + 1)));
  std::string whole, fraction;
  if (point <= 0) {
    whole = "0";
    fraction = std::string(size_t(-point), '0') + digits;
  } else if (size_t(point) >= digits.size()) {
    whole = digits + std::string(size_t(point) - digits.size(), '0');
  } else {
    whole = digits.substr(0, size_t(point));
    fraction = digits.substr(size_t(point));
  }
  whole.erase(0, std::min(whole.find_first_not_of('0'), whole.size() - 1));
  fraction.erase(fraction.find_last_not_of('0') + 1);
  std::string out = negative ? "-" : "";
  out += whole;
  if (!fraction.empty()) out += "." + fraction;
  return out;
}

// The texts the search tries for a scalar (see above), without duplicates.
template <typename Json>
std::vector<std::string> scalar_spellings(const Json& value) {
  std::vector<std::string> out = {value.dump()};
  auto add = [&](std::string s) {
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(std::move(s));
  };
  if (value.is_number()) {
    const std::string plain = plain_decimal(out[0]);
    add(plain);
    if (plain.find('.') == std::string::npos) add(plain + ".0");  // an integral value as a float literal
  }
  if (value.is_string()) add(value.dump(-1, ' ', /*ensure_ascii=*/true));
  return out;
}

class SerialisationSearch {
 public:
  // budget: bytes-feeding steps over the whole search (a map object with n members has n! orders).
  explicit SerialisationSearch(size_t budget = 2'000'000) : budget_(budget) {}

  // The first accepted text of `value` under `grammar` (a complete document), or nullopt when there is
  // none or the budget ran out (then exhausted() is true: the answer is unknown).
  template <typename Json>
  std::optional<std::string> find(const JsonGrammar& grammar, const Json& value) {
    text_.clear();
    steps_ = 0;
    exhausted_ = false;
    const bool found = feed_value<Json>(JsonMatcher(grammar), value,
                                        [](const JsonMatcher& m) { return m.accepting(); });
    if (!found || exhausted_) return std::nullopt;
    return text_;
  }
  bool exhausted() const { return exhausted_; }

 private:
  // A continuation: given the state after a piece of text, returns true to stop (found, or out of budget).
  using Next = std::function<bool(const JsonMatcher&)>;

  bool feed(const JsonMatcher& state, std::string_view bytes, const Next& next) {
    if (++steps_ > budget_) {
      exhausted_ = true;
      return true;
    }
    JsonMatcher moved = state;
    if (!moved.feed(bytes)) return false;
    const size_t length = text_.size();
    text_ += bytes;
    if (next(moved)) return true;
    text_.resize(length);
    return false;
  }

  template <typename Json>
  bool feed_value(const JsonMatcher& state, const Json& value, const Next& next) {
    if (value.is_object()) {
      std::vector<const std::string*> keys;
      std::vector<const Json*> values;
      for (const auto& [key, member] : value.items()) {
        keys.push_back(&key);
        values.push_back(&member);
      }
      std::vector<uint8_t> used(keys.size(), 0);
      return feed(state, "{", [&](const JsonMatcher& m) { return feed_members<Json>(m, keys, values, used, 0, next); });
    }
    if (value.is_array())
      return feed(state, "[", [&](const JsonMatcher& m) { return feed_items<Json>(m, value, 0, next); });
    for (const std::string& spelling : scalar_spellings(value))
      if (feed(state, spelling, next)) return true;
    return false;
  }

  template <typename Json>
  bool feed_members(const JsonMatcher& state, const std::vector<const std::string*>& keys,
                    const std::vector<const Json*>& values, std::vector<uint8_t>& used, size_t n_used,
                    const Next& next) {
    if (n_used == keys.size()) return feed(state, "}", next);
    for (size_t i = 0; i < keys.size(); ++i) {
      if (used[i]) continue;
      used[i] = 1;
      std::string prefix = n_used ? "," : "";
      prefix += Json(*keys[i]).dump();
      prefix += ':';
      const bool stop = feed(state, prefix, [&](const JsonMatcher& m) {
        return feed_value<Json>(m, *values[i], [&](const JsonMatcher& after) {
          return feed_members<Json>(after, keys, values, used, n_used + 1, next);
        });
      });
      used[i] = 0;
      if (stop) return true;
    }
    return false;
  }

  template <typename Json>
  bool feed_items(const JsonMatcher& state, const Json& array, size_t i, const Next& next) {
    if (i == array.size()) return feed(state, "]", next);
    return feed(state, i ? "," : "", [&](const JsonMatcher& m) {
      return feed_value<Json>(m, array[i],
                              [&](const JsonMatcher& after) { return feed_items<Json>(after, array, i + 1, next); });
    });
  }

  size_t budget_;
  size_t steps_ = 0;
  bool exhausted_ = false;
  std::string text_;  // the text along the current path
};

}  // namespace aerie::test
