#include "grammar/reasoning_constraint.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace aerie {
namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

bool only_space(std::string_view s) { return std::all_of(s.begin(), s.end(), is_space); }

// One byte of the search for "</think>": `matched` bytes of it end the text so far. No proper prefix of the
// marker is also a suffix of a longer prefix (only its first byte is '<'), so after a mismatch the match
// restarts at 1 on '<' and at 0 otherwise.
uint8_t next_matched(uint8_t matched, char c) {
  if (c == kThinkClose[matched]) return uint8_t(matched + 1);
  return c == '<' ? 1 : 0;
}

// What every request over one vocabulary and one inner constraint shares: the reasoning masks. While
// reasoning with `matched` marker bytes, every token but the end tokens is allowed, except the closing
// tokens whose bytes after the marker the inner constraint (at its start) refuses.
struct ReasoningMasks {
  std::shared_ptr<const ThinkVocabulary> vocabulary;
  std::vector<uint8_t> base;                                     // [n_vocab]: 0 for end tokens, else 1
  std::array<std::vector<uint8_t>, kThinkClose.size()> closing;  // per matched: per closing token, allowed
};

class AfterReasoningConstraint final : public TokenConstraint {
 public:
  AfterReasoningConstraint(std::shared_ptr<const ReasoningMasks> masks, std::unique_ptr<TokenConstraint> inner,
                           ReasoningPhase phase, bool may_open)
      : masks_(std::move(masks)), inner_(std::move(inner)), phase_(std::move(phase)), may_open_(may_open) {}

  void allowed_tokens(std::vector<uint8_t>& allowed) const override {
    switch (phase_.kind) {
      case ReasoningPhase::Kind::kContent: inner_->allowed_tokens(allowed); return;
      case ReasoningPhase::Kind::kReasoning: {
        allowed = masks_->base;
        const auto& closing = vocabulary().closing(phase_.matched);
        const auto& ok = masks_->closing[phase_.matched];
        for (size_t k = 0; k < closing.size(); ++k) allowed[size_t(closing[k].id)] = ok[k];
        return;
      }
      case ReasoningPhase::Kind::kStart: start_mask(allowed); return;
    }
  }

  bool accept(int64_t token) override {
    if (token < 0 || token >= vocabulary().n_vocab()) return false;
    if (phase_.kind == ReasoningPhase::Kind::kContent) return inner_->accept(token);
    ReasoningPhase next;
    std::unique_ptr<TokenConstraint> next_inner;
    if (!step(int32_t(token), next, next_inner)) return false;
    phase_ = std::move(next);
    if (next_inner) inner_ = std::move(next_inner);
    return true;
  }

  bool finished() const override { return phase_.kind == ReasoningPhase::Kind::kContent && inner_->finished(); }

  std::unique_ptr<TokenConstraint> clone() const override {
    return std::make_unique<AfterReasoningConstraint>(masks_, inner_->clone(), phase_, may_open_);
  }

 private:
  const ThinkVocabulary& vocabulary() const { return *masks_->vocabulary; }

  // Whether token `id` may come next outside the content (see the header). When it may, `next` is the
  // phase after it and `next_inner` the inner constraint after it (null: unchanged).
  bool step(int32_t id, ReasoningPhase& next, std::unique_ptr<TokenConstraint>& next_inner) const {
    if (vocabulary().is_end(id)) return false;  // not before the constrained part is complete
    const std::string_view bytes = vocabulary().token_bytes(id);
    next = phase_;
    std::string content;
    advance_reasoning_phase(next, bytes, content);
    const bool straight = straight_to_content(next, bytes, content);
    if (!may_open_ && phase_.kind == ReasoningPhase::Kind::kStart && next.kind != ReasoningPhase::Kind::kStart &&
        !straight)
      return false;  // the prompt closed the block: no second one
    switch (next.kind) {
      case ReasoningPhase::Kind::kStart:
        if (next.held.size() > kMaxHeldBytes) return false;
        // Held bytes the content could not start with: only a partial "<think>" that may still open.
        return (may_open_ && !only_space(next.held)) || inner_->clone()->accept_bytes(next.held);
      case ReasoningPhase::Kind::kReasoning: return true;
      case ReasoningPhase::Kind::kContent:
        next_inner = inner_->clone();
        // No block: the held bytes, then the token as the inner constraint sees tokens. A closed block:
        // the bytes after "</think>".
        if (straight) return next_inner->accept_bytes(phase_.held) && next_inner->accept(id);
        return next_inner->accept_bytes(content);
    }
    return false;
  }

  // From kStart straight to content: all of held + the token is content (a closed block leaves less).
  bool straight_to_content(const ReasoningPhase& next, std::string_view bytes, const std::string& content) const {
    return phase_.kind == ReasoningPhase::Kind::kStart && next.kind == ReasoningPhase::Kind::kContent &&
           content.size() == phase_.held.size() + bytes.size();
  }

