// The C API from C++ (the same header, no C++ wrapper): the chat template against Hugging Face's renders,
// chat requests against the `aerie` command, events streamed to a callback, several threads at once,
// admission limits, handles freed in either order while requests run, penalties and logit bias, and LoRA
// adapters against the float64 reference. Usage: capi_cpp_test AERIE_BINARY MODELS_DIR CHAT_TOKENIZER_DIR BROKEN_MODEL_DIR TEST_DATA_DIR.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "capi_test_util.h"

namespace {

std::string g_aerie, g_model, g_chat_tokenizer;

aerie_model* load(const char* tokenizer_dir) {
  aerie_model_options options;
  aerie_model_options_init(&options);
  options.n_threads = 2;
  options.tokenizer_dir = tokenizer_dir;
  aerie_model* model = nullptr;
  REQUIRE_OK(aerie_model_load(g_model.c_str(), &options, &model));
  return model;
}

std::string render(aerie_model* model, const std::vector<aerie_chat_message>& messages, bool generation_prompt) {
  size_t length = 0;
  // Asks for the length first (NULL buffer), then renders into a buffer of exactly that size.
  const aerie_status s = aerie_apply_chat_template(model, messages.data(), messages.size(), generation_prompt,
                                                   nullptr, 0, &length);
  CHECK(s == AERIE_ERROR_BUFFER_TOO_SMALL && length > 0);
  std::string text(length + 1, '\0');
  REQUIRE_OK(aerie_apply_chat_template(model, messages.data(), messages.size(), generation_prompt, text.data(),
                                       text.size(), &length));
  text.resize(length);
  return text;
}

// tests/data/chat_template/expected.json: Hugging Face's apply_chat_template with the Llama 3 Instruct
// template (cases "single_user" and "system_multi_turn").
void test_chat_template(aerie_model* model) {
  CHECK(aerie_model_has_chat_template(model));
  const std::vector<aerie_chat_message> single = {{"user", "Hello!"}};
  CHECK(render(model, single, false) ==
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>");
  CHECK(render(model, single, true) ==
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>assistant"
        "<|end_header_id|>\n\n");
  const std::vector<aerie_chat_message> multi = {{"system", "  You are a helpful assistant.\nAnswer briefly.  "},
                                                 {"user", "What is 2+2?"},
                                                 {"assistant", "4"},
                                                 {"user", "And 3+3?\n"}};
  CHECK(render(model, multi, true) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.\nAnswer "
        "briefly.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|><|start_header_id|>"
        "assistant<|end_header_id|>\n\n4<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnd 3+3?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
  const aerie_chat_message no_role = {nullptr, "x"};
  size_t length = 0;
  CHECK_FAILS(aerie_apply_chat_template(model, &no_role, 1, true, nullptr, 0, &length), AERIE_ERROR_INVALID_ARGUMENT,
              "messages[0].role is NULL");
  CHECK_FAILS(aerie_apply_chat_template(model, nullptr, 0, true, nullptr, 0, &length), AERIE_ERROR_INVALID_ARGUMENT,
              "messages is NULL");
}

// A chat request: the rendered prompt, encoded without added specials, and greedy output equal to `aerie
// generate --messages` with the same tokenizer folder.
void test_chat_request(aerie_model* model) {
  const std::vector<aerie_chat_message> messages = {{"system", "Answer briefly."}, {"user", "Tell me a story."}};
  const std::string rendered = render(model, messages, true);
  std::vector<int32_t> prompt(4096);
  size_t n_prompt = 0;
  REQUIRE_OK(aerie_tokenize(model, rendered.data(), rendered.size(), false, prompt.data(), prompt.size(), &n_prompt));

  const std::string file = g_chat_tokenizer + "/../chat_messages.json";
  std::ofstream(file) << R"([{"role": "system", "content": "Answer briefly."},)"
                      << R"( {"role": "user", "content": "Tell me a story."}])";
  static int32_t want[kMaxIds];
  const std::string command = g_aerie + " generate --model " + g_model + " --tokenizer " + g_chat_tokenizer +
                              " --draft none --messages " + file + " --max-tokens 16 --temperature 0 --json --quiet";
  const int n_want = reference_ids(command.c_str(), want);
  CHECK(n_want > 0);

  aerie_engine* engine = nullptr;
  REQUIRE_OK(aerie_engine_create(model, nullptr, &engine));
  aerie_request request;
  aerie_request_init(&request);
  request.messages = messages.data();
  request.n_messages = messages.size();
  request.max_tokens = 16;
  uint64_t id = 0;
  REQUIRE_OK(aerie_request_submit(engine, &request, &id));
  static collected got;
  collect(engine, id, &got);
  CHECK(got.last.prompt_tokens == int64_t(n_prompt));
  CHECK(same_ids(got.ids, got.n_ids, want, size_t(n_want)));
  aerie_engine_free(engine);
}

// Events to a callback on the loop thread: the same ids as pulled; pulling such a request is refused.
struct Streamed {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<int32_t> ids;
  std::string text;
  bool finished = false;
  aerie_finish_reason reason = AERIE_FINISH_NONE;
};

void on_event(void* user, const aerie_event* e) {
  auto* s = static_cast<Streamed*>(user);
  std::lock_guard<std::mutex> lock(s->mutex);
  s->ids.insert(s->ids.end(), e->tokens, e->tokens + e->n_tokens);
  s->text.append(e->text, e->text_length);
  if (e->finished) {
    s->finished = true;
    s->reason = e->finish_reason;
    s->cv.notify_all();
  }
}

void test_callback_and_threads(aerie_model* model) {
  aerie_engine* engine = nullptr;
  REQUIRE_OK(aerie_engine_create(model, nullptr, &engine));
  aerie_request request;
  aerie_request_init(&request);
  request.prompt_text = "It is a truth universally acknowledged, that";
  request.max_tokens = 20;
  uint64_t id = 0;
  REQUIRE_OK(aerie_request_submit(engine, &request, &id));
  static collected pulled;
  collect(engine, id, &pulled);

  Streamed streamed;
  request.on_event = on_event;
  request.user_data = &streamed;
  REQUIRE_OK(aerie_request_submit(engine, &request, &id));
  aerie_event e;
  CHECK_FAILS(aerie_request_next_event(engine, id, 0, &e), AERIE_ERROR_INVALID_ARGUMENT, "on_event callback");
  {
    std::unique_lock<std::mutex> lock(streamed.mutex);
    streamed.cv.wait(lock, [&] { return streamed.finished; });
  }
  REQUIRE_OK(aerie_request_release(engine, id));
  CHECK(same_ids(streamed.ids.data(), streamed.ids.size(), pulled.ids, pulled.n_ids));
  CHECK(streamed.text == std::string(pulled.text, pulled.text_length));
  CHECK(streamed.reason == pulled.last.finish_reason);

  // Four threads submit and pull at once: each request runs to its own end with its own events.
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      aerie_request r;
      aerie_request_init(&r);
      r.prompt_text = "Once upon a time";
      r.max_tokens = 8 + t;
      r.ignore_eos = true;
      uint64_t rid = 0;
      if (aerie_request_submit(engine, &r, &rid) != AERIE_OK) return;
      int64_t n = 0;
      for (;;) {
        aerie_event ev;
        if (aerie_request_next_event(engine, rid, -1, &ev) != AERIE_OK || ev.request_id != rid) return;
        n += int64_t(ev.n_tokens);
        if (ev.finished) {
          if (ev.finish_reason == AERIE_FINISH_LENGTH && n == 8 + t) ++ok;
          break;
        }
      }
      aerie_request_release(engine, rid);
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(ok.load() == 4);
  aerie_engine_free(engine);
}

// max_in_flight bounds admission (refused by name, not queued); freeing the model, then the engine with a
// request still running, is safe.
void test_limits_and_lifetimes() {
  aerie_model* model = load(nullptr);
  aerie_engine_options options;
  aerie_engine_options_init(&options);
  options.max_in_flight = 1;
  aerie_engine* engine = nullptr;
  REQUIRE_OK(aerie_engine_create(model, &options, &engine));
  aerie_model_free(model);  // the engine keeps what it needs
  aerie_request request;
  aerie_request_init(&request);
  request.prompt_text = "Once upon a time";
  request.max_tokens = 100000;
  request.ignore_eos = true;
  uint64_t first = 0, second = 0;
  REQUIRE_OK(aerie_request_submit(engine, &request, &first));
  CHECK_FAILS(aerie_request_submit(engine, &request, &second), AERIE_ERROR_OVERLOADED, "overloaded");
  aerie_event e;
  REQUIRE_OK(aerie_request_next_event(engine, first, -1, &e));
  CHECK(e.request_id == first);
  aerie_engine_free(engine);  // cancels the running request
}

// Struct versions: the init functions never write past the caller's size. Through the header's macros the
// caller's sizeof goes along; the bare symbols (what a program built against version 1 calls) write version
// 1's fields only; a newer program's larger struct gets its unknown tail zeroed, and is refused by name.
void test_struct_versions(aerie_model* model) {
  struct {
    aerie_request request;
    unsigned char canary[32];
  } big;
  std::memset(&big, 0xAB, sizeof(big));
  (aerie_request_init)(&big.request);  // the function, not the macro
  const size_t v1 = offsetof(aerie_request, logprobs);
  CHECK(big.request.size == v1 && big.request.max_tokens == 128);
  const auto* bytes = reinterpret_cast<const unsigned char*>(&big);
  CHECK(std::all_of(bytes + v1, bytes + sizeof(big), [](unsigned char b) { return b == 0xAB; }));
  aerie_request_init_sized(&big.request, sizeof(big));  // a newer header's struct, 32 bytes longer
  CHECK(big.request.size == sizeof(big) && big.request.logprobs == -1 && big.request.repetition_penalty == 1.0f);
  CHECK(std::all_of(big.canary, big.canary + sizeof(big.canary), [](unsigned char b) { return b == 0; }));

  struct {
    aerie_engine_options options;
    unsigned char canary[32];
  } engine_options;
  std::memset(&engine_options, 0xAB, sizeof(engine_options));
  (aerie_engine_options_init)(&engine_options.options);
  const size_t options_v1 = offsetof(aerie_engine_options, lora_names);
  CHECK(engine_options.options.size == options_v1 && engine_options.options.max_in_flight == 256);
  bytes = reinterpret_cast<const unsigned char*>(&engine_options);
  CHECK(std::all_of(bytes + options_v1, bytes + sizeof(engine_options), [](unsigned char b) { return b == 0xAB; }));
  aerie_engine* engine = nullptr;
  REQUIRE_OK(aerie_engine_create(model, &engine_options.options, &engine));  // a version-1 struct works
  aerie_engine_options_init_sized(&engine_options.options, sizeof(engine_options));
  aerie_engine* refused = nullptr;
  CHECK_FAILS(aerie_engine_create(model, &engine_options.options, &refused), AERIE_ERROR_INVALID_ARGUMENT,
              "a newer aerie.h than this library");
  CHECK(refused == nullptr);
  big.request.prompt_text = "Once upon a time";
  uint64_t id = 0;
  CHECK_FAILS(aerie_request_submit(engine, &big.request, &id), AERIE_ERROR_INVALID_ARGUMENT,
              "a newer aerie.h than this library");
  aerie_engine_free(engine);
}

// Prompt log-probabilities (version 3): one entry per prompt token after the first, across the prefill's
// events, each consistent with its own top list; max_tokens 0 scores the prompt and ends; a version-2
// request's event is not written past its log-probability fields. (Their values against the model's logits:
// python/tests/test_logprobs.py.)
void test_prompt_logprobs(aerie_model* model) {
  aerie_engine* engine = nullptr;
  REQUIRE_OK(aerie_engine_create(model, nullptr, &engine));
  aerie_request request;
  aerie_request_init(&request);
  CHECK(request.prompt_logprobs == -1);
  request.prompt_text = "It is a truth universally acknowledged, that a single man in possession";
  request.max_tokens = 0;
  request.prompt_logprobs = 3;
  uint64_t id = 0;
  REQUIRE_OK(aerie_request_submit(engine, &request, &id));
  std::vector<int32_t> tokens;
  int64_t prompt_tokens = 0;
  for (bool finished = false; !finished;) {
    aerie_event e;
    REQUIRE_OK(aerie_request_next_event(engine, id, -1, &e));
    finished = e.finished;
    prompt_tokens = e.prompt_tokens;
    CHECK(e.n_tokens == 0 && (e.n_prompt_logprobs == 0 || e.n_prompt_top_logprobs == 3));
    for (size_t i = 0; i < e.n_prompt_logprobs; ++i) {
      tokens.push_back(e.prompt_logprob_tokens[i]);
      const int32_t* top = e.prompt_top_logprob_ids + i * 3;
      const float* top_lp = e.prompt_top_logprobs + i * 3;
      CHECK(e.prompt_logprobs[i] <= 0.0f && top_lp[0] >= top_lp[1] && top_lp[1] >= top_lp[2]);
      const int64_t rank = e.prompt_logprob_ranks[i];
      CHECK(rank >= 1);
      if (rank <= 3) CHECK(top[rank - 1] == e.prompt_logprob_tokens[i] && top_lp[rank - 1] == e.prompt_logprobs[i]);
      else CHECK(e.prompt_logprobs[i] <= top_lp[2]);
    }
    if (finished) CHECK(e.finish_reason == AERIE_FINISH_LENGTH);
  }
  REQUIRE_OK(aerie_request_release(engine, id));
  std::vector<int32_t> prompt(256);
  size_t n_prompt = 0;
  REQUIRE_OK(aerie_tokenize(model, request.prompt_text, std::strlen(request.prompt_text), true, prompt.data(),
                            prompt.size(), &n_prompt));
  CHECK(prompt_tokens == int64_t(n_prompt) &&
        tokens == std::vector<int32_t>(prompt.begin() + 1, prompt.begin() + n_prompt));

  request.size = offsetof(aerie_request, lora_name);  // version 2: no prompt fields in the request or event
  request.max_tokens = 2;
  request.logprobs = 1;
  REQUIRE_OK(aerie_request_submit(engine, &request, &id));
  struct {
    aerie_event event;
  } v3;
  std::memset(&v3, 0xAB, sizeof(v3));
  REQUIRE_OK(aerie_request_next_event(engine, id, -1, &v3.event));
  const auto* bytes = reinterpret_cast<const unsigned char*>(&v3.event);
  CHECK(std::all_of(bytes + offsetof(aerie_event, prompt_logprob_tokens), bytes + sizeof(aerie_event),
                    [](unsigned char b) { return b == 0xAB; }));
  REQUIRE_OK(aerie_request_release(engine, id));
  request.size = sizeof(request);
  request.prompt_logprobs = 1 << 20;
  CHECK_FAILS(aerie_request_submit(engine, &request, &id), AERIE_ERROR_INVALID_ARGUMENT,
              "aerie_request.prompt_logprobs must be -1 (none) or in [0, 6144]");
  aerie_engine_free(engine);
}

// Penalties and logit bias (version 3): penalised greedy output equals `aerie generate`'s with the same
// penalties (and differs from the plain one); a bias of +100 makes its token every output token, -100 keeps
// the plain first token out; out-of-range values are refused by name.
void test_penalties_and_logit_bias(aerie_model* model) {
  const char* prompt = "Once upon a time";
  static int32_t plain[kMaxIds], want[kMaxIds];
  const std::string base = g_aerie + " generate --model " + g_model + " --draft none --prompt '" + prompt +
                           "' --max-tokens 24 --ignore-eos --temperature 0 --json --quiet";
  const int n_plain = reference_ids(base.c_str(), plain);
  const int n_want =
      reference_ids((base + " --repetition-penalty 1.3 --presence-penalty 0.5 --frequency-penalty 0.4").c_str(), want);
  CHECK(n_plain == 24 && n_want == 24 && !same_ids(plain, 24, want, 24));

  aerie_engine* engine = nullptr;
  REQUIRE_OK(aerie_engine_create(model, nullptr, &engine));
  aerie_request request;
  aerie_request_init(&request);
  CHECK(request.repetition_penalty == 1.0f && request.presence_penalty == 0.0f && request.n_logit_bias == 0);
  request.prompt_text = prompt;
  request.max_tokens = 24;
  request.ignore_eos = true;
  request.repetition_penalty = 1.3f;
  request.presence_penalty = 0.5f;
  request.frequency_penalty = 0.4f;
  uint64_t id = 0;
  static collected got;
  REQUIRE_OK(aerie_request_submit(engine, &request, &id));
  collect(engine, id, &got);
  CHECK(same_ids(got.ids, got.n_ids, want, size_t(n_want)));

  request.repetition_penalty = 1.0f;
  request.presence_penalty = request.frequency_penalty = 0.0f;
  const int32_t bias_ids[] = {plain[0], 77};
  const float bias_values[] = {-100.0f, 100.0f};
  request.logit_bias_ids = bias_ids;
  request.logit_bias_values = bias_values;
  request.n_logit_bias = 1;  // the plain first token, -100: another comes first
  request.max_tokens = 4;
  REQUIRE_OK(aerie_request_submit(engine, &request, &id));
  collect(engine, id, &got);
  CHECK(got.n_ids == 4 && got.ids[0] != plain[0]);
  request.n_logit_bias = 2;  // and 77 at +100: every token is 77
  REQUIRE_OK(aerie_request_submit(engine, &request, &id));
  collect(engine, id, &got);
  const int32_t all_77[] = {77, 77, 77, 77};
  CHECK(same_ids(got.ids, got.n_ids, all_77, 4));

  const int32_t twice[] = {5, 5}, outside[] = {1 << 20};
  const float too_much[] = {101.0f, 1.0f};
  request.logit_bias_ids = twice;
  CHECK_FAILS(aerie_request_submit(engine, &request, &id), AERIE_ERROR_INVALID_ARGUMENT, "token 5 is given twice");
  request.logit_bias_values = too_much;
  CHECK_FAILS(aerie_request_submit(engine, &request, &id), AERIE_ERROR_INVALID_ARGUMENT,
              "logit_bias_values[0] = 101 is outside [-100, 100]");
  request.logit_bias_ids = outside;
  request.n_logit_bias = 1;
  CHECK_FAILS(aerie_request_submit(engine, &request, &id), AERIE_ERROR_INVALID_ARGUMENT,
              "logit_bias_ids[0] = 1048576 is outside the vocabulary");
  request.logit_bias_ids = nullptr;
  CHECK_FAILS(aerie_request_submit(engine, &request, &id), AERIE_ERROR_INVALID_ARGUMENT,
              "aerie_request.logit_bias_ids is NULL");
  request.n_logit_bias = 0;
  request.repetition_penalty = 0.0f;
  CHECK_FAILS(aerie_request_submit(engine, &request, &id), AERIE_ERROR_INVALID_ARGUMENT,
              "aerie_request.repetition_penalty must be in (0, 10], got 0");
  request.repetition_penalty = 11.0f;
  CHECK_FAILS(aerie_request_submit(engine, &request, &id), AERIE_ERROR_INVALID_ARGUMENT,
              "aerie_request.repetition_penalty must be in (0, 10], got 11");
  request.repetition_penalty = 1.0f;
  request.presence_penalty = 3.0f;
  CHECK_FAILS(aerie_request_submit(engine, &request, &id), AERIE_ERROR_INVALID_ARGUMENT,
              "aerie_request.presence_penalty must be in [-2, 2], got 3");
  aerie_engine_free(engine);
}

// The first `n` greedy ids of the float64 reference (tests/data/lora/<adapter>/golden.json).
std::vector<int32_t> golden_greedy(const std::string& adapter_dir, size_t n) {
  std::ifstream file(adapter_dir + "/golden.json");
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  int32_t ids[64];
  const int count = json_ints(text.c_str(), "greedy", ids, 64);
  CHECK(count >= int(n));
  return std::vector<int32_t>(ids, ids + std::max(0, std::min(count, int(n))));
}

// Greedy ids of the golden prompt under `lora_name` (NULL: the base model), all requests in flight at once.
std::vector<std::vector<int32_t>> greedy_under(aerie_engine* engine, const std::vector<int32_t>& prompt,
                                               const std::vector<const char*>& lora_names, int64_t max_tokens) {
  std::vector<uint64_t> ids;
  for (const char* name : lora_names) {
    aerie_request request;
    aerie_request_init(&request);
    request.prompt_ids = prompt.data();
    request.n_prompt_ids = prompt.size();
    request.max_tokens = max_tokens;
    request.ignore_eos = true;
    request.lora_name = name;
    REQUIRE_OK(aerie_request_submit(engine, &request, &ids.emplace_back()));
  }
  std::vector<std::vector<int32_t>> out;
  for (uint64_t id : ids) {
    static collected c;
    collect(engine, id, &c);
    out.emplace_back(c.ids, c.ids + c.n_ids);
  }
  return out;
}

// LoRA adapters (API version 3): requests pick one by name, beside the base model in the same batch, and get
// the float64 reference's greedy tokens; bad names, folders and ranks are refused clearly, and a version-2
// struct (no LoRA fields) still works.
void test_lora(const std::string& data_dir) {
  const std::string sql = data_dir + "/lora/bf16_all_modules", other = data_dir + "/lora/f32_rslora_some_modules";
  aerie_model_options model_options;
  aerie_model_options_init(&model_options);
  model_options.n_threads = 2;
  aerie_model* model = nullptr;
  REQUIRE_OK(aerie_model_load((data_dir + "/llama/bf16_gqa_rope_scaled_tied").c_str(), &model_options, &model));
  std::ifstream golden_file(sql + "/golden.json");
  const std::string golden((std::istreambuf_iterator<char>(golden_file)), std::istreambuf_iterator<char>());
  int32_t prompt_ids[64];
  const int n_prompt = json_ints(golden.c_str(), "ids", prompt_ids, 64);
  CHECK(n_prompt > 0);
  const std::vector<int32_t> prompt(prompt_ids, prompt_ids + std::max(n_prompt, 0));

  const char* names[] = {"sql", "other"};
  const char* paths[] = {sql.c_str(), other.c_str()};
  aerie_engine_options options;
  aerie_engine_options_init(&options);
  options.lora_names = names;
  options.lora_paths = paths;
  options.n_loras = 2;
  aerie_engine* engine = nullptr;
  REQUIRE_OK(aerie_engine_create(model, &options, &engine));
  // The reference's first 4 tokens of "sql" have top-1 margins of 0.36 and up (they hold under bf16-rounded
  // activations and cache); of "other" only the first has a margin that wide (0.29; the second's is 0.03).
  const std::vector<std::vector<int32_t>> out = greedy_under(engine, prompt, {"sql", nullptr, "other", ""}, 4);
  CHECK(out[0] == golden_greedy(sql, 4));
  CHECK(out[2].size() == 4 && out[2][0] == golden_greedy(other, 1)[0]);
  CHECK(out[1].size() == 4 && out[1] != out[0] && out[3] == out[1]);  // NULL and "": the base model
  CHECK(greedy_under(engine, prompt, {nullptr}, 4)[0] == out[1]);     // the same alone

  aerie_request request;
  aerie_request_init(&request);
  request.prompt_ids = prompt.data();
  request.n_prompt_ids = prompt.size();
  request.lora_name = "sq";
  uint64_t id = 0;
  CHECK_FAILS(aerie_request_submit(engine, &request, &id), AERIE_ERROR_INVALID_ARGUMENT,
              "no LoRA adapter named 'sq' (it has 'sql', 'other')");
  request.size = offsetof(aerie_request, lora_name);  // a version-2 program: no lora_name field, the base model
  REQUIRE_OK(aerie_request_submit(engine, &request, &id));
  static collected c;
  collect(engine, id, &c);
  CHECK(c.n_ids > 0);
  aerie_engine_free(engine);

  // A version-2 options struct: no adapters; a request naming one is refused.
  aerie_engine_options v2;
  aerie_engine_options_init(&v2);
  v2.size = offsetof(aerie_engine_options, lora_names);
  REQUIRE_OK(aerie_engine_create(model, &v2, &engine));
  request.size = sizeof(request);
  request.lora_name = "sql";
  CHECK_FAILS(aerie_request_submit(engine, &request, &id), AERIE_ERROR_INVALID_ARGUMENT,
              "it loaded none: aerie_engine_options.lora_names");
  aerie_engine_free(engine);

  // Refusals, each naming what is wrong; nothing is created.
  const char* missing[] = {"/nonexistent/adapter"};
  options.lora_paths = missing;
  options.n_loras = 1;
  engine = nullptr;
  CHECK_FAILS(aerie_engine_create(model, &options, &engine), AERIE_ERROR_LOAD, "/nonexistent/adapter");
  CHECK(engine == nullptr);
  const char* twice[] = {"sql", "sql"};
  options.lora_names = twice;
  options.lora_paths = paths;
  options.n_loras = 2;
  CHECK_FAILS(aerie_engine_create(model, &options, &engine), AERIE_ERROR_LOAD, "the name 'sql' is given twice");
  options.lora_names = names;
  options.max_lora_rank = 2;  // "sql" has rank 4
  CHECK_FAILS(aerie_engine_create(model, &options, &engine), AERIE_ERROR_LOAD, "rank r = 4 is outside [1, 2]");
  options.max_lora_rank = 1025;
  CHECK_FAILS(aerie_engine_create(model, &options, &engine), AERIE_ERROR_INVALID_ARGUMENT,
              "max_lora_rank is 1025: outside [1, 1024]");
  options.max_lora_rank = 0;
  options.lora_paths = nullptr;
  CHECK_FAILS(aerie_engine_create(model, &options, &engine), AERIE_ERROR_INVALID_ARGUMENT,
              "n_loras is 2 and lora_names or lora_paths is NULL");
  CHECK(engine == nullptr);
  aerie_model_free(model);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s AERIE_BINARY MODELS_DIR CHAT_TOKENIZER_DIR BROKEN_MODEL_DIR TEST_DATA_DIR\n", argv[0]);
    return 2;
  }
  g_aerie = argv[1];
  g_model = std::string(argv[2]) + "/aerie-tiny-llama";
  g_chat_tokenizer = argv[3];
  aerie_model* chat = load(g_chat_tokenizer.c_str());
  test_chat_template(chat);
  test_chat_request(chat);
  test_callback_and_threads(chat);
  aerie_model_free(chat);
  test_limits_and_lifetimes();
  aerie_model* plain = load(nullptr);
  test_struct_versions(plain);
  test_prompt_logprobs(plain);
  test_penalties_and_logit_bias(plain);
  aerie_model_free(plain);
  test_lora(argv[5]);
  if (g_failures) fprintf(stderr, "%d checks failed\n", g_failures);
  else printf("capi C++ test: all checks passed\n");
  return g_failures ? 1 : 0;
}
