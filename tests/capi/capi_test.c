/* The C API from C (C11): generation against the `aerie` command's own output, speculation, seeded
 * sampling, stop strings, a JSON-schema constraint, cancellation, log-probabilities, text functions, and the
 * refusals.
 * Usage: capi_c_test AERIE_BINARY MODELS_DIR CHAT_TOKENIZER_DIR BROKEN_MODEL_DIR TEST_DATA_DIR
 * (tests/capi/CMakeLists.txt). */
#define _POSIX_C_SOURCE 200809L /* popen: strict C11 declares only ISO C */
#include <stddef.h>
#include <stdint.h>

#include "capi_test_util.h"

static const char* g_aerie;  /* the aerie command */
static char g_model[4096];   /* models/aerie-tiny-llama */
static char g_head[4096];    /* its EAGLE-3 head */
static const char* kPrompt = "Once upon a time";
static collected g_a, g_b;   /* large: not on the stack */

static aerie_model* load_model(void) {
  aerie_model_options options;
  aerie_model_options_init(&options);
  options.n_threads = 2;
  aerie_model* model = NULL;
  REQUIRE_OK(aerie_model_load(g_model, &options, &model));
  return model;
}

static uint64_t submit_text(aerie_engine* engine, const aerie_request* request) {
  uint64_t id = 0;
  REQUIRE_OK(aerie_request_submit(engine, request, &id));
  CHECK(id != 0);
  return id;
}

/* Greedy through the C API equals `aerie generate --temperature 0`, and its streamed text is the ids'
 * text; a draft head changes nothing; a seeded sample equals the command's with the same seed. */
static void test_generation(aerie_model* model) {
  static int32_t want[kMaxIds];
  char command[16384];
  snprintf(command, sizeof(command),
           "%s generate --model %s --draft none --prompt '%s' --max-tokens 24 --temperature 0 --json --quiet",
           g_aerie, g_model, kPrompt);
  const int n_want = reference_ids(command, want);
  CHECK(n_want > 0);

  aerie_engine* engine = NULL;
  REQUIRE_OK(aerie_engine_create(model, NULL, &engine));
  aerie_request request;
  aerie_request_init(&request);
  request.prompt_text = kPrompt;
  request.max_tokens = 24;
  collect(engine, submit_text(engine, &request), &g_a);
  CHECK(same_ids(g_a.ids, g_a.n_ids, want, (size_t)n_want));
  CHECK(g_a.last.finished);
  CHECK(g_a.last.finish_reason == (g_a.n_ids == 24 ? AERIE_FINISH_LENGTH : AERIE_FINISH_STOP));
  CHECK(g_a.last.generated_tokens == (int64_t)g_a.n_ids);
  CHECK(g_a.last.prompt_tokens > 0);
  static char text[1 << 16];
  size_t length = 0;
  REQUIRE_OK(aerie_detokenize(model, g_a.ids, g_a.n_ids, true, text, sizeof(text), &length));
  CHECK(length == g_a.text_length && strcmp(text, g_a.text) == 0);

  /* The same prompt as ids, through the tokenizer: the same output. */
  int32_t prompt[64];
  size_t n_prompt = 0;
  REQUIRE_OK(aerie_tokenize(model, kPrompt, strlen(kPrompt), true, prompt, 64, &n_prompt));
  CHECK(n_prompt == (size_t)g_a.last.prompt_tokens);
  aerie_request by_ids;
  aerie_request_init(&by_ids);
  by_ids.prompt_ids = prompt;
  by_ids.n_prompt_ids = n_prompt;
  by_ids.max_tokens = 24;
  collect(engine, submit_text(engine, &by_ids), &g_b);
  CHECK(same_ids(g_a.ids, g_a.n_ids, g_b.ids, g_b.n_ids));

  /* Seeded sampling: the command's tokens for the same seed, and the same again. */
  snprintf(command, sizeof(command),
           "%s generate --model %s --draft none --prompt '%s' --max-tokens 24 --temperature 0.9 --top-p 1 "
           "--top-k 0 --min-p 0 --seed 1234 --json --quiet",
           g_aerie, g_model, kPrompt);
  const int n_sampled = reference_ids(command, want);
  CHECK(n_sampled > 0);
  request.temperature = 0.9f;
  request.seed = 1234;
  collect(engine, submit_text(engine, &request), &g_b);
  CHECK(same_ids(g_b.ids, g_b.n_ids, want, (size_t)n_sampled));
  CHECK(!same_ids(g_b.ids, g_b.n_ids, g_a.ids, g_a.n_ids));  /* it did sample */
  aerie_engine_free(engine);

  /* Speculative decoding with the EAGLE-3 head: greedy output is the target's, drafts were accepted. */
  aerie_engine_options options;
  aerie_engine_options_init(&options);
  options.draft = g_head;
  options.num_speculative_tokens = 2;
  REQUIRE_OK(aerie_engine_create(model, &options, &engine));
  aerie_request_init(&request);
  request.prompt_text = kPrompt;
  request.max_tokens = 24;
  collect(engine, submit_text(engine, &request), &g_b);
  CHECK(same_ids(g_a.ids, g_a.n_ids, g_b.ids, g_b.n_ids));
  CHECK(g_b.last.draft_tokens > 0 && g_b.last.accepted_tokens > 0 && g_b.last.spec_rounds > 0);
  CHECK(g_b.last.accepted_tokens <= g_b.last.draft_tokens);
  aerie_engine_free(engine);
}

