#include "grammar/cfg_constraint.h"

#include "core/error.h"

namespace aerie {

CfgConstraint::CfgConstraint(std::shared_ptr<const CfgGrammar> grammar, std::shared_ptr<const TokenTrie> vocabulary)
    : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)), matcher_(*grammar_) {}

void CfgConstraint::allowed_tokens(std::vector<uint8_t>& allowed) const {
  allowed.assign(size_t(vocabulary_->n_vocab()), 0);
  if (matcher_.accepting())
    for (const int32_t id : vocabulary_->end_tokens()) allowed[size_t(id)] = 1;
  if (matcher_.finished()) return;
  if (states_.size() < vocabulary_->max_depth() + 1) states_.resize(vocabulary_->max_depth() + 1);
  states_[0] = matcher_;
  vocabulary_->walk([&](size_t depth, uint8_t byte) { return states_[depth - 1].advance(byte, states_[depth]); },
                    allowed.data());
}

bool CfgConstraint::accept(int64_t token) {
  if (token < 0 || token >= vocabulary_->n_vocab()) return false;
  const auto id = int32_t(token);
  if (vocabulary_->is_end(id)) return matcher_.accepting();
  if (!vocabulary_->is_text(id)) return false;
  return matcher_.feed(vocabulary_->token_bytes(id));
}

std::unique_ptr<TokenConstraint> CfgConstraint::clone() const {
  auto copy = std::make_unique<CfgConstraint>(*this);
  copy->states_.clear();
  return copy;
}

std::unique_ptr<TokenConstraint> make_cfg_constraint(std::shared_ptr<const CfgGrammar> grammar,
                                                     std::shared_ptr<const TokenTrie> vocabulary) {
  AERIE_CHECK(grammar != nullptr && vocabulary != nullptr, "make_cfg_constraint: grammar and vocabulary are required");
  return std::make_unique<CfgConstraint>(std::move(grammar), std::move(vocabulary));
}

}  // namespace aerie
