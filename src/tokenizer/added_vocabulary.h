// Added tokens of tokenizer.json: strings that are cut out of the text before pre-tokenization and map
// straight to their ids. Matching follows Hugging Face tokenizers: leftmost-longest over all contents,
// tokens with normalized == false first on the raw text, then the others on what is left; single_word,
// lstrip and rstrip adjust or reject each match.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe_model.h"

namespace aerie {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;       // the match also swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool single_word = false;  // only matches when not inside a word
  bool normalized = false;   // matched after normalization (second pass) rather than on raw text
};

class AddedVocabulary {
 public:
  // A run of the input: plain text (id == -1) to pre-tokenize, or one added token.
  struct Segment {
    std::string_view text;
    int32_t id;
  };

  // Throws aerie::Error for an empty content or a content/id that is already taken by another token.
  void add(AddedToken token);
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* find(int32_t id) const;
  const AddedToken* find(std::string_view content) const;

  // Appends the segments of `text`. With parse_special == false, special tokens are left as plain text.
  void split(std::string_view text, bool parse_special, std::vector<Segment>& out) const;

 private:
  // Byte trie over the contents of one pass.
  struct Trie {
    struct Node {
      int32_t token = -1;  // index into tokens_ of the content ending here
      std::vector<std::pair<uint8_t, int32_t>> children;
    };
    std::vector<Node> nodes{Node{}};
    std::array<bool, 256> first_byte{};

    void insert(std::string_view content, int32_t token);
    // Longest content starting at text[pos]: its token index, and its length in *length; -1 if none.
    int32_t longest_at(std::string_view text, size_t pos, size_t* length) const;
  };

  void split_pass(const Trie& trie, std::string_view text, bool parse_special, std::vector<Segment>& out) const;

  std::vector<AddedToken> tokens_;
  StringIdMap index_by_content_;  // content -> index into tokens_
  std::vector<int32_t> index_by_id_;
  Trie raw_trie_, normalized_trie_;
};

}  // namespace aerie