/* A stop string cuts the text before it (finish "stop"); a JSON schema holds the output to it. */
static void test_stop_and_schema(aerie_model* model, aerie_engine* engine) {
  aerie_request request;
  aerie_request_init(&request);
  request.prompt_text = kPrompt;
  request.max_tokens = 24;
  collect(engine, submit_text(engine, &request), &g_a);
  CHECK(g_a.text_length > 8);
  /* Stop at three bytes taken from the middle of the greedy text. */
  char stop[4];
  memcpy(stop, g_a.text + g_a.text_length / 2, 3);
  stop[3] = '\0';
  const char* stops[2] = {"a string that never occurs", stop};
  request.stop = stops;
  request.n_stop = 2;
  collect(engine, submit_text(engine, &request), &g_b);
  const size_t cut = (size_t)(strstr(g_a.text, stop) - g_a.text);
  CHECK(g_b.text_length == cut && strncmp(g_b.text, g_a.text, cut) == 0);
  CHECK(g_b.last.finish_reason == AERIE_FINISH_STOP);

  aerie_request_init(&request);
  request.prompt_text = "The answer in JSON:";
  request.max_tokens = 48;
  request.json_schema = "{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"boolean\"}},"
                        " \"required\": [\"n\"], \"additionalProperties\": false}";
  collect(engine, submit_text(engine, &request), &g_b);
  /* The only documents the schema allows (compact), then the end of sequence. */
  CHECK(strcmp(g_b.text, "{\"n\":true}") == 0 || strcmp(g_b.text, "{\"n\":false}") == 0);
  CHECK(g_b.last.finish_reason == AERIE_FINISH_STOP);
  (void)model;
}

