#include "cli/args.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace aerie::cli {
namespace {

// Whether `text` is one number within `range` (its list flag aside).
bool in_range(const Range& range, const std::string& text) {
  if (range.integer) {
    int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc() && ptr == text.data() + text.size() && value >= range.min_integer &&
           value <= range.max_integer;
  }
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size() && std::isfinite(value) &&
         (range.min_exclusive ? value > range.min : value >= range.min) && value <= range.max;
}

// Throws when `text` is not a number (with range.list: a comma-separated list of numbers, none empty)
// within `range`, naming the option, the range and the value.
void check_range(const std::string& name, const Range& range, const std::string& text) {
  bool ok = true;
  if (range.list) {
    size_t begin = 0;
    for (size_t comma; ok && (comma = text.find(',', begin)) != std::string::npos; begin = comma + 1)
      ok = in_range(range, text.substr(begin, comma - begin));
    ok = ok && in_range(range, text.substr(begin));
  } else {
    ok = in_range(range, text);
  }
  AERIE_CHECK(ok, "option ", name, " must be ", range.text(), ", got '", text, "'");
}

// Throws when `text` is none of the option's choices (or aliases), naming the option and the choices.
void check_choice(const OptionSpec& spec, const std::string& text) {
  for (const std::vector<std::string>* names : {&spec.choices, &spec.aliases})
    for (const std::string& name : *names)
      if (text == name) return;
  const std::string shown = spec.bare_refusal ? text : "'" + text + "'";
  throw_error(str_cat(spec.name, " must be ", or_list(spec.choices), ", got ", shown));
}

}  // namespace

std::string Range::text() const {
  if (integer && list) return str_cat("integers in [", min_integer, ", ", max_integer, "], comma-separated");
  if (integer) return str_cat("an integer in [", min_integer, ", ", max_integer, "]");
  return str_cat("a number in ", min_exclusive ? "(" : "[", min, ", ", max, "]");
}

std::string Default::text() const {
  if (const auto* i = std::get_if<int64_t>(&value_)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&value_)) return str_cat(*d);
  if (const auto* s = std::get_if<std::string>(&value_)) return *s;
  return "";
}

std::string or_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

Args::Args(const std::vector<std::string>& argv, std::vector<OptionSpec> specs) : specs_(std::move(specs)) {
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string name = argv[i];
    std::optional<std::string> value;
    if (const size_t eq = name.find('='); eq != std::string::npos && name.rfind("--", 0) == 0) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const OptionSpec* spec = find(name);
    AERIE_CHECK(spec != nullptr, "unknown option '", name, "'");
    if (spec->takes_value && !value) {
      AERIE_CHECK(i + 1 < argv.size(), "option ", name, " needs a value");
      value = argv[++i];
    }
    AERIE_CHECK(spec->takes_value || !value, "option ", name, " takes no value");
    if (spec->range) check_range(name, *spec->range, *value);
    if (!spec->choices.empty()) check_choice(*spec, *value);
    values_[name] = value.value_or("");
    if (spec->multiple) {
      std::vector<std::string>& all = multiple_[name];
      all.push_back(*value);
      while (i + 1 < argv.size() && argv[i + 1].rfind("--", 0) != 0) all.push_back(argv[++i]);
    }
  }
}

std::vector<std::string> Args::all(const std::string& name) const {
  const auto it = multiple_.find(name);
  return it != multiple_.end() ? it->second : std::vector<std::string>{};
}

const OptionSpec* Args::find(const std::string& name) const {
  for (const OptionSpec& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

const Default& Args::fallback_of(const std::string& name) const {
  const OptionSpec* spec = find(name);
  AERIE_CHECK(spec != nullptr, "internal: ", name, " is not an option of this command");
  return spec->fallback;
}

std::string Args::str(const std::string& name) const {
  const auto it = values_.find(name);
  return it != values_.end() ? it->second : fallback_of(name).text();
}

std::string Args::required(const std::string& name) const {
  AERIE_CHECK(has(name), "missing required option ", name);
  return values_.at(name);
}

int64_t Args::integer(const std::string& name) const {
  if (has(name)) return integer(name, 0);
  const auto* value = std::get_if<int64_t>(&fallback_of(name).value());
  AERIE_CHECK(value != nullptr, "internal: ", name, " has no integer default");
  return *value;
}

double Args::number(const std::string& name) const {
  if (has(name)) return number(name, 0.0);
  const auto& value = fallback_of(name).value();
  if (const auto* i = std::get_if<int64_t>(&value)) return double(*i);
  const auto* d = std::get_if<double>(&value);
  AERIE_CHECK(d != nullptr, "internal: ", name, " has no numeric default");
  return *d;
}

int64_t Args::integer(const std::string& name, int64_t fallback) const {
  if (!has(name)) return fallback;
  const std::string& text = values_.at(name);
  int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  AERIE_CHECK(ec == std::errc() && ptr == text.data() + text.size(), "option ", name,
              " expects an integer, got '", text, "'");
  return value;
}

double Args::number(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  const std::string& text = values_.at(name);
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  AERIE_CHECK(!text.empty() && end == text.c_str() + text.size(), "option ", name, " expects a number, got '",
              text, "'");
  return value;
}

std::vector<int64_t> Args::integers(const std::string& name) const {
  if (!has(name) && declares(name) && fallback_of(name).given()) return parse_int_list(str(name), name);
  return parse_int_list(required(name), name);
}

std::vector<double> Args::numbers(const std::string& name) const { return parse_number_list(str(name), name); }

std::vector<double> Args::numbers(const std::string& name, const std::string& fallback) const {
  return parse_number_list(has(name) ? values_.at(name) : fallback, name);
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    AERIE_CHECK(!item.empty() && ec == std::errc() && ptr == item.data() + item.size(), what,
                ": expected comma-separated integers, got '", text, "'");
    out.push_back(value);
  }
  AERIE_CHECK(!out.empty(), what, ": expected at least one integer");
  return out;
}

std::vector<double> parse_number_list(const std::string& text, const std::string& what) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const double value = std::strtod(item.c_str(), &end);
    AERIE_CHECK(!item.empty() && end == item.c_str() + item.size(), what, ": expected comma-separated numbers, got '",
                text, "'");
    out.push_back(value);
  }
  AERIE_CHECK(!out.empty(), what, ": expected at least one number");
  return out;
}

std::string usage(const std::string& command, const std::vector<OptionSpec>& specs) {
  std::ostringstream out;
  out << "usage: aerie " << command << " [options]\n";
  for (const OptionSpec& s : specs) {
    const std::string shape = !s.takes_value ? "" : s.free_text.empty() ? " VALUE" : " " + s.free_text;
    std::string what = s.range ? s.range->text() : s.choices.empty() ? "" : or_list(s.choices);
    out << "  " << s.name << shape << "\n      " << s.help
        << (s.fallback.given() ? " (default " + s.fallback.text() + ")" : "") << (what.empty() ? "" : "; " + what)
        << "\n";
  }
  return out.str();
}

}  // namespace aerie::cli
