#include "sample/json_constraint.h"

#include <algorithm>

#include "core/error.h"

namespace aerie {

void json_allowed_tokens(const JsonMatcher& state, const TokenTrie& vocabulary, std::vector<uint8_t>& allowed,
                         std::vector<JsonMatcher>& walk_states) {
  allowed.assign(size_t(vocabulary.n_vocab()), 0);
  if (state.accepting())
    for (const int32_t id : vocabulary.end_tokens()) allowed[size_t(id)] = 1;
  if (state.finished()) return;
  if (walk_states.size() < vocabulary.max_depth() + 1) walk_states.resize(vocabulary.max_depth() + 1);
  walk_states[0] = state;
  vocabulary.walk([&](size_t depth, uint8_t byte) { return walk_states[depth - 1].advance(byte, walk_states[depth]); },
                  allowed.data());
}

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const TokenTrie> vocabulary)
    : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)), matcher_(*grammar_) {}

void JsonConstraint::allowed_tokens(std::vector<uint8_t>& allowed) const {
  json_allowed_tokens(matcher_, *vocabulary_, allowed, walk_states_);
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
  return copy;
}

std::unique_ptr<TokenConstraint> make_json_constraint(std::shared_ptr<const JsonGrammar> grammar,
                                                      std::shared_ptr<const TokenTrie> vocabulary) {
  AERIE_CHECK(grammar != nullptr && vocabulary != nullptr, "make_json_constraint: grammar and vocabulary are required");
  return std::make_unique<JsonConstraint>(std::move(grammar), std::move(vocabulary));
}

}  // namespace aerie
