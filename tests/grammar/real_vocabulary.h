// A real tokenizer (.cache/tokenizers/<model>, fetched by tools/gen/tokenizer/fetch_tokenizers.sh, or
// $AERIE_TOKENIZER_DIR) and its vocabulary as a TokenTrie, built the way the server builds it
// (src/server/structured_output.cpp): end-of-turn and end-of-text ids end the output, other special and
// added tokens are never allowed. Loaded once per model per test program.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "grammar/token_trie.h"
#include "tokenizer/tokenizer.h"

namespace aerie::test {

struct RealVocabulary {
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const TokenTrie> trie;
  std::vector<int32_t> end_tokens;
};

inline std::filesystem::path real_tokenizer_dir(const std::string& model) {
  const char* env = std::getenv("AERIE_TOKENIZER_DIR");
  return (env ? std::filesystem::path(env) : std::filesystem::path(AERIE_SOURCE_DIR) / ".cache/tokenizers") / model;
}

// nullptr when the tokenizer files are missing (the caller fails with a message naming the path).
inline const RealVocabulary* real_vocabulary(const std::string& model) {
  static std::map<std::string, std::unique_ptr<RealVocabulary>> loaded;
  auto& slot = loaded[model];
  if (slot) return slot.get();
  const std::filesystem::path dir = real_tokenizer_dir(model);
  if (!std::filesystem::exists(dir / "tokenizer.json")) return nullptr;
  slot = std::make_unique<RealVocabulary>();
  slot->tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(dir));
  const Tokenizer& t = *slot->tokenizer;
  std::vector<std::string> bytes;
  std::vector<int32_t> never;
  for (int32_t id = 0; id < t.n_vocab(); ++id) {
    bytes.emplace_back(t.token_bytes(id));
    const std::string_view name = t.id_to_token(id);
    const bool end = name == "<|eot_id|>" || name == "<|end_of_text|>" || name == "<|eom_id|>" ||
                     name == "<｜end▁of▁sentence｜>";
    if (end) slot->end_tokens.push_back(id);
    else if (t.is_special(id) || t.is_added(id)) never.push_back(id);
  }
  slot->trie = std::make_shared<const TokenTrie>(bytes, slot->end_tokens, never);
  return slot.get();
}

}  // namespace aerie::test
