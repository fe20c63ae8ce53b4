// The grammar parsers (grammar/cfg_parse.h): grammars written in llama.cpp's GBNF style and in the Lark
// subset take the strings they should and refuse the others (whole-string membership through the
// matcher, checked against the expression-tree recogniser too); every malformed or unsupported grammar
// is an aerie::Error naming the line and column, or the rule, and what was expected.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cfg_reference.h"
#include "core/error.h"
#include "grammar/cfg_matcher.h"
#include "grammar/cfg_parse.h"
#include "grammar/regex.h"
#include "sample/sampling.h"

namespace aerie {
namespace {

bool matches(const CfgGrammar& g, const std::string& s) {
  CfgMatcher m(g);
  return m.feed(std::string_view(s)) && m.accepting();
}

struct Example {
  const char* grammar;
  std::vector<std::string> yes, no;
};

const std::vector<Example> kExamples = {
    // Arithmetic with precedence, whitespace and comments.
    {R"g(# integer arithmetic
root  ::= expr
expr  ::= term ws (("+" | "-") ws term ws)*   # sums
term  ::= factor (ws [*/] ws factor)*
factor ::= "-"? [0-9]+ | "(" ws expr ws ")"
ws    ::= [ \t]*)g",
     {"1", "1+2", "(1 + 2) * -3", "10/ (2-3)*4", "((7))"},
     {"", "+", "1+", "(1", "1 2", "a"}},
    // A JSON-like value (recursion through several rules, escapes in classes).
    {R"g(root ::= value
value ::= obj | arr | str | num | "true" | "false" | "null"
obj ::= "{" ( str ":" value ( "," str ":" value )* )? "}"
arr ::= "[" ( value ( "," value )* )? "]"
str ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] )* "\""
num ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)?)g",
     {"{}", "[1,2.5,-0]", R"j({"a":[true,null],"b\n":"x\"y"})j", "\"caf\xc3\xa9\""},
     {"{,}", "[01]", "{\"a\"}", "\"\x01\"", "tru"}},
    // Lists with bounded repetition and a multi-line rule continued by '|'.
    {R"g(root ::= item ("," item){1,3}
item ::= "x"
  | "y" [0-9]{2}
  | [\u00e0-\u00ff]+)g",
     {"x,x", "x,y12,\xc3\xa9\xc3\xa0,x", "x,x,x,x"},
     {"x", "x,x,x,x,x", "y1,x", "x,\xc3\x80"}},
    // Chess moves.
    {R"g(root ::= move (" " move)*
move ::= castle | piece? disambiguation? capture? square promotion? check?
castle ::= "O-O" ("-O")?
piece ::= [KQRBN]
disambiguation ::= [a-h] | [1-8]
capture ::= "x"
square ::= [a-h] [1-8]
promotion ::= "=" [QRBN]
check ::= "+" | "#")g",
     {"e4", "Nf3 O-O-O exd5", "Qh4#", "e8=Q+", "Raxd1"},
     {"e9", "O-O-O-O", "Kx", "e4  e5", "Pe4"}},
    // The style of llama.cpp's schema-generated grammars: an empty first alternative, bounded counts,
    // escaped backslashes in classes.
    {R"g(root ::= "[" space item ("," space item){1,2} "]" space
item ::= "\"" char{1,5} "\"" space
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
space ::= | " " | "\n" [ \t]{0,3})g",
     {R"j(["ab", "c"])j", R"j(["a\u00e9","b\n"] )j", "[\"a\",\n  \"b\"]\n\t"},
     {R"j(["a"])j", R"j(["", "b"])j", R"j(["abcdef","b"])j", R"j(["a","b"]  )j", "[\"a\x7f\",\"b\"]"}},
    // Escapes, any-character and negated classes.
    {R"g(root ::= "\x41\u00e9\U0001F600" . [^a-c\]] "\t\"\[")g",
     {"A\xc3\xa9\xf0\x9f\x98\x80zd\t\"[", "A\xc3\xa9\xf0\x9f\x98\x80\n\xe2\x82\xac\t\"["},
     {"A\xc3\xa9\xf0\x9f\x98\x80za\t\"[", "A\xc3\xa9\xf0\x9f\x98\x80z]\t\"["}},
    // The Lark subset: terminals, ranges, [optional], ~ repetition, the i flag, aliases, priorities.
    {R"g(// a tiny command language
start: command (";" command)*
?command: "go"i " " DIRECTION -> go
        | "wait" [" " NUMBER]
DIRECTION.2: "north" | "south"
NUMBER: DIGIT ~ 1..3
DIGIT: "0".."9")g",
     {"go north", "GO south;wait", "Go north;wait 120;wait 7"},
     {"go", "go west", "wait 1234", "wait ", ""}},
    // Lark /regex/ terminals beside strings and rules; \/ is a slash, ^ and $ change nothing.
    {R"g(start: NAME "=" VALUE (";" NAME "=" VALUE)*
NAME: /^[a-z_][a-z0-9_]{0,7}$/
VALUE: /-?(0|[1-9]\d*)(\.\d+)?/ | /"([^"\\\n]|\\.)*"/ | DATE
DATE: /\d{4}\/\d\d\/\d\d/)g",
     {"a=1", "x_1=-0.5;b=\"q\\\"r\"", "d=2024/01/31", "n=\"caf\xc3\xa9\""},
     {"A=1", "a=01", "a=1.", "toolongname=1", "d=2024-01-31", "a=\"x\ny\"", "a=1;"}},
};

