// The TokenConstraint for a context-free grammar (llama.cpp's GBNF `grammar`, vLLM's guided_grammar):
// a CfgMatcher (cfg_matcher.h) over a compiled grammar (cfg_parse.h) and the vocabulary's TokenTrie.
//
//   auto constraint = make_cfg_constraint(compile_grammar(text), vocabulary);
//
// allowed_tokens() walks the trie with one matcher state per trie depth (reused from mask to mask, so
// the steady state does not allocate): a token is allowed when every one of its bytes is taken. An end
// token is allowed exactly when the start rule is complete (accepting()); finished() when it is complete
// and no byte may follow. One constraint object is used by one thread at a time.
#pragma once

#include <memory>
#include <vector>

#include "grammar/cfg_grammar.h"
#include "grammar/cfg_matcher.h"
#include "grammar/token_trie.h"
#include "sample/token_constraint.h"

namespace aerie {

class CfgConstraint final : public TokenConstraint {
 public:
  CfgConstraint(std::shared_ptr<const CfgGrammar> grammar, std::shared_ptr<const TokenTrie> vocabulary);

  void allowed_tokens(std::vector<uint8_t>& allowed) const override;
  bool accept(int64_t token) override;
  bool finished() const override { return matcher_.finished(); }
  std::unique_ptr<TokenConstraint> clone() const override;

  const CfgMatcher& matcher() const { return matcher_; }

 private:
  std::shared_ptr<const CfgGrammar> grammar_;
  std::shared_ptr<const TokenTrie> vocabulary_;
  CfgMatcher matcher_;
  mutable std::vector<CfgMatcher> states_;  // allowed_tokens' walk, one per trie depth; not cloned
};

// Throws aerie::Error when the grammar's start exceeds the matcher's bounds.
std::unique_ptr<TokenConstraint> make_cfg_constraint(std::shared_ptr<const CfgGrammar> grammar,
                                                     std::shared_ptr<const TokenTrie> vocabulary);

}  // namespace aerie
