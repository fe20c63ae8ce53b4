#include "grammar/choice_constraint.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace aerie {
namespace {

// The byte of `s` at `pos`, -1 past its end (a shorter string sorts before its extensions).
int byte_at(const std::string& s, size_t pos) { return pos < s.size() ? int(uint8_t(s[pos])) : -1; }

struct Range {
  size_t lo = 0, hi = 0;  // choices [lo, hi) start with the bytes so far
  bool empty() const { return lo >= hi; }
};

class ChoiceConstraint final : public TokenConstraint {
 public:
  ChoiceConstraint(std::shared_ptr<const std::vector<std::string>> choices, std::shared_ptr<const TokenTrie> vocabulary)
      : choices_(std::move(choices)), vocabulary_(std::move(vocabulary)), range_{0, choices_->size()} {}

  void allowed_tokens(std::vector<uint8_t>& allowed) const override {
    allowed.assign(size_t(vocabulary_->n_vocab()), 0);
    if (complete()) for (const int32_t id : vocabulary_->end_tokens()) allowed[size_t(id)] = 1;
    if (finished()) return;
    ranges_.resize(vocabulary_->max_depth() + 1);
    ranges_[0] = range_;
    vocabulary_->walk(
        [&](size_t depth, uint8_t byte) {
          ranges_[depth] = narrow(ranges_[depth - 1], length_ + depth - 1, byte);
          return !ranges_[depth].empty();
        },
        allowed.data());
  }

  bool accept(int64_t token) override {
    if (token < 0 || token >= vocabulary_->n_vocab()) return false;
    const auto id = int32_t(token);
    if (vocabulary_->is_end(id)) return complete();
    if (!vocabulary_->is_text(id)) return false;
    return accept_bytes(vocabulary_->token_bytes(id));
  }

  bool accept_bytes(std::string_view bytes) override {
    Range r = range_;
    size_t length = length_;
    for (const char c : bytes) {
      r = narrow(r, length++, uint8_t(c));
      if (r.empty()) return false;
    }
    range_ = r;
    length_ = length;
    return true;
  }

  // The bytes so far are a whole choice, and no other choice goes on from them.
  bool finished() const override { return complete() && range_.hi - range_.lo == 1; }

  std::unique_ptr<TokenConstraint> clone() const override {
    auto copy = std::make_unique<ChoiceConstraint>(choices_, vocabulary_);
    copy->range_ = range_;
    copy->length_ = length_;
    return copy;
  }

 private:
  // The choices of `r` whose byte at `pos` is `byte` (they are consecutive: r's share their first pos bytes).
  Range narrow(Range r, size_t pos, uint8_t byte) const {
    const auto first = choices_->begin() + std::ptrdiff_t(r.lo), last = choices_->begin() + std::ptrdiff_t(r.hi);
    const auto lo = std::partition_point(first, last, [&](const std::string& s) { return byte_at(s, pos) < int(byte); });
    const auto hi = std::partition_point(lo, last, [&](const std::string& s) { return byte_at(s, pos) == int(byte); });
    return Range{size_t(lo - choices_->begin()), size_t(hi - choices_->begin())};
  }
  // The bytes so far are a whole choice: the range's first (the shortest sorts first).
  bool complete() const { return !range_.empty() && (*choices_)[range_.lo].size() == length_; }

  std::shared_ptr<const std::vector<std::string>> choices_;  // sorted, unique
  std::shared_ptr<const TokenTrie> vocabulary_;
  Range range_;
  size_t length_ = 0;               // bytes emitted so far
  mutable std::vector<Range> ranges_;  // allowed_tokens' walk, one per trie depth; not cloned
};

}  // namespace

std::unique_ptr<TokenConstraint> make_choice_constraint(std::vector<std::string> choices,
                                                        std::shared_ptr<const TokenTrie> vocabulary) {
  AERIE_CHECK(vocabulary != nullptr, "make_choice_constraint: a vocabulary is required");
  AERIE_CHECK(!choices.empty() && choices.size() <= kMaxChoices, "choice: between 1 and ", kMaxChoices,
              " strings are allowed, got ", choices.size());
  for (const std::string& c : choices)
    AERIE_CHECK(!c.empty() && c.size() <= kMaxChoiceBytes, "choice: each string must have 1 to ", kMaxChoiceBytes,
                " bytes, got one of ", c.size());
  std::sort(choices.begin(), choices.end());
  choices.erase(std::unique(choices.begin(), choices.end()), choices.end());
  return std::make_unique<ChoiceConstraint>(std::make_shared<const std::vector<std::string>>(std::move(choices)),
                                            std::move(vocabulary));
}

}  // namespace aerie