TEST(CfgParse, ExampleGrammarsTakeAndRefuseWhatTheyShould) {
  for (const Example& e : kExamples) {
    const std::string text = e.grammar;
    const auto g = compile_grammar(text);
    const bool gbnf = text.find("::=") != std::string::npos;
    const auto rules = gbnf ? parse_gbnf_rules(text) : parse_lark_rules(text);
    for (const std::string& s : e.yes) {
      EXPECT_TRUE(matches(*g, s)) << text << "\n should take '" << s << "'";
      EXPECT_TRUE(testing::ast_matches(rules, gbnf ? "root" : "start", s)) << s;
    }
    for (const std::string& s : e.no) {
      EXPECT_FALSE(matches(*g, s)) << text << "\n should refuse '" << s << "'";
      EXPECT_FALSE(testing::ast_matches(rules, gbnf ? "root" : "start", s)) << s;
    }
  }
}

struct Bad {
  std::string grammar;
  std::string message;  // a part of the error
};

TEST(CfgParse, BadGrammarsAreClearErrors) {
  const std::vector<Bad> cases = {
      {"  # only a comment\n", "the grammar is empty"},
      {"root ::= \"a\"\nroot ::= \"b\"", "rule 'root' is defined twice (line 1 and line 2)"},
      {"root := \"a\"", "line 1, column 6: expected '::=' after the rule name 'root'"},
      {"root ::= \"abc", "line 1, column 14: unterminated literal"},
      {"root ::= [a-", "unterminated character class"},
      {"root ::= [z-a]", "ends before it starts"},
      {"root ::= \"\\q\"", "line 1, column 12: unknown escape"},
      {"root ::= \"\\uD800\"", "not a Unicode scalar value"},
      {"root ::= \"\\x4\"", "expected 2 hexadecimal digits"},
      {"root ::= ( \"a\" ", "line 1, column 16: expected ')' to close the group opened at line 1, column 10"},
      {"root ::= \"a\" )", "expected the end of rule 'root'"},
      {"root ::= \"a\" | @", "line 1, column 16: expected an item"},
      {"root ::= x", "line 1, column 10: undefined rule 'x'"},
      {"other ::= \"a\"", "no start rule 'root'"},
      {"root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive (root -> root)"},
      {"root ::= x \"a\"\nx ::= \"b\"? root | \"c\"", "left-recursive (root -> x -> root)"},
      {"root ::= (\"a\"?)*", "can match the empty string"},
      {"root ::= \"a\" root", "matches no finite string"},
      {"root ::= \"a\"{3,2}", "needs m <= n"},
      {"root ::= \"a\"{10001}", "repetition counts above 10000"},
      {"root ::= []", "matches no character"},
      {"root ::= " + std::string(101, '(') + "\"a\"" + std::string(101, ')'), "nest deeper than 100"},
      {"root ::= \"" + std::string(kCfgMaxGrammarBytes, 'a') + "\"", "more than the limit"},
      {"root ::= " + [] {
         std::string s;
         for (int i = 0; i < 27; ++i) s += "\"a\"{10000} ";
         return s;
       }(), "elements after expanding repetitions"},
      {"root ::= \"\xff\"", "not valid UTF-8"},
      {std::string("root ::= \"a\"").append(101, '?'), "more than 100 repetition operators"},
      {"", "the grammar is empty"},  // the Lark subset from here on (an empty grammar is read as Lark)
      {"// only a comment", "the grammar is empty"},
      {"start: /[0-9]+", "line 1, column 8: unterminated regular expression"},
      {"start: /[a-z]+/i", "regular-expression flags (/.../i) are not supported"},
      {"start: \"a\" /(?=a)a/", "line 1, column 12: regex /(?=a)a/: lookahead"},
      {"start: /(a)\\1/", "backreference"},
      {"start: /\\Aa/", "unknown escape"},
      {"start: /(a?)*/", "can match the empty string"},
      {"start: /" + [] {
         std::string nest = "b";
         for (int i = 0; i < 101; ++i) nest = "(a" + nest + ")";  // a sequence inside a sequence ...
         return nest;
       }() + "/", "nests deeper than 100"},
      {"start: WS\n%ignore WS\nWS: \" \"", "%ignore is not supported"},
      {"%import common.NUMBER\nstart: NUMBER", "the %import directive is not supported"},
      {"start \"a\"", "line 1, column 7: expected ':' after the rule name 'start'"},
      {"begin: \"a\"", "no start rule 'start'"},
      {"start: \"ab\"..\"c\"", "one character on each side"},
      {"start: ( \"a\"", "expected ')'"},
      {"start: [ \"a\" ", "expected ']'"},
      {"start: 'a'", "double quotes"},
      {"start: \"a\" ~ 3..2", "needs n <= m"},
  };
  bool lark = false;
  for (const Bad& c : cases) {
    lark = lark || c.grammar.empty();
    try {
      if (lark) parse_lark(c.grammar, "grammar");
      else parse_gbnf(c.grammar, "grammar");
      ADD_FAILURE() << "accepted: " << c.grammar.substr(0, 200);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos)
          << c.grammar.substr(0, 200) << "\n gave: " << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("grammar: ", 0), 0u) << e.what();
    }
  }
}

