// The TokenConstraint for JSON output: a JsonMatcher over a compiled grammar (json_schema.h) and the
// vocabulary's TokenTrie. Build the grammar once per schema and the trie once per tokenizer; both are
// shared, immutable, and may serve many constraints on many threads.
//
//   auto vocabulary = std::make_shared<const TokenTrie>(token_bytes, end_ids, special_ids);
//   auto constraint = make_json_constraint(compile_json_schema(schema), vocabulary);
//
// allowed_tokens() walks the trie from the current state (token_trie.h); accept() feeds the token's bytes
// (an end token is accepted, leaving the state as is, exactly when the document is complete); finished()
// is the matcher's finished(). clone() copies the matcher state (a few small vectors) and shares the mask
// cache (json_mask.h), so masks at states that recur — in the same output or a clone's drafts — are mostly
// copied. One constraint object is used by one thread at a time (allowed_tokens keeps its walk buffers in
// the object).
#pragma once

#include <memory>
#include <vector>

#include "grammar/json_grammar.h"
#include "grammar/json_mask.h"
#include "grammar/token_trie.h"
#include "sample/token_constraint.h"

namespace aerie {

class JsonConstraint final : public TokenConstraint {
 public:
  JsonConstraint(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const TokenTrie> vocabulary);

  void allowed_tokens(std::vector<uint8_t>& allowed) const override;
  bool accept(int64_t token) override;
  bool accept_bytes(std::string_view bytes) override { return matcher_.feed(bytes); }
  bool finished() const override;
  std::unique_ptr<TokenConstraint> clone() const override;

  const JsonMatcher& matcher() const { return matcher_; }

 private:
  std::shared_ptr<const JsonGrammar> grammar_;
  std::shared_ptr<const TokenTrie> vocabulary_;
  JsonMatcher matcher_;
  std::shared_ptr<JsonMaskCache> cache_;  // shared with clones (json_mask.h)
  mutable JsonMaskScratch scratch_;      // allowed_tokens' buffers; not cloned
};

std::unique_ptr<TokenConstraint> make_json_constraint(std::shared_ptr<const JsonGrammar> grammar,
                                                      std::shared_ptr<const TokenTrie> vocabulary);

}  // namespace aerie
