// A vocabulary as a byte trie, built once per tokenizer, so that a token mask is one depth-first walk:
// a grammar state is advanced one byte per trie edge and a refused prefix prunes its whole subtree
// (every token that starts with it), instead of feeding every token's bytes from scratch.
//
// The trie is stored in preorder (tokens sorted by their bytes): node i has the byte on its incoming
// edge, its depth (1 for the first byte of a token), the index just past its subtree, and the ids of the
// tokens whose bytes end at it. It knows nothing about grammars: walk() takes the advance function.
//
// Plain text: printable ASCII other than '"' and '\\', and well-formed multi-byte UTF-8 (no overlongs,
// surrogates or code points above U+10FFFF; a token may end inside a character). plain_subtree_[i]: every
// token at or below node i is plain text from its first byte.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace aerie {

class TokenTrie {
 public:
  // token_bytes[id]: the raw bytes token id decodes to (aerie::Tokenizer::token_bytes). end_tokens: the
  // end-of-sequence ids (allowed exactly when the output is complete). never_tokens: ids never allowed
  // (special and control tokens); tokens with no bytes are never allowed either.
  TokenTrie(const std::vector<std::string>& token_bytes, const std::vector<int32_t>& end_tokens,
            const std::vector<int32_t>& never_tokens);

