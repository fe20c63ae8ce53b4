#include "grammar/token_trie.h"

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
  find_plain_subtrees();
}

namespace {

// UTF-8 as plain text, one byte at a time: the state is what the next byte must be.
enum Utf8State : uint8_t { kBoundary, kCont1, kCont2, kCont3, kAfterE0, kAfterED, kAfterF0, kAfterF4, kBad };

Utf8State plain_text_step(Utf8State state, uint8_t b) {
  auto cont = [&](uint8_t lo, uint8_t hi, Utf8State next) { return b >= lo && b <= hi ? next : kBad; };
  switch (state) {
    case kBoundary:
      if (b >= 0x20 && b < 0x7F) return b == '"' || b == '\\' ? kBad : kBoundary;
      if (b >= 0xC2 && b <= 0xDF) return kCont1;
      if (b == 0xE0) return kAfterE0;
      if (b == 0xED) return kAfterED;
      if (b >= 0xE1 && b <= 0xEF) return kCont2;
      if (b == 0xF0) return kAfterF0;
      if (b >= 0xF1 && b <= 0xF3) return kCont3;
      if (b == 0xF4) return kAfterF4;
      return kBad;
    case kCont1: return cont(0x80, 0xBF, kBoundary);
    case kCont2: return cont(0x80, 0xBF, kCont1);
    case kCont3: return cont(0x80, 0xBF, kCont2);
    case kAfterE0: return cont(0xA0, 0xBF, kCont1);
    case kAfterED: return cont(0x80, 0x9F, kCont1);
    case kAfterF0: return cont(0x90, 0xBF, kCont2);
    case kAfterF4: return cont(0x80, 0x8F, kCont2);
    case kBad: break;
  }
  return kBad;
}

}  // namespace

void TokenTrie::find_plain_subtrees() {
  const size_t n = byte_.size();
  // Forward: whether the path to each node is plain text (state by depth along the current path).
  std::vector<Utf8State> path(max_depth_ + 1, kBoundary);
  std::vector<uint8_t> plain(n);
  for (size_t i = 0; i < n; ++i) {
    path[depth_[i]] = plain_text_step(path[depth_[i] - 1], byte_[i]);
    plain[i] = path[depth_[i]] != kBad;
  }
  // The bytes at and below each node (children before parents).
  subtree_bytes_.assign(n, {0, 0});
  for (size_t i = n; i-- > 0;) {
    const unsigned b = std::min<unsigned>(byte_[i], 0x7f);
    subtree_bytes_[i][b / 64] |= uint64_t(1) << (b % 64);
    for (size_t child = i + 1; child < subtree_end_[i]; child = subtree_end_[child]) {
      subtree_bytes_[i][0] |= subtree_bytes_[child][0];
      subtree_bytes_[i][1] |= subtree_bytes_[child][1];
    }
  }
  // Characters along the path (a plain path starts at a character boundary: every byte that is not a
  // continuation byte starts one).
  std::vector<uint16_t> chars(max_depth_ + 1, 0);
  plain_chars_.assign(kind_.size(), 0xffff);
  for (size_t i = 0; i < n; ++i) {
    chars[depth_[i]] = uint16_t(chars[depth_[i] - 1] + ((byte_[i] & 0xC0) != 0x80));
    if (!plain[i]) continue;
    for (uint32_t t = token_begin_[i]; t < token_begin_[i + 1]; ++t) plain_chars_[size_t(tokens_[t])] = chars[depth_[i]];
    max_plain_chars_ = std::max<size_t>(max_plain_chars_, chars[depth_[i]]);
  }
  plain_chars_short_.resize(kind_.size());
  plain_all_.resize(kind_.size());
  for (size_t id = 0; id < kind_.size(); ++id) {
    plain_chars_short_[id] = uint8_t(plain_chars_[id] == 0xffff ? 255 : std::min<uint16_t>(plain_chars_[id], 254));
    plain_all_[id] = plain_chars_[id] != 0xffff;
  }
  // Backward (children before parents): the subtree [i, subtree_end_[i]) is plain when no node in it is
  // not; its depth is the deepest of its children's.
  plain_subtree_.assign(n, 0);
  subtree_depth_.assign(n, 0);
  size_t next_not_plain = n;
  for (size_t i = n; i-- > 0;) {
    if (!plain[i]) next_not_plain = i;
    plain_subtree_[i] = next_not_plain >= subtree_end_[i];
    uint16_t deepest = depth_[i];
    for (size_t child = i + 1; child < subtree_end_[i]; child = subtree_end_[child])
      deepest = std::max(deepest, subtree_depth_[child]);
    subtree_depth_[i] = deepest;
  }
}

void TokenTrie::plain_text_mask(size_t budget, uint8_t* allowed) const {
  const size_t n = plain_chars_.size();
  if (budget >= max_plain_chars_) {  // every plain-text token (the common case: a string without maxLength)
    std::copy(plain_all_.begin(), plain_all_.end(), allowed);
  } else if (budget < 254) {  // exact: a saturated 254 stands for 254 characters or more, past the budget
    // Local pointers: through a uint8_t* store the compiler would reload the vector's (and not vectorise).
    const uint8_t* chars = plain_chars_short_.data();
    const auto limit = uint8_t(budget);
    for (size_t id = 0; id < n; ++id) allowed[id] = chars[id] <= limit;
  } else {
    const uint16_t* chars = plain_chars_.data();
    for (size_t id = 0; id < n; ++id) allowed[id] = chars[id] <= budget;
  }
}

std::string_view TokenTrie::token_bytes(int32_t id) const {
  return std::string_view(bytes_).substr(bytes_offset_[size_t(id)], bytes_offset_[size_t(id) + 1] - bytes_offset_[size_t(id)]);
}

}  // namespace aerie
