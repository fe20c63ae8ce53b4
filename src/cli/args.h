// A small command-line parser: "--name value", "--name=value" and boolean "--flag". Each subcommand
// declares its options; an unknown option, a missing value or a malformed number is an aerie::Error that
// names the option.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace aerie::cli {

struct OptionSpec {
  std::string name;  // "--model"
  bool takes_value = true;
  std::string help;
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
