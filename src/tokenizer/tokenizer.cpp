#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <atomic>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"

namespace aerie {
namespace {

using Json = nlohmann::json;

std::string type_of(const Json& component, std::string_view what) {
  AERIE_CHECK(component.is_object() && component.contains("type") && component.at("type").is_string(),
              "tokenizer.json: ", what, " must be null or an object with a string 'type'");
  return component.at("type").get<std::string>();
}

// Only normalizers that change nothing are accepted: an empty Sequence (DeepSeek-V3) or null (Llama 3).
void check_normalizer(const Json& normalizer) {
  if (normalizer.is_null()) return;
  const std::string type = type_of(normalizer, "normalizer");
  if (type == "Sequence" && normalizer.contains("normalizers") && normalizer.at("normalizers").is_array()) {
    for (const Json& item : normalizer.at("normalizers")) check_normalizer(item);
    return;
  }
  throw_error(str_cat("tokenizer.json: unsupported normalizer type '", type, "'"));
}

// Only the ByteLevel decoder (alone or as the single member of a Sequence) is supported.
void check_decoder(const Json& decoder) {
  AERIE_CHECK(!decoder.is_null(), "tokenizer.json: a decoder is required (ByteLevel)");
  const std::string type = type_of(decoder, "decoder");
  if (type == "Sequence" && decoder.contains("decoders") && decoder.at("decoders").is_array()) {
    for (const Json& item : decoder.at("decoders")) check_decoder(item);
    return;
  }
  AERIE_CHECK(type == "ByteLevel", "tokenizer.json: unsupported decoder type '", type, "' (supported: ByteLevel)");
}

// Token strings in the config are either "text" or {"content": "text", ...}.
std::string token_string(const Json& config, const char* key) {
  if (!config.contains(key)) return {};
  const Json& value = config.at(key);
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value.at("content").is_string()) {
    return value.at("content").get<std::string>();
  }
  AERIE_CHECK(value.is_null(), "tokenizer_config.json: '", key, "' must be a string, {\"content\": ...} or null");
  return {};
}

// Every token id of tokenizer.json sizes id-indexed tables, so it must be plausible for the file: below
// max_vocab_size, and below twice its number of tokens (model vocab and added_tokens) plus some slack.
// Real files are dense: Llama 3 has ids 0..128255 for 128000 + 256 tokens, DeepSeek-V3 0..128814 for
// 128000 + 818 (three added tokens repeat vocab entries); an id of 2^31 - 1 would ask for 8 GB.
int64_t token_id_bound(const Json& model, const Json& added_tokens, const LoadLimits& limits) {
  constexpr int64_t kSlack = 256;
  const Json* vocab = model.is_object() && model.contains("vocab") ? &model.at("vocab") : nullptr;
  const size_t n_vocab = vocab != nullptr && vocab->is_object() ? vocab->size() : 0;
  const size_t n_added = added_tokens.is_array() ? added_tokens.size() : 0;
  return std::min<int64_t>(limits.max_vocab_size, 2 * static_cast<int64_t>(n_vocab + n_added) + kSlack);
}

TokenizerConfig parse_config(std::string_view text) {
  TokenizerConfig config;
  if (text.empty()) return config;
  const Json json = parse_json_text(text, "tokenizer_config.json");
  AERIE_CHECK(json.is_object(), "tokenizer_config.json: must be a JSON object");
  config.raw_json = std::string(text);
  if (json.contains("tokenizer_class") && json.at("tokenizer_class").is_string()) {
    config.tokenizer_class = json.at("tokenizer_class").get<std::string>();
  }
  config.bos_token = token_string(json, "bos_token");
  config.eos_token = token_string(json, "eos_token");
  config.pad_token = token_string(json, "pad_token");
  config.unk_token = token_string(json, "unk_token");
  for (const char* key : {"add_bos_token", "add_eos_token"}) {
    if (!json.contains(key) || json.at(key).is_null()) continue;
    AERIE_CHECK(json.at(key).is_boolean(), "tokenizer_config.json: '", key, "' must be a boolean");
    (std::string_view(key) == "add_bos_token" ? config.add_bos_token : config.add_eos_token) = json.at(key).get<bool>();
  }
  if (json.contains("chat_template")) {
    const Json& chat = json.at("chat_template");
    if (chat.is_string()) {
      config.chat_template = chat.get<std::string>();
    } else if (chat.is_array()) {
      // [{"name": ..., "template": ...}, ...]; the one named "default" is the default.
      for (const Json& item : chat) {
        AERIE_CHECK(item.is_object() && item.contains("name") && item.at("name").is_string() &&
                        item.contains("template") && item.at("template").is_string(),
                    "tokenizer_config.json: chat_template list entries need string 'name' and 'template'");
        config.chat_templates[item.at("name").get<std::string>()] = item.at("template").get<std::string>();
      }
      if (const auto it = config.chat_templates.find("default"); it != config.chat_templates.end()) {
        config.chat_template = it->second;
      }
    } else {
      AERIE_CHECK(chat.is_null(), "tokenizer_config.json: 'chat_template' must be a string or a list");
    }
  }
  return config;
}

}  // namespace

