#include "grammar/json_constraint.h"

#include <algorithm>

#include "core/error.h"

namespace aerie {

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const TokenTrie> vocabulary)
    : grammar_(std::move(grammar)),
      vocabulary_(std::move(vocabulary)),
      matcher_(*grammar_),
      cache_(std::make_shared<JsonMaskCache>()) {}

void JsonConstraint::allowed_tokens(std::vector<uint8_t>& allowed) const {
  json_allowed_tokens_cached(matcher_, *vocabulary_, *cache_, allowed, scratch_);
}

bool JsonConstraint::accept(int64_t token) {
  if (token < 0 || token >= vocabulary_->n_vocab()) return false;
  const auto id = int32_t(token);
  if (vocabulary_->is_end(id)) return matcher_.accepting();
  if (!vocabulary_->is_text(id)) return false;
  return matcher_.feed(vocabulary_->token_bytes(id));
}

bool JsonConstraint::finished() const { return matcher_.finished(); }

std::unique_ptr<TokenConstraint> JsonConstraint::clone() const {
  auto copy = std::make_unique<JsonConstraint>(grammar_, vocabulary_);
  copy->matcher_ = matcher_;
  copy->cache_ = cache_;
  return copy;
}

std::unique_ptr<TokenConstraint> make_json_constraint(std::shared_ptr<const JsonGrammar> grammar,
                                                      std::shared_ptr<const TokenTrie> vocabulary) {
  AERIE_CHECK(grammar != nullptr && vocabulary != nullptr, "make_json_constraint: grammar and vocabulary are required");
  return std::make_unique<JsonConstraint>(std::move(grammar), std::move(vocabulary));
}

}  // namespace aerie
