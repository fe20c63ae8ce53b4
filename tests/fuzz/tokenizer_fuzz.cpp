// tokenizer.json (and tokenizer_config.json) loading, then encode and decode with what loaded.
// Input: TOKENIZER_JSON \0 TEXT \0 CONFIG_JSON (the last two optional). The text is encoded with and
// without special tokens; ids made from its bytes (negative, unknown and real ones) are decoded whole and
// streamed.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"

namespace {

// Ids from the text's bytes: mostly in [-2, n_vocab + 2), so real tokens dominate.
std::vector<int32_t> ids_from(std::string_view text, int32_t n_vocab) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    const int32_t raw = int32_t(uint8_t(text[i])) << 8 | uint8_t(text[i + 1]);
    ids.push_back(raw % (n_vocab + 4) - 2);
  }
  if (text.size() >= 4) ids.push_back(INT32_MAX);
  return ids;
}

void exercise(const aerie::Tokenizer& tokenizer, std::string_view text) {
  try {
    tokenizer.encode(text, true);
    tokenizer.encode(text, aerie::EncodeOptions{false, false});
  } catch (const aerie::Error&) {
    // Text that is not UTF-8.
  }
  const std::vector<int32_t> ids = ids_from(text, tokenizer.n_vocab());
  const std::string whole = tokenizer.decode(ids, false);
  tokenizer.decode(ids, true);
  // tokenizer.h: the streamed pieces and the flush concatenate to decode() of all the ids.
  aerie::IncrementalDecoder decoder(tokenizer);
  std::string streamed;
  for (int32_t id : ids) decoder.push(id, streamed);
  streamed += decoder.flush();
  if (streamed != whole) {
    std::fprintf(stderr, "IncrementalDecoder gave %zu bytes, decode %zu\n", streamed.size(), whole.size());
    std::abort();
  }
  for (int32_t id : ids) {
    tokenizer.token_bytes(id);
    tokenizer.id_to_token(id);
    tokenizer.is_special(id);
  }
  tokenizer.token_to_id(text);
  tokenizer.bos_id();
  tokenizer.eos_id();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [tokenizer_json, rest] = aerie::fuzz::split_at_nul(data, size);
  const auto [text, config_json] =
      aerie::fuzz::split_at_nul(reinterpret_cast<const uint8_t*>(rest.data()), rest.size());
  try {
    const aerie::Tokenizer tokenizer = aerie::Tokenizer::from_json(tokenizer_json, config_json);
    exercise(tokenizer, text);
  } catch (const aerie::Error&) {
    return -1;
  }
  return 0;
}
