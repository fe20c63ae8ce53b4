#include "grammar/regex_constraint.h"

#include <utility>
#include <vector>

#include "core/error.h"

namespace aerie {
namespace {

class RegexConstraint final : public TokenConstraint {
 public:
  RegexConstraint(std::shared_ptr<const RegexDfa> automaton, std::shared_ptr<const TokenTrie> vocabulary)
      : automaton_(std::move(automaton)), vocabulary_(std::move(vocabulary)), state_(automaton_->start()) {}

  void allowed_tokens(std::vector<uint8_t>& allowed) const override {
    allowed.assign(size_t(vocabulary_->n_vocab()), 0);
    if (automaton_->accepting(state_))
      for (const int32_t id : vocabulary_->end_tokens()) allowed[size_t(id)] = 1;
    if (finished()) return;
    states_.resize(vocabulary_->max_depth() + 1);
    states_[0] = state_;
    vocabulary_->walk(
        [&](size_t depth, uint8_t byte) {
          states_[depth] = automaton_->next(states_[depth - 1], byte);
          return states_[depth] != kRegexDead;
        },
        allowed.data());
  }

  bool accept(int64_t token) override {
    if (token < 0 || token >= vocabulary_->n_vocab()) return false;
    const auto id = int32_t(token);
    if (vocabulary_->is_end(id)) return automaton_->accepting(state_);
    if (!vocabulary_->is_text(id)) return false;
    return accept_bytes(vocabulary_->token_bytes(id));
  }

  bool accept_bytes(std::string_view bytes) override {
    uint32_t state = state_;
    for (const char c : bytes) {
      state = automaton_->next(state, uint8_t(c));
      if (state == kRegexDead) return false;
    }
    state_ = state;
    return true;
  }

  // Every state is live, so a state with no live successor is accepting: only an end token may follow.
  bool finished() const override { return !automaton_->can_continue(state_); }

  std::unique_ptr<TokenConstraint> clone() const override {
    auto copy = std::make_unique<RegexConstraint>(automaton_, vocabulary_);
    copy->state_ = state_;
    return copy;
  }

 private:
  std::shared_ptr<const RegexDfa> automaton_;
  std::shared_ptr<const TokenTrie> vocabulary_;
  uint32_t state_;
  mutable std::vector<uint32_t> states_;  // allowed_tokens' walk, one per trie depth; not cloned
};

}  // namespace

std::shared_ptr<const RegexDfa> compile_output_regex(std::string_view pattern, const RegexLimits& limits) {
  auto automaton = std::make_shared<const RegexDfa>(compile_regex(pattern, RegexMode::kFullMatch, limits));
  AERIE_CHECK(!automaton->empty(), "regex /", automaton->pattern(), "/: no text matches it");
  return automaton;
}

std::unique_ptr<TokenConstraint> make_regex_constraint(std::shared_ptr<const RegexDfa> automaton,
                                                       std::shared_ptr<const TokenTrie> vocabulary) {
  AERIE_CHECK(automaton != nullptr && vocabulary != nullptr && !automaton->empty(),
              "make_regex_constraint: a non-empty automaton and a vocabulary are required");
  return std::make_unique<RegexConstraint>(std::move(automaton), std::move(vocabulary));
}

}  // namespace aerie