struct Tokenizer::Impl {
  AddedVocabulary added;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  // The single-sequence template of the post-processor: prefix ids, the text's ids, suffix ids.
  std::vector<int32_t> prefix_ids, suffix_ids;
  std::vector<std::string> token_bytes;  // [n_vocab] what each id decodes to
  int32_t n_vocab = 0;
  TokenizerConfig config;
  std::optional<int32_t> bos_id, eos_id;
  uint64_t serial = 0;  // tells thread-local caches which tokenizer filled them

  void load_added_tokens(const Json& list, int64_t id_bound);
  void load_post_processor(const Json& processor, int64_t id_bound);
  void apply_config();
  void build_token_bytes();
};

void Tokenizer::Impl::load_added_tokens(const Json& list, int64_t id_bound) {
  if (list.is_null()) return;
  AERIE_CHECK(list.is_array(), "tokenizer.json: 'added_tokens' must be an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& item = list[i];
    const std::string where = str_cat("added_tokens[", i, "]");
    AERIE_CHECK(item.is_object() && item.contains("id") && item.contains("content") && item.at("content").is_string(),
                "tokenizer.json: ", where, " needs an integer 'id' and a string 'content'");
    AddedToken token;
    token.content = item.at("content").get<std::string>();
    token.id = checked_token_id(item.at("id"), id_bound, where + " \"" + token.content + "\"");
    if (token.id < model.n_vocab()) {
      const std::string& in_vocab = model.id_to_token(token.id);
      AERIE_CHECK(in_vocab.empty() || in_vocab == token.content, "tokenizer.json: ", where, " \"", token.content,
                  "\" has id ", token.id, ", which model.vocab gives to \"", in_vocab, "\"");
    }
    auto flag = [&](const char* key, bool fallback) {
      return item.contains(key) && item.at(key).is_boolean() ? item.at(key).get<bool>() : fallback;
    };
    token.special = flag("special", false);
    token.lstrip = flag("lstrip", false);
    token.rstrip = flag("rstrip", false);
    token.single_word = flag("single_word", false);
    token.normalized = flag("normalized", !token.special);
    added.add(std::move(token));
  }
}

void Tokenizer::Impl::load_post_processor(const Json& processor, int64_t id_bound) {
  if (processor.is_null()) return;
  const std::string type = type_of(processor, "post_processor");
  if (type == "ByteLevel") return;  // only adjusts offsets
  if (type == "Sequence") {
    AERIE_CHECK(processor.contains("processors") && processor.at("processors").is_array(),
                "tokenizer.json: post_processor Sequence lacks a 'processors' array");
    for (const Json& item : processor.at("processors")) load_post_processor(item, id_bound);
    return;
  }
  AERIE_CHECK(type == "TemplateProcessing", "tokenizer.json: unsupported post_processor type '", type,
              "' (supported: TemplateProcessing, ByteLevel, Sequence)");
  AERIE_CHECK(processor.contains("single") && processor.at("single").is_array(),
              "tokenizer.json: TemplateProcessing lacks a 'single' array");
  const Json specials = processor.value("special_tokens", Json::object());
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (const Json& piece : processor.at("single")) {
    if (piece.contains("Sequence")) {
      AERIE_CHECK(!seen_sequence, "tokenizer.json: TemplateProcessing 'single' has more than one Sequence");
      seen_sequence = true;
      continue;
    }
    AERIE_CHECK(piece.contains("SpecialToken") && piece.at("SpecialToken").contains("id") &&
                    piece.at("SpecialToken").at("id").is_string(),
                "tokenizer.json: TemplateProcessing pieces must be {\"Sequence\"} or {\"SpecialToken\": {\"id\": name}}");
    const auto name = piece.at("SpecialToken").at("id").get<std::string>();
    AERIE_CHECK(specials.is_object() && specials.contains(name) && specials.at(name).is_object() &&
                    specials.at(name).contains("ids") && specials.at(name).at("ids").is_array(),
                "tokenizer.json: TemplateProcessing special token '", name, "' is not in special_tokens");
    // Checked against the vocabulary once it is complete (build_token_bytes).
    for (const Json& id : specials.at(name).at("ids")) {
      (seen_sequence ? after : before)
          .push_back(checked_token_id(id, id_bound, "post_processor special_tokens '" + name + "'"));
    }
  }
  AERIE_CHECK(seen_sequence, "tokenizer.json: TemplateProcessing 'single' has no Sequence");
  // A later processor wraps the output of an earlier one.
  prefix_ids.insert(prefix_ids.begin(), before.begin(), before.end());
  suffix_ids.insert(suffix_ids.end(), after.begin(), after.end());
}

