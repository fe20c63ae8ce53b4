// The C API's models, engines and text functions (include/aerie.h); requests and events are in
// capi_request.cpp. Every entry point runs inside guarded() (handles.h): no exception leaves this file.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "capi/handles.h"
#include "io/generation_config.h"
#include "models/lora.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"
#include "tokenizer/tokenizer_gguf.h"

namespace aerie::capi {
namespace {

thread_local std::string last_error;

// The first version of each options struct: the fields a caller's struct must hold at least.
constexpr size_t kModelOptionsV1 = sizeof(aerie_model_options);
constexpr size_t kEngineOptionsV1 = offsetof(aerie_engine_options, lora_names);

ModelState& model_of(const aerie_model* model) {
  AERIE_CAPI_REQUIRE(model, "model");
  return *model->state;
}

// Copies `text` into the caller's buffer under the header's rule for outputs (NUL-terminated).
void write_text(const std::string& text, char* out, size_t capacity, size_t* length) {
  *length = text.size();
  if (capacity <= text.size())
    throw StatusError(AERIE_ERROR_BUFFER_TOO_SMALL, str_cat("the text is ", text.size(), " bytes: the buffer needs ",
                                                            text.size() + 1, " with the NUL, it has ", capacity));
  std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
}

WeightFormat weight_format(aerie_weight_format format) {
  switch (format) {
    case AERIE_WEIGHTS_AS_STORED: return WeightFormat::kAsStored;
    case AERIE_WEIGHTS_INT8: return WeightFormat::kInt8;
    case AERIE_WEIGHTS_INT4: return WeightFormat::kInt4;
  }
  throw Error(str_cat("aerie_model_options.weights: ", int(format), " is no aerie_weight_format"));
}

std::shared_ptr<ModelState> load(const char* dir, const aerie_model_options& options) {
  auto state = std::make_shared<ModelState>();
  state->dir = dir;
  if (options.n_threads < 0)
    throw StatusError(AERIE_ERROR_INVALID_ARGUMENT,
                      str_cat("aerie_model_options.n_threads must be >= 0 (0: every core), got ", options.n_threads));
  LoadOptions load;
  load.weights = weight_format(options.weights);
  // The tokenizer first: a broken tokenizer fails before the weights are read.
  const std::filesystem::path tokenizer_dir = options.tokenizer_dir ? options.tokenizer_dir : dir;
  if (options.tokenizer_dir && !has_model_tokenizer(tokenizer_dir))
    throw Error(str_cat("aerie_model_options.tokenizer_dir: ", tokenizer_dir.string(), " has no tokenizer"));
  if (has_model_tokenizer(tokenizer_dir))
    state->tokenizer = std::make_unique<Tokenizer>(load_model_tokenizer(tokenizer_dir));
  // A template that does not parse refuses chat messages (naming why), not the model: ids and text still work.
  if (state->tokenizer && !state->tokenizer->config().chat_template.empty()) {
    try {
      state->chat_template = ChatTemplate::parse(state->tokenizer->config().chat_template,
                                                 "tokenizer_config.json chat_template");
    } catch (const Error& e) {
      state->chat_template_error = e.what();
    }
  }
  state->pool = std::make_unique<ThreadPool>(options.n_threads);
  state->model = load_model(dir, *state->pool, load);
  state->eos_ids = merge_ids(state->model->eos_token_ids(), load_generation_config(dir).eos_token_ids);
  return state;
}

}  // namespace

aerie_status fail(aerie_status status, std::string message) {
  try {
    last_error = std::move(message);
  } catch (...) {  // no room even for the message: keep the status
  }
  return status;
}

void check_struct_size(size_t size, size_t first_version, size_t ours, const char* name) {
  if (size < first_version || size > ours)
    throw StatusError(AERIE_ERROR_INVALID_ARGUMENT,
                      size > ours
                          ? str_cat(name, ".size is ", size, ": a newer aerie.h than this library (", ours,
                                    "); rebuild against the installed header")
                          : str_cat(name, ".size is ", size, ", expected ", ours, " (call ", name, "_init first)"));
}

const Tokenizer& ModelState::need_tokenizer(const char* what) const {
  if (!tokenizer)
    throw StatusError(AERIE_ERROR_UNSUPPORTED,
                      str_cat(what, " needs a tokenizer, and ", dir, " has none (aerie_model_options.tokenizer_dir)"));
  return *tokenizer;
}

// Every id the model can produce, for JSON constraints: text tokens by their bytes; end-of-sequence ids end
// the output; added tokens (special markers) and ids the tokenizer lacks never appear (as the server does).
std::shared_ptr<const TokenTrie> ModelState::json_vocabulary() {
  std::call_once(vocabulary_once, [&] {
    const Tokenizer& t = need_tokenizer("json_schema");
    const int64_t n_vocab = model->n_vocab();
    std::vector<std::string> bytes(static_cast<size_t>(n_vocab));
    std::vector<int32_t> end, never;
    for (int64_t id = 0; id < n_vocab; ++id) {
      const bool is_end = std::find(eos_ids.begin(), eos_ids.end(), id) != eos_ids.end();
      if (is_end) end.push_back(int32_t(id));
      if (id >= t.n_vocab()) continue;
      if (!is_end && t.is_added(int32_t(id))) never.push_back(int32_t(id));
      bytes[size_t(id)] = std::string(t.token_bytes(int32_t(id)));
    }
    vocabulary = std::make_shared<const TokenTrie>(bytes, end, never);
  });
  return vocabulary;
}

std::string render_messages(const ModelState& model, const aerie_chat_message* messages, size_t n,
                            bool add_generation_prompt) {
  const Tokenizer& tokenizer = model.need_tokenizer("chat messages");
  if (!model.chat_template)
    throw StatusError(AERIE_ERROR_UNSUPPORTED,
                      model.chat_template_error.empty()
                          ? str_cat("chat messages need a chat template, and ", model.dir,
                                    "'s tokenizer_config.json has none: give the prompt as text or ids")
                          : str_cat("chat messages: ", model.chat_template_error));
  AERIE_CAPI_REQUIRE(messages, "messages");
  if (n == 0) throw Error("messages: the list is empty");
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (size_t i = 0; i < n; ++i) {
    if (!messages[i].role || !messages[i].content)
      throw Error(str_cat("messages[", i, "].", messages[i].role ? "content" : "role", " is NULL"));
    list.push_back({{"role", messages[i].role}, {"content", messages[i].content}});
  }
  ChatOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.bos_token = tokenizer.config().bos_token;
  options.eos_token = tokenizer.config().eos_token;
  try {
    return apply_chat_template(*model.chat_template, list, options);
  } catch (const Error& e) {
    throw Error(str_cat("the chat template could not render the messages: ", e.what()));
  }
}

EngineState::~EngineState() {
  if (loop) {
    loop->cancel_all();
    loop->stop();
  }
}

std::shared_ptr<Slot> EngineState::find(uint64_t id) {
  std::lock_guard<std::mutex> lock(slots_mutex);
  const auto it = slots.find(id);
  if (it == slots.end())
    throw StatusError(AERIE_ERROR_NOT_FOUND,
                      str_cat("request ", id, " is not in this engine (never submitted, or released)"));
  return it->second;
}

}  // namespace aerie::capi

