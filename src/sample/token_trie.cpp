#include "sample/token_trie.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace aerie {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes, const std::vector<int32_t>& end_tokens,
                     const std::vector<int32_t>& never_tokens)
    : kind_(token_bytes.size(), kText), end_tokens_(end_tokens) {
  const auto n_vocab = int64_t(token_bytes.size());
  for (const int32_t id : never_tokens) {
    AERIE_CHECK(id >= 0 && id < n_vocab, "token trie: never-allowed id ", id, " is outside the vocabulary [0, ",
                n_vocab, ")");
    kind_[size_t(id)] = kNever;
  }
  for (const int32_t id : end_tokens) {  // an end token is an end token even if listed as special
    AERIE_CHECK(id >= 0 && id < n_vocab, "token trie: end id ", id, " is outside the vocabulary [0, ", n_vocab, ")");
    kind_[size_t(id)] = kEnd;
  }
  bytes_offset_.reserve(token_bytes.size() + 1);
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    AERIE_CHECK(token_bytes[id].size() <= 0xffff, "token trie: token ", id, " is ", token_bytes[id].size(),
                " bytes long (at most 65535)");
    bytes_offset_.push_back(uint32_t(bytes_.size()));
    bytes_ += token_bytes[id];
    if (token_bytes[id].empty() && kind_[id] == kText) kind_[id] = kNever;
  }
  bytes_offset_.push_back(uint32_t(bytes_.size()));

  // Sorted by bytes, the tokens list the trie in preorder: a token's nodes are the ones its bytes do not
  // share with the previous token's.
  std::vector<int32_t> order;
  for (int32_t id = 0; id < int32_t(n_vocab); ++id)
    if (kind_[size_t(id)] == kText) order.push_back(id);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return this->token_bytes(a) < this->token_bytes(b); });
  std::vector<uint32_t> open;  // the nodes on the current path, by depth - 1
  std::string_view previous;
  auto close_to = [&](size_t depth) {
    for (; open.size() > depth; open.pop_back()) subtree_end_[open.back()] = uint32_t(byte_.size());
  };
  for (const int32_t id : order) {
    const std::string_view bytes = this->token_bytes(id);
    const size_t common =
        size_t(std::mismatch(previous.begin(), previous.end(), bytes.begin(), bytes.end()).first - previous.begin());
    close_to(common);
    for (size_t d = common; d < bytes.size(); ++d) {
      open.push_back(uint32_t(byte_.size()));
      byte_.push_back(uint8_t(bytes[d]));
      depth_.push_back(uint16_t(d + 1));
      subtree_end_.push_back(0);
      token_begin_.push_back(uint32_t(tokens_.size()));
    }
    tokens_.push_back(id);  // at the node of its last byte (the last one opened, or the same as previous')
    max_depth_ = std::max(max_depth_, bytes.size());
    previous = bytes;
  }
  close_to(0);
  token_begin_.push_back(uint32_t(tokens_.size()));
}

std::string_view TokenTrie::token_bytes(int32_t id) const {
  return std::string_view(bytes_).substr(bytes_offset_[size_t(id)], bytes_offset_[size_t(id) + 1] - bytes_offset_[size_t(id)]);
}

}  // namespace aerie
