// A small command-line parser: "--name value", "--name=value" and boolean "--flag". Each subcommand
// declares its options; an unknown option, a missing value or a malformed number is an aerie::Error that
// names the option. A numeric option declares its range with it: the parser refuses a value outside it
// ("option --http-threads must be an integer in [1, 1024], got 1000000") and --help prints it, from the
// same declaration.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
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

struct OptionSpec {
  OptionSpec(std::string name, bool takes_value, std::string help, std::optional<Range> range = std::nullopt)
      : name(std::move(name)), takes_value(takes_value), help(std::move(help)), range(range) {}
  std::string name;  // "--model"
  bool takes_value = true;
  std::string help;
  std::optional<Range> range;  // a number (or with range->list, a list) within it; nullopt: any text (names, "auto")
};

class Args {
 public:
  Args(const std::vector<std::string>& argv, const std::vector<OptionSpec>& specs);

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string str(const std::string& name, const std::string& fallback = "") const;
  std::string required(const std::string& name) const;
  int64_t integer(const std::string& name, int64_t fallback) const;
  double number(const std::string& name, double fallback) const;
  // "1,2,3" -> {1, 2, 3}
  std::vector<int64_t> integers(const std::string& name) const;
  // "0,0.7,1" -> {0, 0.7, 1}; `fallback` (a list in the same form) when absent.
  std::vector<double> numbers(const std::string& name, const std::string& fallback) const;

 private:
  std::map<std::string, std::string> values_;
};

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& what);
std::vector<double> parse_number_list(const std::string& text, const std::string& what);
std::string usage(const std::string& command, const std::vector<OptionSpec>& specs);

}  // namespace aerie::cli
