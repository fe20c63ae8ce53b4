#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "core/error.h"
#include "io/regex.h"

namespace aerie {
namespace {

// Unicode White_Space, what Rust's char::is_whitespace tests.
bool is_white_space(uint32_t cp) {
  return (cp >= 0x9 && cp <= 0xD) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

uint32_t decode_at(std::string_view text, size_t pos, size_t* length) {
  const auto b0 = static_cast<uint8_t>(text[pos]);
  size_t n = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
  n = std::min(n, text.size() - pos);
  uint32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1Fu) : n == 3 ? (b0 & 0x0Fu) : (b0 & 0x07u);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3Fu);
  *length = n;
  return cp;
}

// Start of the character that ends at text[end - 1].
size_t char_start_before(std::string_view text, size_t end) {
  size_t pos = end - 1;
  while (pos > 0 && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

// Word characters for single_word: Rust's char::is_alphanumeric (Alphabetic or Numeric) or '_'.
bool is_word_char(std::string_view ch) {
  static const Regex kWord(R"(^(?:\p{Alphabetic}|\p{N}|_)$)");
  thread_local Regex::Matcher matcher;
  size_t begin = 0, end = 0;
  return matcher.find(kWord, ch, 0, &begin, &end);
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view content, int32_t token) {
  int32_t node = 0;
  for (const char c : content) {
    const auto b = static_cast<uint8_t>(c);
    auto& children = nodes[static_cast<size_t>(node)].children;
    const auto it = std::find_if(children.begin(), children.end(), [b](const auto& e) { return e.first == b; });
    if (it != children.end()) {
      node = it->second;
    } else {
      const auto child = static_cast<int32_t>(nodes.size());
      nodes[static_cast<size_t>(node)].children.emplace_back(b, child);
      nodes.emplace_back();
      node = child;
    }
  }
  nodes[static_cast<size_t>(node)].token = token;
  first_byte[static_cast<uint8_t>(content[0])] = true;
}

int32_t AddedVocabulary::Trie::longest_at(std::string_view text, size_t pos, size_t* length) const {
  int32_t best = -1;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto b = static_cast<uint8_t>(text[i]);
    const auto& children = nodes[static_cast<size_t>(node)].children;
    const auto it = std::find_if(children.begin(), children.end(), [b](const auto& e) { return e.first == b; });
    if (it == children.end()) break;
    node = it->second;
    if (nodes[static_cast<size_t>(node)].token >= 0) {
      best = nodes[static_cast<size_t>(node)].token;
      *length = i + 1 - pos;
    }
  }
  return best;
}

void AddedVocabulary::add(AddedToken token) {
  AERIE_CHECK(!token.content.empty(), "tokenizer.json: added token ", token.id, " has empty content");
  AERIE_CHECK(token.id >= 0, "tokenizer.json: added token \"", token.content, "\" has a negative id");
  AERIE_CHECK(!index_by_content_.contains(token.content), "tokenizer.json: added token \"", token.content,
              "\" appears twice");
  const auto index = static_cast<int32_t>(tokens_.size());
  if (static_cast<size_t>(token.id) >= index_by_id_.size()) index_by_id_.resize(static_cast<size_t>(token.id) + 1, -1);
  AERIE_CHECK(index_by_id_[static_cast<size_t>(token.id)] < 0, "tokenizer.json: added token id ", token.id,
              " is used twice");
  index_by_id_[static_cast<size_t>(token.id)] = index;
  index_by_content_.emplace(token.content, index);
  (token.normalized ? normalized_trie_ : raw_trie_).insert(token.content, index);
  tokens_.push_back(std::move(token));
}

const AddedToken* AddedVocabulary::find(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= index_by_id_.size() || index_by_id_[static_cast<size_t>(id)] < 0) {
    return nullptr;
  }
  return &tokens_[static_cast<size_t>(index_by_id_[static_cast<size_t>(id)])];
}

const AddedToken* AddedVocabulary::find(std::string_view content) const {
  const auto it = index_by_content_.find(content);
  return it == index_by_content_.end() ? nullptr : &tokens_[static_cast<size_t>(it->second)];
}

void AddedVocabulary::split_pass(const Trie& trie, std::string_view text, bool parse_special,
                                 std::vector<Segment>& out) const {
  size_t emitted = 0;  // text before this offset is already in `out`
  size_t pos = 0;
  while (pos < text.size()) {
    if (!trie.first_byte[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    size_t length = 0;
    const int32_t index = trie.longest_at(text, pos, &length);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[static_cast<size_t>(index)];
    size_t start = pos, stop = pos + length;
    pos = stop;  // the search resumes after this match even when it is rejected below
    if (start < emitted) continue;  // inside whitespace that an rstrip already took
    if (!parse_special && token.special) continue;
    if (token.single_word) {
      size_t n = 0;
      const bool word_before = start > 0 && is_word_char(text.substr(char_start_before(text, start),
                                                                   start - char_start_before(text, start)));
      const bool word_after = stop < text.size() && (decode_at(text, stop, &n), is_word_char(text.substr(stop, n)));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      while (start > emitted) {
        const size_t prev = char_start_before(text, start);
        size_t n = 0;
        if (!is_white_space(decode_at(text, prev, &n))) break;
        start = prev;
      }
    }
    if (token.rstrip) {
      size_t n = 0;
      while (stop < text.size() && is_white_space(decode_at(text, stop, &n))) stop += n;
      pos = stop;
    }
    if (start > emitted) out.push_back({text.substr(emitted, start - emitted), -1});
    out.push_back({text.substr(start, stop - start), token.id});
    emitted = stop;
  }
  if (emitted < text.size()) out.push_back({text.substr(emitted), -1});
}

void AddedVocabulary::split(std::string_view text, bool parse_special, std::vector<Segment>& out) const {
  const size_t first = out.size();
  split_pass(raw_trie_, text, parse_special, out);
  if (normalized_trie_.nodes.size() == 1) return;
  // Second pass over the plain runs only. (Without a normalizer the text is the same as the raw text.)
  std::vector<Segment> pass(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  out.resize(first);
  for (const Segment& segment : pass) {
    if (segment.id >= 0) out.push_back(segment);
    else split_pass(normalized_trie_, segment.text, parse_special, out);
  }
}

}  // namespace aerie
