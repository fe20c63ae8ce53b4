// The TokenConstraint for a whole output that must match a regular expression (vLLM's
// `structured_outputs.regex`, formerly `guided_regex`): anchored at both ends, as vLLM and Outlines read
// it. The state is one automaton state (regex.h); a mask is one walk of the vocabulary's trie
// (token_trie.h) stepping the automaton per byte, pruning a subtree at the first dead byte. An end token
// is allowed exactly in accepting states; finished() when no byte can follow.
//
//   regex "(yes|no)!?": after "yes", tokens "!" and "!" prefixes are allowed, and an end token; after
//   "yes!" the output is finished.
#pragma once

#include <memory>
#include <string_view>

#include "grammar/regex.h"
#include "grammar/token_trie.h"
#include "sample/token_constraint.h"

namespace aerie {

// Compiles `pattern` (RegexMode::kFullMatch). Throws aerie::Error for a refused or oversized pattern,
// or one that no text matches.
std::shared_ptr<const RegexDfa> compile_output_regex(std::string_view pattern, const RegexLimits& limits = {});

std::unique_ptr<TokenConstraint> make_regex_constraint(std::shared_ptr<const RegexDfa> automaton,
                                                       std::shared_ptr<const TokenTrie> vocabulary);

}  // namespace aerie