void Tokenizer::Impl::apply_config() {
  auto id_of = [&](const std::string& token) -> std::optional<int32_t> {
    if (token.empty()) return std::nullopt;
    if (const AddedToken* t = added.find(token)) return t->id;
    return model.token_to_id(token);
  };
  bos_id = id_of(config.bos_token);
  eos_id = id_of(config.eos_token);
  // transformers' LlamaTokenizerFast rebuilds the template from add_bos_token (default true) and
  // add_eos_token (default false), whatever tokenizer.json says; DeepSeek-V3 relies on this for BOS.
  if (config.tokenizer_class == "LlamaTokenizerFast" || config.tokenizer_class == "LlamaTokenizer") {
    const bool add_bos = config.add_bos_token.value_or(true), add_eos = config.add_eos_token.value_or(false);
    AERIE_CHECK(!add_bos || bos_id, "tokenizer_config.json: add_bos_token is set but bos_token '",
                config.bos_token, "' is not in the vocabulary");
    AERIE_CHECK(!add_eos || eos_id, "tokenizer_config.json: add_eos_token is set but eos_token '",
                config.eos_token, "' is not in the vocabulary");
    prefix_ids.clear();
    suffix_ids.clear();
    if (add_bos) prefix_ids.push_back(*bos_id);
    if (add_eos) suffix_ids.push_back(*eos_id);
  }
}

