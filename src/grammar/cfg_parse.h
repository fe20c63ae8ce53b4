// Grammar text -> CfgGrammar (cfg_grammar.h), in the two notations the OpenAI-compatible servers take:
//
// GBNF, llama.cpp's `grammar` field: `name ::= alternatives` rules, `root` the start rule; "literals",
// [character classes] with ranges and ^ negation, `.` (any character, newline included), ( ) groups,
// | * + ? {m} {m,} {m,n} {,n}, # comments; escapes \x.. \u.... \U........ \t \n \r \\ \" \[ \] \- \^
// (\x, \u and \U name code points, as in llama.cpp, and are matched as their UTF-8 bytes). A rule ends
// at a newline outside parentheses unless the next line starts with |.
//
// The Lark subset vLLM's guided_grammar takes: `name: alternatives` rules (lower-case rules and upper-case
// terminals alike), `start` the start rule, "strings" (with the i flag), "a".."z" ranges, [optional],
// ( ) groups, ? * +, item ~ n and item ~ n..m, // comments, continuation lines starting with |. The
// tree-shaping marks (?rule, !rule, rule.priority, -> alias) do not change which strings match and are
// accepted. /regex/ items are read by the regex engine (regex.h: ECMAScript syntax, the common ground with
// the Python `re` syntax Lark uses; matched whole, so ^ and $ at its ends change nothing; \/ is a slash)
// and become classes, sequences and repetitions in place: Python-only syntax (\A, \Z, (?P<..>)), what
// regex.h refuses (lookaround, backreferences), flags after the closing slash, and a repetition of
// something that can match the empty string (e.g. /(a?)*/: ambiguous for the matcher) are refused by
// name. Two reading differences from Python: \d \w \s are ECMAScript's (ASCII digits and word
// characters), and `.` excludes \r U+2028 U+2029 as well as \n. Refused by name: %ignore (the grammar
// must spell its whitespace out: this matcher reads bytes, not a lexer's tokens), %import, %declare and
// the other directives. Terminals are matched as characters in place, like rules (no separate lexer, no
// longest-match), which is how a byte-level matcher and vLLM's grammar backends read them.
//
// Errors (aerie::Error) start with `what` and name the line and column and what was expected there.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/cfg_grammar.h"

namespace aerie {

std::shared_ptr<const CfgGrammar> parse_gbnf(std::string_view text, const std::string& what = "grammar");
std::shared_ptr<const CfgGrammar> parse_lark(std::string_view text, const std::string& what = "grammar");
// The rules as written, before lowering (start rule: "root" for GBNF, "start" for Lark).
std::vector<CfgRuleSource> parse_gbnf_rules(std::string_view text, const std::string& what = "grammar");
std::vector<CfgRuleSource> parse_lark_rules(std::string_view text, const std::string& what = "grammar");
// GBNF when the text contains "::=", else the Lark subset (as vLLM tells them apart).
std::shared_ptr<const CfgGrammar> compile_grammar(std::string_view text, const std::string& what = "grammar");

}  // namespace aerie