/* Cancel: a long request ends with "cancelled" soon after; releasing a running request cancels it too. */
static void test_cancel(aerie_engine* engine) {
  aerie_request request;
  aerie_request_init(&request);
  request.prompt_text = kPrompt;
  request.max_tokens = 100000;
  request.ignore_eos = true;
  const uint64_t id = submit_text(engine, &request);
  aerie_event e;
  REQUIRE_OK(aerie_request_next_event(engine, id, -1, &e));
  REQUIRE_OK(aerie_request_cancel(engine, id));
  int64_t generated = 0;
  while (!e.finished) {
    REQUIRE_OK(aerie_request_next_event(engine, id, -1, &e));
    generated = e.generated_tokens;
  }
  CHECK(e.finish_reason == AERIE_FINISH_CANCELLED);
  CHECK(generated < 100000);
  CHECK_FAILS(aerie_request_next_event(engine, id, 0, &e), AERIE_ERROR_NOT_FOUND, "has finished");
  REQUIRE_OK(aerie_request_cancel(engine, id)); /* after the end: harmless */
  REQUIRE_OK(aerie_request_release(engine, id));
  CHECK_FAILS(aerie_request_release(engine, id), AERIE_ERROR_NOT_FOUND, "not in this engine");
  CHECK_FAILS(aerie_request_cancel(engine, 999999), AERIE_ERROR_NOT_FOUND, "request 999999");

  const uint64_t running = submit_text(engine, &request);
  REQUIRE_OK(aerie_request_release(engine, running)); /* cancelled and freed: the engine goes on */
}

/* Log-probabilities (version 2): one entry per token, greedy picks the most likely, the top list is sorted
 * and they do not change the output. A version-1 request (its smaller size) gets no log-probabilities and
 * its event is not written past the version-1 fields. */
static void test_logprobs(aerie_model* model, aerie_engine* engine) {
  aerie_request request;
  aerie_request_init(&request);
  CHECK(request.logprobs == -1);
  request.prompt_text = kPrompt;
  request.max_tokens = 16;
  collect(engine, submit_text(engine, &request), &g_a);
  request.logprobs = 3;
  const uint64_t id = submit_text(engine, &request);
  size_t n = 0;
  aerie_event e;
  memset(&e, 0, sizeof(e));
  while (!e.finished) {
    REQUIRE_OK(aerie_request_next_event(engine, id, -1, &e));
    CHECK(e.n_tokens == 0 || (e.logprobs != NULL && e.n_top_logprobs == 3));
    for (size_t i = 0; i < e.n_tokens; ++i, ++n) {
      const int32_t* top = e.top_logprob_ids + i * e.n_top_logprobs;
      const float* top_lp = e.top_logprobs + i * e.n_top_logprobs;
      CHECK(n < g_a.n_ids && e.tokens[i] == g_a.ids[n]);
      CHECK(top[0] == e.tokens[i] && top_lp[0] == e.logprobs[i]); /* greedy: the most likely */
      CHECK(e.logprobs[i] <= 0.0f && top_lp[1] <= top_lp[0] && top_lp[2] <= top_lp[1]);
      CHECK(top[0] != top[1] && top[1] != top[2] && top[0] != top[2]);
    }
  }
  CHECK(n == g_a.n_ids);
  REQUIRE_OK(aerie_request_release(engine, id));

  aerie_request_init(&request);
  request.prompt_text = kPrompt;
  request.max_tokens = 4;
  request.size = offsetof(aerie_request, logprobs);
  const uint64_t old = submit_text(engine, &request);
  memset(&e, 0xAB, sizeof(e));
  REQUIRE_OK(aerie_request_next_event(engine, old, -1, &e));
  const unsigned char* tail = (const unsigned char*)&e + offsetof(aerie_event, logprobs);
  int untouched = 1;
  for (size_t i = 0; i < sizeof(e) - offsetof(aerie_event, logprobs); ++i) untouched &= tail[i] == 0xAB;
  CHECK(untouched);
  REQUIRE_OK(aerie_request_release(engine, old));

  uint64_t refused = 0;
  aerie_request_init(&request);
  request.prompt_text = kPrompt;
  request.logprobs = -2;
  CHECK_FAILS(aerie_request_submit(engine, &request, &refused), AERIE_ERROR_INVALID_ARGUMENT, "aerie_request.logprobs");
  request.logprobs = aerie_model_n_vocab(model) + 1;
  CHECK_FAILS(aerie_request_submit(engine, &request, &refused), AERIE_ERROR_INVALID_ARGUMENT, "vocabulary size");
}

