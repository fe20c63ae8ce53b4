// A small command-line parser: "--name value", "--name=value" and boolean "--flag". An option is declared
// once (cli/options.h holds every command's declarations) with its default, its help and what it takes:
// a number within a range, one of a set of names, or free text (a path, a name, a form the command reads).
// The parser refuses an unknown option, a missing value, a number outside its range ("option --http-threads
// must be an integer in [1, 1024], got '1000000'") and a name outside its set ("--kv-cache-dtype must be
// auto, bf16, f32 or fp8, got 'int4'"), each an aerie::Error that names the option; --help prints all of it
// from the same declaration.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace aerie::cli {

// The values a numeric option takes.
struct Range {
  bool integer = true;
  int64_t min_integer = 0, max_integer = 0;  // integer: [min_integer, max_integer]
  double min = 0.0, max = 0.0;               // otherwise: [min, max], or (min, max] when min_exclusive
  bool min_exclusive = false;
  bool list = false;         // a comma-separated list, each element within the range
  std::string text() const;  // "an integer in [1, 1024]", "a number in (0, 1]", "integers in [1, 8], comma-separated"
};
inline Range integers(int64_t min, int64_t max) { return Range{true, min, max, 0.0, 0.0, false}; }
inline Range integer_list(int64_t min, int64_t max) { return Range{true, min, max, 0.0, 0.0, false, true}; }
inline Range numbers(double min, double max, bool min_exclusive = false) {
  return Range{false, 0, 0, min, max, min_exclusive};
}
constexpr int64_t kKiB = int64_t{1} << 10, kMiB = int64_t{1} << 20, kGiB = int64_t{1} << 30, kTiB = int64_t{1} << 40;

// The value an option has when it is not given: an integer, a number or a text, or none (an optional
// option: its absence means what its help says, e.g. --draft absent: no draft).
class Default {
 public:
  Default() = default;
  Default(int value) : value_(int64_t{value}) {}
  Default(int64_t value) : value_(value) {}
  Default(uint64_t value) : value_(int64_t(value)) {}
  Default(double value) : value_(value) {}
  Default(float value) : value_(double(value)) {}
  Default(const char* value) : value_(std::string(value)) {}
  Default(std::string value) : value_(std::move(value)) {}
  bool given() const { return !std::holds_alternative<std::monostate>(value_); }
  const std::variant<std::monostate, int64_t, double, std::string>& value() const { return value_; }
  std::string text() const;  // "512", "0.6", "mapped"; "" when none

 private:
  std::variant<std::monostate, int64_t, double, std::string> value_;
};
inline const Default kOptional{};

struct OptionSpec {
  OptionSpec(std::string name, bool takes_value, std::string help, std::optional<Range> range = std::nullopt)
      : name(std::move(name)), takes_value(takes_value), help(std::move(help)), range(range) {}
  std::string name;  // "--model"
  bool takes_value = true;
  std::string help;  // what it does; the default, range and choices are printed after it from the fields below
  std::optional<Range> range;        // a number (or with range->list, a list) within it
  std::vector<std::string> choices;  // an enumerated option: one of these names
  std::vector<std::string> aliases;  // further names it accepts without listing them (bfloat16 for bf16)
  bool bare_refusal = false;         // a refused choice is shown unquoted (--bf16-activations has always been)
  // Takes every following argument up to the next option ("--lora-modules a=X b=Y", argparse's nargs='+'),
  // and may be given again; Args::all() returns the values in order.
  bool multiple = false;
  std::string free_text;             // neither: what the text is (PATH, FILE, JSON, LIST, ...), shown in --help
  Default fallback;                  // the value when absent; a flag is false when absent
};

class Args {
 public:
  Args(const std::vector<std::string>& argv, std::vector<OptionSpec> specs);

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  // Whether `name` is an option of this command (given or not).
  bool declares(const std::string& name) const { return find(name) != nullptr; }
  // The value given, else the declared default ("" for an optional text that is absent).
  std::string str(const std::string& name) const;
  std::string required(const std::string& name) const;
  // The value given, else the declared default; an aerie::Error for an option declared without one.
  int64_t integer(const std::string& name) const;
  double number(const std::string& name) const;
  // "1,2,3" -> {1, 2, 3}; the declared default when absent; an error when absent without one.
  std::vector<int64_t> integers(const std::string& name) const;
  // "0,0.7,1" -> {0, 0.7, 1}; the declared default when absent.
  std::vector<double> numbers(const std::string& name) const;

  // The same reads with the fallback given here, for options declared without a default.
  int64_t integer(const std::string& name, int64_t fallback) const;
  double number(const std::string& name, double fallback) const;
  std::vector<double> numbers(const std::string& name, const std::string& fallback) const;
  // Every value of an option declared `multiple`, in order (empty when absent).
  std::vector<std::string> all(const std::string& name) const;

 private:
  const OptionSpec* find(const std::string& name) const;
  const Default& fallback_of(const std::string& name) const;
  std::vector<OptionSpec> specs_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> multiple_;  // the values of `multiple` options
};

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what);
std::vector<double> parse_number_list(const std::string& text, const std::string& what);
// "a, b or c"
std::string or_list(const std::vector<std::string>& names);
// One paragraph per option: its name, then its help with the default, the range or the choices.
std::string usage(const std::string& command, const std::vector<OptionSpec>& specs);

}  // namespace aerie::cli
