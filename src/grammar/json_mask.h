// The token mask of a JSON matcher state: one walk of the vocabulary's trie (token_trie.h), and a cache
// of the parts of masks that recur, for JsonConstraint (json_constraint.h).
//
// The cache, after XGrammar's adaptive token mask cache: when the state is a single parse stack, which
// tokens are allowed depends for most tokens on the top frame alone (the characters of a string, the
// digits of a number, a key's bytes) and only for some on the frames below it (a closing quote pops into
// the object, which says whether ',' or '}' may follow). The cache keys on the top two frames — a string
// and the object or array it is in, a number and its array — and the stack's depth (bounds on nesting
// depend on it). A walk that records keeps the tokens that depend on those alone as runs of token slots
// and stops at every trie node where a byte would reach below them (a token that closes the object too)
// or fork the stack, keeping that node and the light stack at its parent; a later state with the same key
// copies the runs and walks only the recorded nodes' subtrees with its own frames. A string without a
// pattern is served from one walk of string content per cache (json_mask.cpp: tokens by the characters
// they add, closing quotes by the characters before them), so a string with maxLength, whose frame
// changes with every character, does not walk the trie at each. So a cached mask is exactly the mask the
// plain walk computes (tests/grammar/json_mask_cache_test.cpp checks it against that along random walks).
//
// Both walks also allow a trie subtree whole where plain text is known to be allowed (a string's
// TokenTrie::plain_text_mask) or where every byte in it loops on a pattern automaton's state.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "grammar/json_grammar.h"
#include "grammar/token_trie.h"

namespace aerie {

// Buffers of the mask walk, one entry per trie depth (reused from mask to mask).
struct JsonMaskScratch {
  std::vector<JsonMatcher> states;     // the full state at a depth (when not `light`)
  std::vector<JsonLightStack> stacks;  // the stack at a depth, over the walk's root stack (when `light`)
  std::vector<uint8_t> light;
  JsonMatcher full_parent;
  // Per pattern and automaton state of loops_of's patterns: the bytes the state loops on (json_mask.cpp).
  // A scratch serves one grammar at a time (it tells another one by its address: keep the grammar alive
  // while the scratch is used with it, as JsonConstraint does).
  struct Loop {
    std::array<uint64_t, 2> bytes{0, 0};
    bool known = false;
  };
  const JsonGrammar* loops_of = nullptr;
  std::vector<std::vector<Loop>> loops;
};

// The mask for a matcher state, with caller-owned buffers (no cache).
void json_allowed_tokens(const JsonMatcher& state, const TokenTrie& vocabulary, std::vector<uint8_t>& allowed,
                         JsonMaskScratch& scratch);

// What a cached mask holds for one key (see above).
struct JsonMaskEntry {
  struct Frontier {
    uint32_t node = 0;   // a trie node whose byte reaches below the top frame: its subtree is walked anew
    uint32_t stack = 0;  // stacks[stack]: the light stack at the node's parent
  };
  std::vector<std::pair<uint32_t, uint32_t>> runs;  // token slots [first, last) (TokenTrie::allow)
  std::vector<Frontier> frontier;
  std::vector<JsonLightStack> stacks;  // distinct parent stacks of the frontier (consecutive ones repeat)
  // Only in the string content entry (json_mask.cpp): the characters each run adds, and the characters
  // before each closing quote of the frontier (whose `stack` is then unused).
  std::vector<uint32_t> run_chars, frontier_chars;
  size_t bytes() const;
};

// Shared by a constraint and its clones (and safe to use from several threads). Entries are added until
// kJsonMaskCacheBytes are held, then no more.
inline constexpr size_t kJsonMaskCacheBytes = size_t(16) << 20;
class JsonMaskCache {
 public:
  struct Key {
    JsonFrame top, below;  // the top two frames (below: a default frame when the stack has one)
    uint32_t depth = 0;
    bool operator==(const Key&) const = default;
  };
  std::shared_ptr<const JsonMaskEntry> find(const Key& key) const;
  void insert(const Key& key, std::shared_ptr<const JsonMaskEntry> entry);
  size_t size() const;

 private:
  struct Hash {
    size_t operator()(const Key& k) const;
  };
  mutable std::mutex mutex_;
  std::unordered_map<Key, std::shared_ptr<const JsonMaskEntry>, Hash> entries_;
  size_t bytes_ = 0;
};

// The same mask as json_allowed_tokens, through the cache.
void json_allowed_tokens_cached(const JsonMatcher& state, const TokenTrie& vocabulary, JsonMaskCache& cache,
                                std::vector<uint8_t>& allowed, JsonMaskScratch& scratch);

}  // namespace aerie