/* Every refusal names what it refuses. */
static void test_errors(aerie_model* model, aerie_engine* engine, const char* broken_dir) {
  aerie_model* none = (aerie_model*)1;
  CHECK_FAILS(aerie_model_load("/nonexistent/model", NULL, &none), AERIE_ERROR_LOAD, "/nonexistent/model");
  CHECK(none == NULL);
  CHECK_FAILS(aerie_model_load(broken_dir, NULL, &none), AERIE_ERROR_LOAD, "config.json");
  CHECK_FAILS(aerie_model_load(NULL, NULL, &none), AERIE_ERROR_INVALID_ARGUMENT, "dir is NULL");
  CHECK_FAILS(aerie_model_load(g_model, NULL, NULL), AERIE_ERROR_INVALID_ARGUMENT, "out is NULL");
  aerie_model_options mo;
  aerie_model_options_init(&mo);
  mo.size = sizeof(mo) + 8;
  CHECK_FAILS(aerie_model_load(g_model, &mo, &none), AERIE_ERROR_INVALID_ARGUMENT, "newer aerie.h");
  aerie_model_options_init(&mo);
  mo.n_threads = -2;
  CHECK_FAILS(aerie_model_load(g_model, &mo, &none), AERIE_ERROR_INVALID_ARGUMENT, "n_threads");
  aerie_model_options_init(&mo);
  mo.tokenizer_dir = "/nonexistent/tokenizer";
  CHECK_FAILS(aerie_model_load(g_model, &mo, &none), AERIE_ERROR_LOAD, "tokenizer_dir");

  aerie_engine* e2 = NULL;
  CHECK_FAILS(aerie_engine_create(NULL, NULL, &e2), AERIE_ERROR_INVALID_ARGUMENT, "model is NULL");
  aerie_engine_options eo;
  aerie_engine_options_init(&eo);
  eo.draft = "/nonexistent/head";
  CHECK_FAILS(aerie_engine_create(model, &eo, &e2), AERIE_ERROR_LOAD, "aerie_engine_options.draft");
  aerie_engine_options_init(&eo);
  eo.max_num_seqs = 0;
  CHECK_FAILS(aerie_engine_create(model, &eo, &e2), AERIE_ERROR_INVALID_ARGUMENT, "max_num_seqs");
  CHECK(e2 == NULL);

  uint64_t id = 0;
  aerie_request r;
  aerie_request_init(&r);
  CHECK_FAILS(aerie_request_submit(engine, &r, &id), AERIE_ERROR_INVALID_ARGUMENT, "exactly one prompt");
  CHECK_FAILS(aerie_request_submit(engine, NULL, &id), AERIE_ERROR_INVALID_ARGUMENT, "request is NULL");
  CHECK_FAILS(aerie_request_submit(NULL, &r, &id), AERIE_ERROR_INVALID_ARGUMENT, "engine is NULL");
  r.prompt_text = kPrompt;
  r.temperature = -1.0f;
  CHECK_FAILS(aerie_request_submit(engine, &r, &id), AERIE_ERROR_INVALID_ARGUMENT, "temperature");
  r.temperature = 1.0f;
  r.top_p = 1.5f;
  CHECK_FAILS(aerie_request_submit(engine, &r, &id), AERIE_ERROR_INVALID_ARGUMENT, "top_p");
  aerie_request_init(&r);
  r.prompt_text = kPrompt;
  r.max_tokens = -3;
  CHECK_FAILS(aerie_request_submit(engine, &r, &id), AERIE_ERROR_INVALID_ARGUMENT, "max_tokens");
  aerie_request_init(&r);
  const int32_t bad_ids[2] = {1, 1 << 30};
  r.prompt_ids = bad_ids;
  r.n_prompt_ids = 2;
  CHECK_FAILS(aerie_request_submit(engine, &r, &id), AERIE_ERROR_INVALID_ARGUMENT, "outside the vocabulary");
  r.prompt_text = kPrompt;
  CHECK_FAILS(aerie_request_submit(engine, &r, &id), AERIE_ERROR_INVALID_ARGUMENT, "2 given");
  aerie_request_init(&r);
  r.prompt_text = kPrompt;
  r.json_schema = "{\"type\": \"object\", \"properties\": ";
  CHECK_FAILS(aerie_request_submit(engine, &r, &id), AERIE_ERROR_INVALID_ARGUMENT, "aerie_request.json_schema");
  aerie_request_init(&r);
  r.prompt_text = kPrompt;
  r.size = 8;
  CHECK_FAILS(aerie_request_submit(engine, &r, &id), AERIE_ERROR_INVALID_ARGUMENT, "aerie_request_init");
  aerie_request_init(&r);
  aerie_chat_message hello = {"user", "Hello!"};
  r.messages = &hello;
  r.n_messages = 1;
  CHECK_FAILS(aerie_request_submit(engine, &r, &id), AERIE_ERROR_UNSUPPORTED, "chat template");
  CHECK(id == 0);

  char small[4];
  size_t length = 0;
  CHECK_FAILS(aerie_apply_chat_template(model, &hello, 1, true, small, sizeof(small), &length),
              AERIE_ERROR_UNSUPPORTED, "has none");
  int32_t ids[2];
  CHECK_FAILS(aerie_tokenize(model, kPrompt, strlen(kPrompt), true, ids, 2, &length), AERIE_ERROR_BUFFER_TOO_SMALL,
              "encodes to");
  CHECK(length > 2);
  CHECK_FAILS(aerie_tokenize(model, kPrompt, 4, true, ids, 2, NULL), AERIE_ERROR_INVALID_ARGUMENT, "length is NULL");
  int32_t some[64];
  size_t n_some = 0;
  REQUIRE_OK(aerie_tokenize(model, kPrompt, strlen(kPrompt), false, some, 64, &n_some));
  CHECK_FAILS(aerie_detokenize(model, some, n_some, false, small, sizeof(small), &length), AERIE_ERROR_BUFFER_TOO_SMALL,
              "the buffer needs");
  CHECK(length == strlen(kPrompt)); /* the whole length, to call again with */
  const int32_t outside[1] = {-5};
  CHECK_FAILS(aerie_detokenize(model, outside, 1, false, small, sizeof(small), &length), AERIE_ERROR_INVALID_ARGUMENT,
              "outside");
  aerie_event ev;
  CHECK_FAILS(aerie_request_next_event(engine, 424242, 0, &ev), AERIE_ERROR_NOT_FOUND, "424242");
  CHECK(strcmp(aerie_status_name(AERIE_ERROR_TIMEOUT), "timeout") == 0);
  CHECK(aerie_model_n_vocab(NULL) == -1);
}

