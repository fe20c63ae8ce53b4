#include "grammar/cfg_constraint.h"

#include <cstdint>
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

// The pool state `from` moved past `byte`: a pool index, kRefused, or kDirect (the pool is full; the
// state is then in scratch.candidate).
int32_t pool_step(CfgMaskScratch& s, int32_t from, uint8_t byte) {
  const size_t edge = size_t(from) * 256 + byte;
  int32_t to = s.successor[edge];
  if (to == kUnknown) {
    to = s.pool[size_t(from)].advance(byte, s.candidate) ? pool_index(s) : kRefused;
    if (to != kDirect) s.successor[edge] = to;  // a direct state is not memoised
  }
  return to;
}

// Whether every plain-text character (token_trie.h) leads from the root (pool state 0) back to it, as
// inside a GBNF string's ([^"\\] | ...)* loop: then a subtree of plain-text tokens is allowed whole. The
// printable ASCII characters are checked one by one (the walk needs those steps anyway); the non-ASCII
// ones all lead to the same state when the root's terminals take all or none of them, so one stands
// for all.
bool root_loops_on_plain_text(CfgMaskScratch& s) {
  if (!s.pool[0].same_after_any_non_ascii()) return false;
  for (int b = 0x20; b < 0x7F; ++b)
    if (b != '"' && b != '\\' && pool_step(s, 0, uint8_t(b)) != 0) return false;
  const int32_t lead = pool_step(s, 0, 0xC3);  // U+00E9
  return lead >= 0 && pool_step(s, lead, 0xA9) == 0;
}

}  // namespace

void CfgConstraint::allowed_tokens(std::vector<uint8_t>& allowed) const {
  allowed.assign(size_t(vocabulary_->n_vocab()), 0);
  if (matcher_.finished()) {
    for (const int32_t id : vocabulary_->end_tokens()) allowed[size_t(id)] = 1;
    return;
  }
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
  s.at[0] = pool_index(s);  // 0: the pool is empty
  // The plain-text tokens are set at once (TokenTrie::plain_text_mask), and the walk skips them.
  const size_t plain_text_budget = root_loops_on_plain_text(s) ? SIZE_MAX : 0;
  if (plain_text_budget > 0) vocabulary_->plain_text_mask(plain_text_budget, allowed.data());
  if (matcher_.accepting())
    for (const int32_t id : vocabulary_->end_tokens()) allowed[size_t(id)] = 1;
  vocabulary_->walk_nodes(
      0, vocabulary_->n_nodes(),
      [&](size_t, size_t depth, uint8_t byte) {
        const int32_t from = s.at[depth - 1];
        if (from == kDirect) {
          s.at[depth] = kDirect;
          return s.direct[depth - 1].advance(byte, s.direct[depth]);
        }
        const int32_t to = pool_step(s, from, byte);
        if (to == kDirect) std::swap(s.direct[depth], s.candidate);
        s.at[depth] = to;
        return to != kRefused;
      },
      [&](uint32_t first, uint32_t last) { vocabulary_->allow(first, last, allowed.data()); }, plain_text_budget,
      TokenTrie::Plain::kSkipAll);
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
