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

#include <cstdint>
#include <string>
#include <string_view>
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
    const size_t n = byte_.size();
    for (size_t i = 0; i < n;) {
      if (plain_subtree_[i] && subtree_depth_[i] <= plain_text_budget) {
        for (uint32_t t = token_begin_[i]; t < token_begin_[subtree_end_[i]]; ++t) allowed[tokens_[t]] = 1;
        i = subtree_end_[i];
        continue;
      }
      if (!advance(size_t(depth_[i]), byte_[i])) {
        i = subtree_end_[i];
        continue;
      }
      for (uint32_t t = token_begin_[i]; t < token_begin_[i + 1]; ++t) allowed[tokens_[t]] = 1;
      ++i;
    }
  }

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
  std::vector<int32_t> tokens_;
  size_t max_depth_ = 0;

  std::vector<uint8_t> kind_;           // [n_vocab]
  std::string bytes_;                   // every token's bytes, concatenated
  std::vector<uint32_t> bytes_offset_;  // [n_vocab + 1]
  std::vector<int32_t> end_tokens_;
};

}  // namespace aerie
