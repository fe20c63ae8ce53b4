#include "tokenizer/tokenizer_gguf.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace aerie {
namespace {

using nlohmann::json;

// The pre-tokenizers of the published tokenizer.json files that llama.cpp's pre-tokenizer names stand for
// (Meta's Llama 3.1 and DeepSeek's V3 repositories), verbatim.
constexpr const char* kLlamaBpe =
    R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})";
constexpr const char* kDeepseekV3 =
    R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": false}, {"type": "Split", "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"}, "behavior": "Isolated", "invert": false}, {"type": "Split", "pattern": {"Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})";

enum TokenType : int64_t { kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5 };

// tokenizer.json's model, added_tokens and post_processor from the metadata.
json tokenizer_json(const GgufMetadata& m, const std::string& pre, const LoadLimits& limits) {
  const std::vector<std::string>& tokens = m.strings("tokenizer.ggml.tokens");
  AERIE_CHECK(int64_t(tokens.size()) <= limits.max_vocab_size, m.source(), ": tokenizer.ggml.tokens holds ",
              tokens.size(), " tokens, more than LoadLimits::max_vocab_size (", limits.max_vocab_size, ")");
  std::vector<int64_t> types(tokens.size(), kNormal);
  if (m.has("tokenizer.ggml.token_type")) {
    types = m.integers("tokenizer.ggml.token_type");
    AERIE_CHECK(types.size() == tokens.size(), m.source(), ": tokenizer.ggml.token_type has ", types.size(),
                " entries for ", tokens.size(), " tokens");
  }
  json vocab = json::object(), added = json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    const int64_t type = types[id];
    if (type == kNormal) {
      AERIE_CHECK(!vocab.contains(tokens[id]), m.source(), ": token '", tokens[id],
                  "' appears twice in the vocabulary");
      vocab[tokens[id]] = id;
    } else if (type == kControl || type == kUserDefined) {
      const bool special = type == kControl;
      added.push_back({{"id", id},
                       {"content", tokens[id]},
                       {"special", special},
                       {"normalized", !special},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false}});
    } else {
      AERIE_CHECK(type == kUnused, m.source(), ": token ", id, " has token type ", type,
                  " (a byte-level BPE vocabulary holds types 1 normal, 3 control, 4 user-defined, 5 unused)");
    }
  }
  json model = {{"type", "BPE"},
                {"vocab", std::move(vocab)},
                {"byte_fallback", false},
                {"fuse_unk", false},
                {"ignore_merges", pre == "llama-bpe"}};
  model["merges"] = m.has("tokenizer.ggml.merges") ? json(m.strings("tokenizer.ggml.merges")) : json::array();
  json t = {{"model", std::move(model)},
            {"added_tokens", std::move(added)},
            {"pre_tokenizer", json::parse(pre == "llama-bpe" ? kLlamaBpe : kDeepseekV3)},
            {"decoder",
             {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}}};
  // BOS (and EOS) around every encoded text, as llama.cpp's add_bos_token / add_eos_token say; llama.cpp
  // adds BOS for llama-bpe when the key is absent.
  const auto special_id = [&](const char* key) {
    const int64_t id = m.integer(key);
    AERIE_CHECK(id >= 0 && id < int64_t(tokens.size()), m.source(), ": ", key, " ", id, " is not a token id");
    return id;
  };
  json single = json::array(), special_tokens = json::object();
  const auto piece = [&](const char* key) {
    const std::string& content = tokens[size_t(special_id(key))];
    special_tokens[content] = {{"id", content}, {"ids", {special_id(key)}}, {"tokens", {content}}};
    single.push_back({{"SpecialToken", {{"id", content}, {"type_id", 0}}}});
  };
  if (m.boolean("tokenizer.ggml.add_bos_token", pre == "llama-bpe") && m.has("tokenizer.ggml.bos_token_id"))
    piece("tokenizer.ggml.bos_token_id");
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (m.boolean("tokenizer.ggml.add_eos_token", false) && m.has("tokenizer.ggml.eos_token_id"))
    piece("tokenizer.ggml.eos_token_id");
  if (single.size() > 1)
    t["post_processor"] = {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", special_tokens}};
  return t;
}

}  // namespace

Tokenizer tokenizer_from_gguf(const GgufMetadata& m, const LoadLimits& limits) {
  const std::string model = m.string("tokenizer.ggml.model");
  AERIE_CHECK(model == "gpt2", m.source(), ": tokenizer.ggml.model '", model,
              "' is not supported (aerie reads byte-level BPE: gpt2)");
  const std::string pre = m.string("tokenizer.ggml.pre", "default");
  AERIE_CHECK(pre == "llama-bpe" || pre == "deepseek-v3", m.source(), ": tokenizer.ggml.pre '", pre,
              "' is not supported (supported: llama-bpe, deepseek-v3)");
  const json tokenizer = tokenizer_json(m, pre, limits);
  json config = json::object();
  const std::vector<std::string>& tokens = m.strings("tokenizer.ggml.tokens");
  for (const auto& [key, field] :
       {std::pair{"tokenizer.ggml.bos_token_id", "bos_token"}, std::pair{"tokenizer.ggml.eos_token_id", "eos_token"},
        std::pair{"tokenizer.ggml.padding_token_id", "pad_token"}}) {
    if (!m.has(key)) continue;
    const int64_t id = m.integer(key);
    AERIE_CHECK(id >= 0 && id < int64_t(tokens.size()), m.source(), ": ", key, " ", id, " is not a token id");
    config[field] = tokens[size_t(id)];
  }
  if (m.has("tokenizer.chat_template")) config["chat_template"] = m.string("tokenizer.chat_template");
  try {
    return Tokenizer::from_json(tokenizer.dump(), config.dump(), limits);
  } catch (const Error& e) {
    throw Error(str_cat(m.source(), ": ", e.what()));
  }
}

Tokenizer load_model_tokenizer(const std::filesystem::path& path, const LoadLimits& limits) {
  if (is_gguf_file(path)) return tokenizer_from_gguf(open_gguf(path).metadata, limits);
  return Tokenizer::load(path, limits);
}

bool has_model_tokenizer(const std::filesystem::path& path) {
  std::error_code ec;
  if (is_gguf_file(path)) return true;
  if (std::filesystem::is_directory(path, ec)) return std::filesystem::exists(path / "tokenizer.json", ec);
  return std::filesystem::is_regular_file(path, ec);
}

}  // namespace aerie
