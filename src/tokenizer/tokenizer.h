// Tokenizer: loads a Hugging Face tokenizer.json (+ tokenizer_config.json) with a byte-level BPE model
// (Llama 3, DeepSeek-V3) and encodes text to ids and ids back to text.
//
//   text -> UTF-8 check -> added tokens cut out -> pre-tokenizer pieces -> BPE per piece -> template (BOS)
//   ids  -> bytes of each token (byte alphabet undone) -> UTF-8 with U+FFFD for broken sequences
//
// Loading rejects what it cannot reproduce exactly (WordPiece/Unigram models, unknown pre-tokenizers,
// normalizers, decoders or post-processors) with an aerie::Error naming the component. A Tokenizer is
// immutable after load; encode and decode may run concurrently on several threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/limits.h"

namespace aerie {

// The fields of tokenizer_config.json that the rest of the engine uses. Token fields may be written as
// strings or as {"content": ...} objects in the file; here they are plain strings ("" when absent).
struct TokenizerConfig {
  std::string tokenizer_class;
  std::string bos_token, eos_token, pad_token, unk_token;
  std::optional<bool> add_bos_token, add_eos_token;
  std::string chat_template;                          // the default template, "" when there is none
  std::map<std::string, std::string> chat_templates;  // by name, when the file lists several
  std::string raw_json;                               // the whole file, for anything else ("" if none)
};

struct EncodeOptions {
  bool add_special_tokens = true;    // apply the post-processor template (BOS for Llama 3)
  bool parse_special_tokens = true;  // false: special-token strings in the text are encoded as text
};

class Tokenizer {
 public:
  // `path` is a directory holding tokenizer.json (and optionally tokenizer_config.json), or the
  // tokenizer.json file itself (the config is then looked for beside it). The files come from the
  // internet: `limits` bound their size (max_json_file_bytes), JSON depth and token ids (max_vocab_size),
  // and a file over a limit is a load error naming the file and field.
  static Tokenizer load(const std::filesystem::path& path, const LoadLimits& limits = LoadLimits());
  // From the file contents; config_json may be empty.
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view config_json = {},
                             const LoadLimits& limits = LoadLimits());

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  ~Tokenizer();

  // Throws aerie::Error (naming the byte offset) when text is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const;
  void encode_append(std::string_view text, const EncodeOptions& options, std::vector<int32_t>& out) const;

  // Ids the vocabulary does not define are skipped, as Hugging Face tokenizers does (a model's embedding
  // table is often padded beyond the tokenizer's vocabulary). Broken UTF-8 becomes U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // Raw bytes that token `id` decodes to, possibly part of a UTF-8 character ("" for unknown ids).
  std::string_view token_bytes(int32_t id) const;

  int32_t n_vocab() const;  // largest id plus one
  // Looks up a token as tokenizer.json spells it (added tokens by content, model tokens in the byte
  // alphabet, e.g. "Ġworld").
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string_view id_to_token(int32_t id) const;  // "" for unknown ids
  bool is_special(int32_t id) const;               // an added token marked special
  bool is_added(int32_t id) const;

  std::optional<int32_t> bos_id() const;  // from tokenizer_config.json's bos_token
  std::optional<int32_t> eos_id() const;
  const TokenizerConfig& config() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Streaming detokenizer: push ids one at a time and get the text they complete. Bytes of a character
// split across tokens are held until the character is whole, so every returned string is valid UTF-8 and
// the concatenation of all pushes and the final flush equals Tokenizer::decode of all the ids.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  std::string push(int32_t id);
  void push(int32_t id, std::string& out);  // appends to out
  // Ends the stream: held bytes of an unfinished character come out as U+FFFD.
  std::string flush();
  bool has_pending() const { return !pending_.empty(); }
  void reset() { pending_.clear(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;  // bytes of an incomplete character, at most 3
};

}  // namespace aerie