void Tokenizer::Impl::build_token_bytes() {
  n_vocab = model.n_vocab();
  for (const AddedToken& t : added.tokens()) n_vocab = std::max(n_vocab, t.id + 1);
  token_bytes.assign(static_cast<size_t>(n_vocab), std::string());
  // The ByteLevel decoder maps a token's characters back to bytes; a token with any character outside
  // the alphabet (most added tokens) is taken as its UTF-8 text.
  auto decoded = [](const std::string& token) { return byte_level_decode(token).value_or(token); };
  for (int32_t id = 0; id < model.n_vocab(); ++id) token_bytes[static_cast<size_t>(id)] = decoded(model.id_to_token(id));
  for (const AddedToken& t : added.tokens()) token_bytes[static_cast<size_t>(t.id)] = decoded(t.content);
  for (const int32_t id : prefix_ids) AERIE_CHECK(id >= 0 && id < n_vocab, "tokenizer.json: template id ", id, " is out of range");
  for (const int32_t id : suffix_ids) AERIE_CHECK(id >= 0 && id < n_vocab, "tokenizer.json: template id ", id, " is out of range");
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json, const LoadLimits& limits) {
  static std::atomic<uint64_t> next_serial{1};
  const Json json = parse_json_text(tokenizer_json, "tokenizer.json");
  AERIE_CHECK(json.is_object(), "tokenizer.json: must be a JSON object");
  AERIE_CHECK(json.contains("model"), "tokenizer.json: lacks the 'model' section");
  auto impl = std::make_unique<Impl>();
  impl->serial = next_serial.fetch_add(1);
  try {
    check_normalizer(json.value("normalizer", Json()));
    impl->pre_tokenizer = PreTokenizer::from_json(json.value("pre_tokenizer", Json()));
    check_decoder(json.value("decoder", Json()));
    static const Json kNone;
    const Json& added_tokens = json.contains("added_tokens") ? json.at("added_tokens") : kNone;
    const int64_t id_bound = token_id_bound(json.at("model"), added_tokens, limits);
    impl->model = BpeModel::from_json(json.at("model"), impl->pre_tokenizer.byte_level(), id_bound);
    impl->load_added_tokens(added_tokens, id_bound);
    impl->load_post_processor(json.value("post_processor", Json()), id_bound);
  } catch (const Json::exception& e) {
    // A field of an unexpected type that no check above names.
    throw_error(str_cat("tokenizer.json: unexpected JSON: ", e.what()));
  }
  impl->config = parse_config(config_json);
  impl->apply_config();
  impl->build_token_bytes();
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::load(const std::filesystem::path& path, const LoadLimits& limits) {
  const std::filesystem::path file = std::filesystem::is_directory(path) ? path / "tokenizer.json" : path;
  AERIE_CHECK(std::filesystem::exists(file), "tokenizer file not found: ", file.string());
  const std::filesystem::path config_file = file.parent_path() / "tokenizer_config.json";
  const std::string config =
      std::filesystem::exists(config_file) ? read_json_text(config_file, limits.max_json_file_bytes) : std::string();
  const std::string text = read_json_text(file, limits.max_json_file_bytes);
  try {
    return from_json(text, config, limits);
  } catch (const Error& e) {
    throw_error(str_cat(file.string(), ": ", e.what()));
  }
}

namespace {

// Per-thread encode state, reused across calls; the BPE cache belongs to one tokenizer at a time.
struct EncodeScratch {
  uint64_t owner = 0;
  PreTokenizer::Scratch pre;
  BpeModel::Scratch bpe;
  std::vector<AddedVocabulary::Segment> segments;
  std::vector<std::string_view> pieces;
};

EncodeScratch& encode_scratch(uint64_t owner) {
  thread_local EncodeScratch scratch;
  if (scratch.owner != owner) {
    scratch.bpe.cache.clear();
    scratch.bpe.cache_ids.clear();
    scratch.owner = owner;
  }
  return scratch;
}

}  // namespace

void Tokenizer::encode_append(std::string_view text, const EncodeOptions& options, std::vector<int32_t>& out) const {
  validate_utf8(text);
  const Impl& impl = *impl_;
  if (options.add_special_tokens) out.insert(out.end(), impl.prefix_ids.begin(), impl.prefix_ids.end());
  EncodeScratch& s = encode_scratch(impl.serial);
  s.segments.clear();
  impl.added.split(text, options.parse_special_tokens, s.segments);
  for (const AddedVocabulary::Segment& segment : s.segments) {
    if (segment.id >= 0) {
      out.push_back(segment.id);
      continue;
    }
    s.pieces.clear();
    s.pre.arena.clear();
    impl.pre_tokenizer.split(segment.text, s.pre, s.pieces);
    for (const std::string_view piece : s.pieces) impl.model.encode_piece(piece, s.bpe, out);
  }
  if (options.add_special_tokens) out.insert(out.end(), impl.suffix_ids.begin(), impl.suffix_ids.end());
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  encode_append(text, options, ids);
  return ids;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  EncodeOptions options;
  options.add_special_tokens = add_special_tokens;
  return encode(text, options);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (const int32_t id : ids) {
    if (skip_special_tokens && is_special(id)) continue;
    bytes.append(token_bytes(id));
  }
  std::string text;
  text.reserve(bytes.size());
  append_utf8_lossy(bytes, text, /*final=*/true);
  return text;
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= impl_->n_vocab) return {};
  return impl_->token_bytes[static_cast<size_t>(id)];
}

int32_t Tokenizer::n_vocab() const { return impl_->n_vocab; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* t = impl_->added.find(token)) return t->id;
  return impl_->model.token_to_id(token);
}

std::string_view Tokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* t = impl_->added.find(id)) return t->content;
  if (id < 0 || id >= impl_->model.n_vocab()) return {};
  return impl_->model.id_to_token(id);
}

bool Tokenizer::is_special(int32_t id) const {
  const AddedToken* t = impl_->added.find(id);
  return t && t->special;
}

bool Tokenizer::is_added(int32_t id) const { return impl_->added.find(id) != nullptr; }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos_id; }
const TokenizerConfig& Tokenizer::config() const { return impl_->config; }

}  // namespace aerie
