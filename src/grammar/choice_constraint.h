// The TokenConstraint for a choice among fixed strings (vLLM's `structured_outputs.choice`, formerly
// `guided_choice`): the output is exactly one of them, byte for byte. The choices are kept sorted; the
// state is the bytes emitted so far, and the choices that start with them are one range of the sorted
// list, so a mask is one walk of the vocabulary's trie (token_trie.h) narrowing that range byte by byte.
//
//   choices {"no", "yes", "yes!"}: after "ye", tokens "s", "s!" are allowed; after "yes" the output may
//   end (an end-of-sequence token) or go on with "!"; after "yes!" it is finished.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/token_trie.h"
#include "sample/token_constraint.h"

namespace aerie {

// Limits on a request's choices (refused by name beyond them).
inline constexpr size_t kMaxChoices = 4096;
inline constexpr size_t kMaxChoiceBytes = 4096;

// Throws aerie::Error unless there are 1..kMaxChoices choices, each 1..kMaxChoiceBytes bytes.
std::unique_ptr<TokenConstraint> make_choice_constraint(std::vector<std::string> choices,
                                                        std::shared_ptr<const TokenTrie> vocabulary);

}  // namespace aerie
