// The TokenConstraint for a context-free grammar (llama.cpp's GBNF `grammar`, vLLM's guided_grammar):
// a CfgMatcher (cfg_matcher.h) over a compiled grammar (cfg_parse.h) and the vocabulary's TokenTrie.
//
//   auto constraint = make_cfg_constraint(compile_grammar(text), vocabulary);
//
// allowed_tokens() walks the trie with a matcher state per trie depth (memoised, see CfgMaskScratch; the
// buffers are reused from mask to mask, so the steady state does not allocate): a token is allowed when
// every one of its bytes is taken. An end
// token is allowed exactly when the start rule is complete (accepting()); finished() when it is complete
// and no byte may follow. One constraint object is used by one thread at a time.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "grammar/cfg_grammar.h"
#include "grammar/cfg_matcher.h"
#include "grammar/token_trie.h"
#include "sample/token_constraint.h"

namespace aerie {

// The mask walk's buffers (reused from mask to mask). The walk memoises transitions: each distinct state
// it meets goes into `pool` (up to kCfgMaskPoolStates per mask) with a row of 256 successors, so a state
// that recurs — a string's loop returns to the same state after every character — costs one lookup per
// trie node instead of a copy and an expansion. Past the pool's size the walk computes states directly.
// When every plain-text character leads from the current state back to it (inside a string's character
// loop), subtrees of plain-text tokens are allowed whole, as for JSON strings (TokenTrie::walk).
inline constexpr size_t kCfgMaskPoolStates = 1024;
struct CfgMaskScratch {
  std::vector<CfgMatcher> pool;
  std::vector<uint64_t> pool_hash;
  size_t n_pool = 0;
  std::vector<int32_t> successor;  // [n_pool * 256]: kUnknown, kRefused or a pool index
  std::vector<int32_t> table;      // open addressing over pool_hash: pool index + 1, 0 when empty
  std::vector<int32_t> at;         // per trie depth: the state's pool index, or kDirect (in direct[depth])
  std::vector<CfgMatcher> direct;  // per trie depth, for states outside the pool
  CfgMatcher candidate;
};

class CfgConstraint final : public TokenConstraint {
 public:
  CfgConstraint(std::shared_ptr<const CfgGrammar> grammar, std::shared_ptr<const TokenTrie> vocabulary);
  // The state, not the mask buffers (clone() runs per verification step: it must stay cheap).
  CfgConstraint(const CfgConstraint& other)
      : TokenConstraint(), grammar_(other.grammar_), vocabulary_(other.vocabulary_), matcher_(other.matcher_) {}
  CfgConstraint& operator=(const CfgConstraint&) = delete;

  void allowed_tokens(std::vector<uint8_t>& allowed) const override;
  bool accept(int64_t token) override;
  bool accept_bytes(std::string_view bytes) override { return matcher_.feed(bytes); }
  bool finished() const override { return matcher_.finished(); }
  std::unique_ptr<TokenConstraint> clone() const override;

  const CfgMatcher& matcher() const { return matcher_; }

 private:
  std::shared_ptr<const CfgGrammar> grammar_;
  std::shared_ptr<const TokenTrie> vocabulary_;
  CfgMatcher matcher_;
  mutable CfgMaskScratch scratch_;  // allowed_tokens' buffers; not cloned
};

// Throws aerie::Error when the grammar's start exceeds the matcher's bounds.
std::unique_ptr<TokenConstraint> make_cfg_constraint(std::shared_ptr<const CfgGrammar> grammar,
                                                     std::shared_ptr<const TokenTrie> vocabulary);

}  // namespace aerie
