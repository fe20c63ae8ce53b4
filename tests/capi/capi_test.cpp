// The C API from C++ (the same header, no C++ wrapper): the chat template against Hugging Face's renders,
// chat requests against the `aerie` command, events streamed to a callback, several threads at once,
// admission limits, and handles freed in either order while requests run.
// Usage: capi_cpp_test AERIE_BINARY MODELS_DIR CHAT_TOKENIZER_DIR BROKEN_MODEL_DIR.
#include <atomic>
#include <condition_variable>
#include <fstream>
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s AERIE_BINARY MODELS_DIR CHAT_TOKENIZER_DIR BROKEN_MODEL_DIR\n", argv[0]);
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
  if (g_failures) fprintf(stderr, "%d checks failed\n", g_failures);
  else printf("capi C++ test: all checks passed\n");
  return g_failures ? 1 : 0;
}
