#include "spec/suffix_automaton.h"

#include <algorithm>
#include <bit>

#include "core/error.h"
#include "core/mix64.h"

namespace aerie {
namespace {

constexpr uint64_t kEmpty = ~uint64_t(0);  // no (state, token) pair has it: states stay below 2^31

}  // namespace

SuffixAutomaton::SuffixAutomaton() {
  states_.push_back(State{});  // the root: the empty string, which ends everywhere
  keys_.assign(16, kEmpty);
  targets_.assign(16, -1);
}

void SuffixAutomaton::reserve(int64_t tokens) {
  states_.reserve(size_t(2 * tokens + 1));
  edges_.reserve(size_t(3 * tokens));
  const size_t slots = std::bit_ceil(size_t(std::max<int64_t>(16, 6 * tokens)));
  while (keys_.size() < slots) grow_table();
}

size_t SuffixAutomaton::memory_bytes() const {
  return states_.capacity() * sizeof(State) + edges_.capacity() * sizeof(Edge) +
         keys_.capacity() * sizeof(uint64_t) + targets_.capacity() * sizeof(int32_t);
}

int32_t SuffixAutomaton::transition(int32_t state, int64_t token) const {
  if (token < kSeparator || token >= (int64_t(1) << 31)) return -1;  // never pushed
  const uint64_t k = key(state, token);
  const size_t mask = keys_.size() - 1;
  for (size_t s = size_t(mix64(k)) & mask; keys_[s] != kEmpty; s = (s + 1) & mask)
    if (keys_[s] == k) return targets_[s];
  return -1;
}

void SuffixAutomaton::set_transition(int32_t state, int64_t token, int32_t target) {
  if (2 * (n_transitions_ + 1) > int64_t(keys_.size())) grow_table();
  const uint64_t k = key(state, token);
  const size_t mask = keys_.size() - 1;
  size_t s = size_t(mix64(k)) & mask;
  for (; keys_[s] != kEmpty; s = (s + 1) & mask)
    if (keys_[s] == k) {  // redirected (to a clone): the edge list already has the token
      targets_[s] = target;
      return;
    }
  keys_[s] = k;
  targets_[s] = target;
  ++n_transitions_;
  edges_.push_back(Edge{int32_t(token + 1), states_[size_t(state)].edges});
  states_[size_t(state)].edges = int32_t(edges_.size() - 1);
}

void SuffixAutomaton::grow_table() {
  std::vector<uint64_t> keys(keys_.size() * 2, kEmpty);
  std::vector<int32_t> targets(keys.size(), -1);
  const size_t mask = keys.size() - 1;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (keys_[i] == kEmpty) continue;
    size_t s = size_t(mix64(keys_[i])) & mask;
    while (keys[s] != kEmpty) s = (s + 1) & mask;
    keys[s] = keys_[i];
    targets[s] = targets_[i];
  }
  keys_ = std::move(keys);
  targets_ = std::move(targets);
}

void SuffixAutomaton::push(int64_t token) {
  AERIE_CHECK(token == kSeparator || (token >= 0 && token < (int64_t(1) << 31)),
              "suffix automaton: token ids must be in [0, 2^31), got ", token);
  AERIE_CHECK(size_ < (int64_t(1) << 30), "suffix automaton: a text of more than 2^30 tokens");
  const int32_t pos = int32_t(size_++);
  const int32_t cur = int32_t(states_.size());
  states_.push_back(State{states_[size_t(last_)].len + 1, -1, pos, -1});
  int32_t p = last_;
  last_ = cur;
  // Every suffix of the old text without a `token` transition now continues into the new class.
  for (; p >= 0 && transition(p, token) < 0; p = states_[size_t(p)].link) set_transition(p, token, cur);
  if (p < 0) {
    states_[size_t(cur)].link = 0;
    return;
  }
  const int32_t q = transition(p, token);
  if (states_[size_t(p)].len + 1 == states_[size_t(q)].len) {
    states_[size_t(cur)].link = q;
    states_[size_t(q)].end = pos;  // q's strings end here too: the most recent occurrence
    return;
  }
  // q holds strings longer than p's + token that do not end here: its shorter ones move to a clone, which
  // ends here too.
  const int32_t clone = int32_t(states_.size());
  states_.push_back(State{states_[size_t(p)].len + 1, states_[size_t(q)].link, pos, -1});
  for (int32_t e = states_[size_t(q)].edges; e >= 0; e = edges_[size_t(e)].next) {
    const int64_t t = int64_t(edges_[size_t(e)].token) - 1;
    set_transition(clone, t, transition(q, t));
  }
  for (; p >= 0 && transition(p, token) == q; p = states_[size_t(p)].link) set_transition(p, token, clone);
  states_[size_t(q)].link = clone;
  states_[size_t(cur)].link = clone;
}

}  // namespace aerie