int main(int argc, char** argv) {
  if (argc != 6) { /* TEST_DATA_DIR: the C++ program's (LoRA goldens) */
    fprintf(stderr, "usage: %s AERIE_BINARY MODELS_DIR CHAT_TOKENIZER_DIR BROKEN_MODEL_DIR TEST_DATA_DIR\n", argv[0]);
    return 2;
  }
  g_aerie = argv[1];
  snprintf(g_model, sizeof(g_model), "%s/aerie-tiny-llama", argv[2]);
  snprintf(g_head, sizeof(g_head), "%s/aerie-tiny-llama-eagle3", argv[2]);
  aerie_model* model = load_model();
  CHECK(aerie_model_has_tokenizer(model));
  CHECK(!aerie_model_has_chat_template(model));
  test_generation(model);
  aerie_engine* engine = NULL;
  REQUIRE_OK(aerie_engine_create(model, NULL, &engine));
  test_stop_and_schema(model, engine);
  test_cancel(engine);
  test_logprobs(model, engine);
  test_errors(model, engine, argv[4]);
  aerie_engine_free(engine);
  aerie_model_free(model);
  aerie_model_free(NULL);
  aerie_engine_free(NULL);
  if (g_failures) fprintf(stderr, "%d checks failed\n", g_failures);
  else printf("capi C test: all checks passed\n");
  return g_failures ? 1 : 0;
}