  int32_t n_vocab() const { return int32_t(kind_.size()); }
  size_t n_nodes() const { return byte_.size(); }
  size_t max_depth() const { return max_depth_; }
  std::string_view token_bytes(int32_t id) const;
  bool is_end(int32_t id) const { return kind_[size_t(id)] == kEnd; }
  bool is_text(int32_t id) const { return kind_[size_t(id)] == kText; }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }

  // Depth-first walk: advance(depth, byte) moves from the caller's state at depth - 1 to a state at
  // `depth` (depth 0 is the state the walk starts from) and returns false to prune the subtree. Every
  // token whose bytes were all advanced gets allowed[id] = 1 (allowed must have n_vocab entries; end and
  // never-allowed tokens are not touched).
  //
  // plain_text_budget: the starting state admits any plain text (see below) of up to that many
  // characters — e.g. inside a JSON string at a character boundary, maxLength minus the characters so far
  // — so a subtree of plain-text tokens no longer than that is allowed whole, without advancing through
  // it (a character has at least one byte). 0: no such shortcut.
  template <typename Advance>
  void walk(Advance&& advance, uint8_t* allowed, size_t plain_text_budget = 0) const {
    walk_nodes(
        0, n_nodes(), [&](size_t, size_t depth, uint8_t byte) { return advance(depth, byte); },
        [&](uint32_t begin, uint32_t end) { allow(begin, end, allowed); }, plain_text_budget);
  }

  // The walk over the nodes [begin, end) (a run of whole subtrees, e.g. [i, subtree_end(i))), for walks
  // that record or replay parts of a mask (json_mask_cache.h): advance(node, depth, byte), and the tokens
  // allowed are reported as runs [first, last) of token slots (see allow()).
  // `plain`: kReport reports the plain-text subtrees skipped under the budget, as walk() does. Otherwise
  // the caller started from plain_text_mask(plain_text_budget), which holds them (a mask copy is far
  // cheaper than a scatter of ids), and nothing is reported for them: kSkipShallow skips the same subtrees;
  // kSkipAll, where the state refuses any plain text longer than the budget (one string, not parallel
  // parses with different rooms), skips every plain-text subtree whatever its depth, since the mask
  // decides each plain-text token exactly by its length in characters.
  enum class Plain : uint8_t { kReport, kSkipShallow, kSkipAll };
  // What advance() may return instead of a bool: kTakeAll allows the node's whole subtree without walking
  // it (e.g. every byte in it keeps an automaton in a state that loops on them, see subtree_bytes_within).
  enum class Step : uint8_t { kPrune = 0, kEnter = 1, kTakeAll = 2 };
  template <typename Advance, typename Report>
  void walk_nodes(size_t begin, size_t end, Advance&& advance, Report&& report, size_t plain_text_budget,
                  Plain plain = Plain::kReport) const {
    for (size_t i = begin; i < end;) {
      if (plain_subtree_[i] &&
          (plain == Plain::kSkipAll ? plain_text_budget > 0 : subtree_depth_[i] <= plain_text_budget)) {
        if (plain == Plain::kReport) report(token_begin_[i], token_begin_[subtree_end_[i]]);
        i = subtree_end_[i];
        continue;
      }
      const auto step = advance(i, size_t(depth_[i]), byte_[i]);
      if constexpr (std::is_same_v<decltype(step), const Step>) {
        if (step == Step::kTakeAll) {  // every token at or below node i is allowed
          report(token_begin_[i], token_begin_[subtree_end_[i]]);
          i = subtree_end_[i];
          continue;
        }
      }
      if (!bool(step)) {
        i = subtree_end_[i];
        continue;
      }
      if (token_begin_[i] != token_begin_[i + 1]) report(token_begin_[i], token_begin_[i + 1]);
      ++i;
    }
  }
  // allowed[id] = 1 for the tokens in slots [first, last) (a run reported by walk_nodes).
  void allow(uint32_t first, uint32_t last, uint8_t* allowed) const {
    for (uint32_t t = first; t < last; ++t) allowed[tokens_[t]] = 1;
  }
  // allowed[id] = 1 for every token that is plain text of at most `budget` characters (a character a
  // token ends inside counts as one), 0 for all others (end tokens included): exactly the plain-text
  // tokens a state that admits `budget` characters of plain text allows. allowed has n_vocab entries.
  void plain_text_mask(size_t budget, uint8_t* allowed) const;
  size_t subtree_end(size_t node) const { return subtree_end_[node]; }
  // The depth of the deepest node at or below `node` (the longest token there, in bytes).
  size_t subtree_depth(size_t node) const { return subtree_depth_[node]; }
  // Every byte on the edges at and below `node` is printable ASCII in `bytes` (a 128-bit set, bit b for
  // byte b; bytes of 0x7f and above stand as bit 0x7f, which such a set should not hold).
  bool subtree_bytes_within(size_t node, const std::array<uint64_t, 2>& bytes) const {
    const std::array<uint64_t, 2>& below = subtree_bytes_[node];
    return (below[0] & ~bytes[0]) == 0 && (below[1] & ~bytes[1]) == 0;
  }
  size_t depth(size_t node) const { return depth_[node]; }

 private:
  enum Kind : uint8_t { kText, kEnd, kNever };
  void find_plain_subtrees();

  // Nodes in preorder, [n_nodes] each.
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> subtree_end_;
  std::vector<uint32_t> token_begin_;  // [n_nodes + 1]: tokens_[token_begin_[i], token_begin_[i + 1])
  std::vector<uint8_t> plain_subtree_;
  std::vector<uint16_t> subtree_depth_;  // the longest token at or below the node, in bytes
  // [n_vocab] each: a plain-text token's length in characters (else 0xffff); the same saturated at 254
  // (else 255), for a compare the compiler vectorises; 1 for every plain-text token.
  std::vector<std::array<uint64_t, 2>> subtree_bytes_;  // see subtree_bytes_within
  std::vector<uint16_t> plain_chars_;
  std::vector<uint8_t> plain_chars_short_;
  std::vector<uint8_t> plain_all_;
  size_t max_plain_chars_ = 0;
  std::vector<int32_t> tokens_;
  size_t max_depth_ = 0;

  std::vector<uint8_t> kind_;           // [n_vocab]
  std::string bytes_;                   // every token's bytes, concatenated
  std::vector<uint32_t> bytes_offset_;  // [n_vocab + 1]
  std::vector<int32_t> end_tokens_;
};

}  // namespace aerie