// A /regex/ item takes exactly the strings the regex engine's automaton (regex.h, tested on its own against
// std::regex) matches whole: random strings over each pattern's alphabet, the matcher against the DFA.
TEST(CfgParse, LarkRegexItemsMatchWhatTheAutomatonMatches) {
  const std::vector<std::pair<std::string, std::string>> patterns = {
      {"[a-c]+(x|yz)?", "abcxyz"},
      {"(ab|a)*c{1,3}", "abc"},
      {"-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?", "-019.eE+"},
      {"[^a\\n]{2}b?", "ab\n\xc3\xa9"},
      {"(\\d\\d:){0,2}\\d\\d", "12:"},
      {"\\w+@\\w+\\.(c|o)", "a_@.co"},
      {"(a|b)*a(a|b){2}", "ab"},
  };
  Rng rng(7);
  for (const auto& [pattern, alphabet] : patterns) {
    const auto g = parse_lark("start: /" + pattern + "/");
    const RegexDfa dfa = compile_regex(pattern, RegexMode::kFullMatch);
    int taken = 0;
    for (int trial = 0; trial < 6000; ++trial) {
      std::string s;
      const int len = int(rng.next_u64() % 9);
      for (int i = 0; i < len; ++i) s += alphabet[rng.next_u64() % alphabet.size()];
      const bool expected = dfa.matches(s);
      ASSERT_EQ(matches(*g, s), expected) << "/" << pattern << "/ on '" << s << "'";
      taken += expected;
    }
    EXPECT_GT(taken, 5) << pattern;  // the strings did reach the language
  }
}

TEST(CfgParse, NotationIsDetectedByTheRuleSeparator) {
  EXPECT_TRUE(matches(*compile_grammar("root ::= \"a\""), "a"));
  EXPECT_TRUE(matches(*compile_grammar("start: \"a\""), "a"));
  // A Lark grammar with "::=" inside a string would be read as GBNF (as vLLM does): say so in the error.
  EXPECT_THROW(compile_grammar("start: \"::=\""), Error);
}

}  // namespace
}  // namespace aerie