using namespace aerie;
using namespace aerie::capi;

extern "C" {

const char* aerie_status_name(aerie_status status) {
  switch (status) {
    case AERIE_OK: return "ok";
    case AERIE_ERROR_INVALID_ARGUMENT: return "invalid_argument";
    case AERIE_ERROR_LOAD: return "load";
    case AERIE_ERROR_UNSUPPORTED: return "unsupported";
    case AERIE_ERROR_BUFFER_TOO_SMALL: return "buffer_too_small";
    case AERIE_ERROR_NOT_FOUND: return "not_found";
    case AERIE_ERROR_TIMEOUT: return "timeout";
    case AERIE_ERROR_OVERLOADED: return "overloaded";
    case AERIE_ERROR_ENGINE_FAILED: return "engine_failed";
    case AERIE_ERROR_OUT_OF_MEMORY: return "out_of_memory";
    case AERIE_ERROR_INTERNAL: return "internal";
  }
  return "unknown";
}

const char* aerie_last_error(void) { return last_error.c_str(); }

void aerie_model_options_init(aerie_model_options* options) {
  if (!options) return;
  *options = aerie_model_options{};
  options->size = sizeof(aerie_model_options);
  options->weights = AERIE_WEIGHTS_AS_STORED;
}

aerie_status aerie_model_load(const char* dir, const aerie_model_options* options, aerie_model** out) {
  return guarded(AERIE_ERROR_LOAD, [&] {
    AERIE_CAPI_REQUIRE(out, "out");
    *out = nullptr;
    AERIE_CAPI_REQUIRE(dir, "dir");
    aerie_model_options defaults;
    aerie_model_options_init(&defaults);
    if (options) check_struct_size(options->size, kModelOptionsV1, sizeof(aerie_model_options), "aerie_model_options");
    auto model = std::make_unique<aerie_model>();
    model->state = load(dir, options ? *options : defaults);
    *out = model.release();
  });
}

void aerie_model_free(aerie_model* model) { delete model; }

int64_t aerie_model_n_vocab(const aerie_model* model) { return model ? model->state->model->n_vocab() : -1; }
bool aerie_model_has_tokenizer(const aerie_model* model) { return model && model->state->tokenizer; }
bool aerie_model_has_chat_template(const aerie_model* model) {
  return model && model->state->chat_template.has_value();
}

aerie_status aerie_tokenize(const aerie_model* model, const char* text, size_t text_length, bool add_special,
                            int32_t* ids, size_t capacity, size_t* length) {
  return guarded(AERIE_ERROR_INVALID_ARGUMENT, [&] {
    AERIE_CAPI_REQUIRE(length, "length");
    *length = 0;
    const Tokenizer& tokenizer = model_of(model).need_tokenizer("aerie_tokenize");
    if (text_length > 0) AERIE_CAPI_REQUIRE(text, "text");
    const std::vector<int32_t> out = tokenizer.encode(std::string_view(text ? text : "", text_length), add_special);
    *length = out.size();
    if (capacity < out.size())
      throw StatusError(AERIE_ERROR_BUFFER_TOO_SMALL,
                        str_cat("the text encodes to ", out.size(), " ids, the buffer holds ", capacity));
    if (!out.empty()) std::memcpy(ids, out.data(), out.size() * sizeof(int32_t));
  });
}

aerie_status aerie_detokenize(const aerie_model* model, const int32_t* ids, size_t n_ids, bool skip_special, char* text,
                              size_t capacity, size_t* length) {
  return guarded(AERIE_ERROR_INVALID_ARGUMENT, [&] {
    AERIE_CAPI_REQUIRE(length, "length");
    *length = 0;
    const Tokenizer& tokenizer = model_of(model).need_tokenizer("aerie_detokenize");
    if (n_ids > 0) AERIE_CAPI_REQUIRE(ids, "ids");
    for (size_t i = 0; i < n_ids; ++i)
      if (ids[i] < 0 || ids[i] >= tokenizer.n_vocab())
        throw Error(
            str_cat("ids[", i, "] = ", ids[i], " is outside the tokenizer's vocabulary of ", tokenizer.n_vocab()));
    write_text(tokenizer.decode(std::span<const int32_t>(ids, n_ids), skip_special), text, capacity, length);
  });
}

aerie_status aerie_apply_chat_template(const aerie_model* model, const aerie_chat_message* messages, size_t n_messages,
                                       bool add_generation_prompt, char* text, size_t capacity, size_t* length) {
  return guarded(AERIE_ERROR_INVALID_ARGUMENT, [&] {
    AERIE_CAPI_REQUIRE(length, "length");
    *length = 0;
    write_text(render_messages(model_of(model), messages, n_messages, add_generation_prompt), text, capacity, length);
  });
}

void aerie_engine_options_init_sized(aerie_engine_options* options, size_t size) {
  if (!options || size == 0) return;
  aerie_engine_options o{};
  o.size = size;  // a larger (newer) struct keeps its size: aerie_engine_create refuses it by name
  const EngineConfig defaults;
  o.max_num_seqs = defaults.max_num_seqs;
  o.max_in_flight = 256;
  write_sized(options, o, size);
}

void aerie_engine_options_init(aerie_engine_options* options) {
  aerie_engine_options_init_sized(options, kEngineOptionsV1);  // the symbol version-1 programs call
}

aerie_status aerie_engine_create(aerie_model* model, const aerie_engine_options* options, aerie_engine** out) {
  return guarded(AERIE_ERROR_INVALID_ARGUMENT, [&] {
    AERIE_CAPI_REQUIRE(out, "out");
    *out = nullptr;
    ModelState& m = model_of(model);
    aerie_engine_options o;
    aerie_engine_options_init_sized(&o, sizeof(o));
    if (options) {
      check_struct_size(options->size, kEngineOptionsV1, sizeof(aerie_engine_options), "aerie_engine_options");
      std::memcpy(&o, options, options->size);  // an older struct: the fields it lacks keep their defaults
    }
    if (o.max_num_seqs < 1 || o.max_length < 0 || o.max_in_flight < 1 || o.num_speculative_tokens < 0)
      throw Error(str_cat("aerie_engine_options: max_num_seqs (", o.max_num_seqs, ") and max_in_flight (",
                          o.max_in_flight, ") must be >= 1, max_length (", o.max_length,
                          ") and num_speculative_tokens (", o.num_speculative_tokens, ") >= 0"));
    if (o.max_lora_rank < 0 || o.max_lora_rank > kMaxLoraRankLimit)
      throw Error(str_cat("aerie_engine_options.max_lora_rank is ", o.max_lora_rank, ": outside [1, ",
                          kMaxLoraRankLimit, "] (0: ", kDefaultMaxLoraRank, ")"));
    if (o.n_loras > 0 && (!o.lora_names || !o.lora_paths))
      throw Error(str_cat("aerie_engine_options: n_loras is ", o.n_loras, " and lora_names or lora_paths is NULL"));
    auto state = std::make_unique<EngineState>();
    state->model = model->state;
    std::shared_ptr<const LoraSet> adapters;
    if (o.n_loras > 0) {
      std::vector<std::pair<std::string, std::string>> specs;
      for (size_t i = 0; i < o.n_loras; ++i) {
        if (!o.lora_names[i] || !o.lora_paths[i])
          throw Error(str_cat("aerie_engine_options: lora_names[", i, "] or lora_paths[", i, "] is NULL"));
        specs.emplace_back(o.lora_names[i], o.lora_paths[i]);
      }
      try {
        adapters = load_lora_set(specs, m.model->lora_targets(),
                                 LoraOptions{o.max_lora_rank > 0 ? o.max_lora_rank : kDefaultMaxLoraRank});
      } catch (const Error& e) {
        throw StatusError(AERIE_ERROR_LOAD, str_cat("aerie_engine_options.lora_paths: ", e.what()));
      }
    }
    if (o.draft && *o.draft) {
      DraftLoadOptions draft;
      draft.target_dir = m.dir;  // a whole draft model's tokenizer is compared with the target's
      try {
        state->draft = load_any_drafter(o.draft, *m.model, *m.pool, draft);
      } catch (const Error& e) {
        throw StatusError(AERIE_ERROR_LOAD, str_cat("aerie_engine_options.draft: ", e.what()));
      }
    }
    EngineConfig config;
    config.max_num_seqs = o.max_num_seqs;
    config.max_length = o.max_length;
    config.kv_cache_memory = o.kv_cache_bytes;
    if (o.num_speculative_tokens > 0) config.spec.num_speculative_tokens = o.num_speculative_tokens;
    config.adapters = state->adapters = adapters;
    try {
      state->engine = std::make_unique<Engine>(*m.model, state->draft.get(), config, *m.pool);
    } catch (const std::bad_alloc&) {
      throw StatusError(AERIE_ERROR_OUT_OF_MEMORY,
                        str_cat("cannot allocate the KV cache (aerie_engine_options.kv_cache_bytes ", o.kv_cache_bytes,
                                ", 0: sized by max_num_seqs x max_length)"));
    }
    state->loop = std::make_unique<EngineLoop>(*state->engine, o.max_in_flight);
    *out = new aerie_engine{std::move(state)};
  });
}

void aerie_engine_free(aerie_engine* engine) { delete engine; }

}  // extern "C"
