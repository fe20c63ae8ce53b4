#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace aerie {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

void IncrementalDecoder::push(int32_t id, std::string& out) {
  if (skip_special_tokens_ && tokenizer_->is_special(id)) return;
  const std::string_view bytes = tokenizer_->token_bytes(id);
  if (pending_.empty()) {
    // Common case: nothing held back, convert straight from the token's bytes.
    const size_t used = append_utf8_lossy(bytes, out, /*final=*/false);
    pending_.assign(bytes.substr(used));
    return;
  }
  pending_.append(bytes);
  const size_t used = append_utf8_lossy(pending_, out, /*final=*/false);
  pending_.erase(0, used);
}

std::string IncrementalDecoder::push(int32_t id) {
  std::string out;
  push(id, out);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out;
  append_utf8_lossy(pending_, out, /*final=*/true);
  pending_.clear();
  return out;
}

}  // namespace aerie
