#include "grammar/json_constraint.h"

#include <algorithm>

#include "core/error.h"

namespace aerie {

// The walk keeps, per trie depth, either the full state or — while the bytes since the root only changed
// the top frame of the root's single stack ("light") — that top frame alone, so that a string's
// characters cost one frame step each instead of a copy of the stacks. Inside strings, subtrees of
// plain-text tokens that fit are allowed whole (TokenTrie::walk's plain_text_budget).
void json_allowed_tokens(const JsonMatcher& state, const TokenTrie& vocabulary, std::vector<uint8_t>& allowed,
                         JsonMaskScratch& scratch) {
  allowed.assign(size_t(vocabulary.n_vocab()), 0);
  if (state.accepting())
    for (const int32_t id : vocabulary.end_tokens()) allowed[size_t(id)] = 1;
  if (state.finished()) return;
  const size_t n_depths = vocabulary.max_depth() + 1;
  if (scratch.states.size() < n_depths) {
    scratch.states.resize(n_depths);
    scratch.tops.resize(n_depths);
    scratch.light.resize(n_depths);
  }
  const JsonGrammar& grammar = *state.grammar();
  const JsonFrame* root_top = state.single_top();
  scratch.light[0] = root_top != nullptr;
  if (root_top) scratch.tops[0] = *root_top;
  else scratch.states[0] = state;
  vocabulary.walk(
      [&](size_t depth, uint8_t byte) {
        if (!scratch.light[depth - 1]) {
          scratch.light[depth] = 0;
          return scratch.states[depth - 1].advance(byte, scratch.states[depth]);
        }
        JsonFrame top = scratch.tops[depth - 1];
        switch (JsonMatcher::step_top(grammar, top, byte)) {
          case JsonMatcher::TopStep::kTopOnly:
            scratch.tops[depth] = top;
            scratch.light[depth] = 1;
            return true;
          case JsonMatcher::TopStep::kRefused:
            return false;
          case JsonMatcher::TopStep::kOther:
            break;
        }
        state.with_top(scratch.tops[depth - 1], scratch.full_parent);
        scratch.light[depth] = 0;
        return scratch.full_parent.advance(byte, scratch.states[depth]);
      },
      allowed.data(), state.plain_text_budget());
}

JsonConstraint::JsonConstraint(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const TokenTrie> vocabulary)
    : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)), matcher_(*grammar_) {}

void JsonConstraint::allowed_tokens(std::vector<uint8_t>& allowed) const {
  json_allowed_tokens(matcher_, *vocabulary_, allowed, scratch_);
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