  // Before the output commits: every token judged on its own, except that the tokens going straight to
  // content take one mask of the inner constraint after the held bytes.
  void start_mask(std::vector<uint8_t>& allowed) const {
    const auto n_vocab = size_t(vocabulary().n_vocab());
    allowed.assign(n_vocab, 0);
    std::vector<uint8_t> straight;
    std::unique_ptr<TokenConstraint> after_held = inner_->clone();
    if (after_held->accept_bytes(phase_.held)) after_held->allowed_tokens(straight);
    std::string content;
    ReasoningPhase after;
    std::unique_ptr<TokenConstraint> after_inner;
    for (size_t id = 0; id < n_vocab; ++id) {
      if (vocabulary().is_end(int32_t(id))) continue;
      const std::string_view bytes = vocabulary().token_bytes(int32_t(id));
      ReasoningPhase next = phase_;
      content.clear();
      advance_reasoning_phase(next, bytes, content);
      if (straight_to_content(next, bytes, content)) allowed[id] = id < straight.size() && straight[id];
      else allowed[id] = step(int32_t(id), after, after_inner);
    }
  }

  std::shared_ptr<const ReasoningMasks> masks_;
  std::unique_ptr<TokenConstraint> inner_;
  ReasoningPhase phase_;
  bool may_open_;  // the output may open a block of its own (ReasoningStart::kMayOpen)
};

}  // namespace

ThinkVocabulary::ThinkVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> end_tokens)
    : bytes_(std::move(token_bytes)), is_end_(bytes_.size(), 0), end_tokens_(std::move(end_tokens)) {
  for (const int32_t id : end_tokens_) {
    AERIE_CHECK(id >= 0 && size_t(id) < bytes_.size(), "think vocabulary: end id ", id,
                " is outside the vocabulary [0, ", bytes_.size(), ")");
    is_end_[size_t(id)] = 1;
  }
  for (size_t matched = 0; matched < kThinkClose.size(); ++matched) {
    for (size_t id = 0; id < bytes_.size(); ++id) {
      if (is_end_[id]) continue;
      const std::string& bytes = bytes_[id];
      auto m = uint8_t(matched);
      for (size_t i = 0; i < bytes.size(); ++i) {
        m = next_matched(m, bytes[i]);
        if (m == kThinkClose.size()) {
          closing_[matched].push_back({int32_t(id), uint32_t(i + 1)});
          break;
        }
      }
    }
  }
}

void advance_reasoning_phase(ReasoningPhase& phase, std::string_view bytes, std::string& content) {
  size_t i = 0;
  if (phase.kind == ReasoningPhase::Kind::kStart) {
    // Bytes of "<think>" matched after the leading whitespace.
    size_t open = phase.held.size() - size_t(std::count_if(phase.held.begin(), phase.held.end(), is_space));
    for (; i < bytes.size(); ++i) {
      const char c = bytes[i];
      if (open == 0 && is_space(c)) {
        phase.held.push_back(c);
      } else if (c == kThinkOpen[open]) {
        phase.held.push_back(c);
        if (++open == kThinkOpen.size()) {  // the output opened a block: free from here
          phase = ReasoningPhase{ReasoningPhase::Kind::kReasoning, 0, {}};
          ++i;
          break;
        }
      } else {  // anything else: no block, and every byte so far is content
        content.append(phase.held);
        phase = ReasoningPhase{ReasoningPhase::Kind::kContent, 0, {}};
        break;
      }
    }
  }
  if (phase.kind == ReasoningPhase::Kind::kReasoning) {
    for (; i < bytes.size(); ++i) {
      phase.matched = next_matched(phase.matched, bytes[i]);
      if (phase.matched == kThinkClose.size()) {
        phase = ReasoningPhase{ReasoningPhase::Kind::kContent, 0, {}};
        ++i;
        break;
      }
    }
  }
  if (phase.kind == ReasoningPhase::Kind::kContent) content.append(bytes.substr(i));
}

std::unique_ptr<TokenConstraint> make_after_reasoning_constraint(const TokenConstraint& inner,
                                                                 std::shared_ptr<const ThinkVocabulary> vocabulary,
                                                                 ReasoningStart start) {
  AERIE_CHECK(vocabulary != nullptr, "make_after_reasoning_constraint: a vocabulary is required");
  auto masks = std::make_shared<ReasoningMasks>();
  masks->base.assign(size_t(vocabulary->n_vocab()), 1);
  for (const int32_t id : vocabulary->end_tokens()) masks->base[size_t(id)] = 0;
  for (size_t matched = 0; matched < kThinkClose.size(); ++matched) {
    for (const ThinkVocabulary::Closing& c : vocabulary->closing(matched)) {
      const std::string_view tail = vocabulary->token_bytes(c.id).substr(c.tail);
      masks->closing[matched].push_back(tail.empty() || inner.clone()->accept_bytes(tail));
    }
  }
  masks->vocabulary = std::move(vocabulary);
  ReasoningPhase phase;
  if (start == ReasoningStart::kInBlock) phase.kind = ReasoningPhase::Kind::kReasoning;
  return std::make_unique<AfterReasoningConstraint>(std::move(masks), inner.clone(), std::move(phase),
                                                    start == ReasoningStart::kMayOpen);
}

}  // namespace aerie
