#include "grammar/cfg_constraint.h"

#include <utility>

#include "core/error.h"

namespace aerie {

CfgConstraint::CfgConstraint(std::shared_ptr<const CfgGrammar> grammar, std::shared_ptr<const TokenTrie> vocabulary)
    : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)), matcher_(*grammar_) {}

namespace {

constexpr int32_t kUnknown = -1, kRefused = -2, kDirect = -3;

// The pool index of scratch.candidate's state, adding it (moved out of the candidate) when new; kDirect
// when the pool is full.
int32_t pool_index(CfgMaskScratch& scratch) {
  const uint64_t h = scratch.candidate.hash();
  const size_t mask = scratch.table.size() - 1;
  size_t slot = size_t(h) & mask;
  for (; scratch.table[slot] != 0; slot = (slot + 1) & mask) {
    const auto i = size_t(scratch.table[slot] - 1);
    if (scratch.pool_hash[i] == h && scratch.pool[i].same_state(scratch.candidate)) return int32_t(i);
  }
  if (scratch.n_pool == kCfgMaskPoolStates) return kDirect;
  const size_t i = scratch.n_pool++;
  if (scratch.pool.size() < scratch.n_pool) scratch.pool.resize(scratch.n_pool);
  if (scratch.pool_hash.size() < scratch.n_pool) scratch.pool_hash.resize(scratch.n_pool);
  std::swap(scratch.pool[i], scratch.candidate);
  scratch.pool_hash[i] = h;
  scratch.successor.resize(scratch.n_pool * 256, kUnknown);
  scratch.table[slot] = int32_t(i + 1);
  return int32_t(i);
}

}  // namespace

void CfgConstraint::allowed_tokens(std::vector<uint8_t>& allowed) const {
  allowed.assign(size_t(vocabulary_->n_vocab()), 0);
  if (matcher_.accepting())
    for (const int32_t id : vocabulary_->end_tokens()) allowed[size_t(id)] = 1;
  if (matcher_.finished()) return;
  CfgMaskScratch& s = scratch_;
  const size_t n_depths = vocabulary_->max_depth() + 1;
  if (s.at.size() < n_depths) {
    s.at.resize(n_depths);
    s.direct.resize(n_depths);
  }
  s.table.assign(2 * kCfgMaskPoolStates, 0);
  s.successor.clear();
  s.n_pool = 0;
  s.candidate = matcher_;
  s.at[0] = pool_index(s);
  vocabulary_->walk(
      [&](size_t depth, uint8_t byte) {
        const int32_t from = s.at[depth - 1];
        if (from == kDirect) {
          s.at[depth] = kDirect;
          return s.direct[depth - 1].advance(byte, s.direct[depth]);
        }
        const size_t edge = size_t(from) * 256 + byte;
        int32_t to = s.successor[edge];
        if (to == kUnknown) {
          to = s.pool[size_t(from)].advance(byte, s.candidate) ? pool_index(s) : kRefused;
          if (to == kDirect) std::swap(s.direct[depth], s.candidate);
          else s.successor[edge] = to;  // a direct state is not memoised
        }
        s.at[depth] = to;
        return to != kRefused;
      },
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
  return std::make_unique<CfgConstraint>(*this);
}

std::unique_ptr<TokenConstraint> make_cfg_constraint(std::shared_ptr<const CfgGrammar> grammar,
                                                     std::shared_ptr<const TokenTrie> vocabulary) {
  AERIE_CHECK(grammar != nullptr && vocabulary != nullptr, "make_cfg_constraint: grammar and vocabulary are required");
  return std::make_unique<CfgConstraint>(std::move(grammar), std::move(vocabulary));
}

}  // namespace aerie
