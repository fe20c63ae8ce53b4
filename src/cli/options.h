// Every option of every `aerie` command, declared once: its default (typed), its help, what it takes (a
// range, a set of names, or free text said to be so) and the commands it applies to. Each command parses
// its arguments against its share of the table (parse_options), and its --help is printed from it, the
// default from the typed value. A name is declared twice only where two commands give it different
// meanings (tokenize's --chat FILE beside generate's --chat flag); their command sets do not overlap.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "cli/args.h"

namespace aerie::cli {

enum class Command {
  kGenerate,
  kServe,
  kLogits,
  kTokenize,
  kBench,
  kBenchSpec,
  kBenchEngine,
  kBenchAccept,
  kBenchQuality
};
inline constexpr Command kAllCommands[] = {Command::kGenerate,    Command::kServe,       Command::kLogits,
                                           Command::kTokenize,    Command::kBench,       Command::kBenchSpec,
                                           Command::kBenchEngine, Command::kBenchAccept, Command::kBenchQuality};
const char* command_name(Command command);  // "bench-engine"

class CommandSet {
 public:
  constexpr CommandSet(std::initializer_list<Command> commands) {
    for (Command c : commands) bits_ |= bit(c);
  }
  constexpr bool has(Command c) const { return (bits_ & bit(c)) != 0; }
  constexpr bool overlaps(CommandSet other) const { return (bits_ & other.bits_) != 0; }
  constexpr CommandSet operator|(CommandSet other) const { return CommandSet(bits_ | other.bits_); }
  constexpr CommandSet without(Command c) const { return CommandSet(bits_ & ~bit(c)); }

 private:
  constexpr explicit CommandSet(uint32_t bits) : bits_(bits) {}
  static constexpr uint32_t bit(Command c) { return uint32_t{1} << unsigned(c); }
  uint32_t bits_ = 0;
};

// One row of the table: the declaration, the commands that take it, and what differs for some of them.
struct OptionRow {
  OptionSpec spec;
  CommandSet commands;
  std::vector<std::pair<Command, Default>> command_defaults = {};  // a command's own default
  std::vector<std::pair<Command, Range>> command_ranges = {};      // a command's own range
};

const std::vector<OptionRow>& option_table();
// `command`'s options in table order, each with that command's default and range.
std::vector<OptionSpec> options_for(Command command);
// Parses `argv` against `command`'s options.
Args parse_options(Command command, const std::vector<std::string>& argv);
// `aerie <command> --help`.
std::string command_usage(Command command);

}  // namespace aerie::cli
