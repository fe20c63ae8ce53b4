/* aerie.h: the C API of aerie (libaerie.so). Reference: docs/c-api.md.
 *
 * Load a model folder (and its tokenizer), create an engine over it (with a draft head or not), submit
 * requests and read their events, token ids and text, until the one marked finished; tokenize, detokenize
 * and apply the chat template. Plain C types and opaque handles; every function that can fail returns an
 * aerie_status, and aerie_last_error() then says why, in words. No C++ exception crosses this boundary.
 *
 * Options structs carry their own size (struct versioning): fill one with its aerie_*_init function, which
 * sets `size` and every default, then change the fields you want. A struct from a newer header (larger
 * size) is refused by name rather than half read.
 *
 * Thread safety is stated per function: "any thread" means concurrent calls on the same handle are safe.
 */
#ifndef AERIE_H
#define AERIE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(AERIE_BUILDING_LIBRARY)
#define AERIE_API __attribute__((visibility("default")))
#else
#define AERIE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* 2: log-probabilities (aerie_request.logprobs, aerie_event.logprobs ...), appended to both structs.
 * 3: LoRA adapters (aerie_engine_options.lora_names ..., aerie_request.lora_name), penalties, logit bias and
 *    prompt log-probabilities (aerie_request.presence_penalty ..., aerie_event.prompt_logprob_tokens ...),
 *    appended to the three structs. */
#define AERIE_API_VERSION 3

typedef enum aerie_status {
  AERIE_OK = 0,
  AERIE_ERROR_INVALID_ARGUMENT = 1, /* a NULL handle or pointer, a value out of range, a bad struct size */
  AERIE_ERROR_LOAD = 2,             /* the model folder, its config, weights or tokenizer, or the draft */
  AERIE_ERROR_UNSUPPORTED = 3,      /* something this model or build cannot do, named in the message */
  AERIE_ERROR_BUFFER_TOO_SMALL = 4, /* the output did not fit: *length says how much is needed */
  AERIE_ERROR_NOT_FOUND = 5,        /* no such request (never submitted, or already released) */
  AERIE_ERROR_TIMEOUT = 6,          /* no event within the timeout */
  AERIE_ERROR_OVERLOADED = 7,       /* the engine holds its maximum of requests in flight: retry later */
  AERIE_ERROR_ENGINE_FAILED = 8,    /* the engine's step failed; the engine can take no more requests */
  AERIE_ERROR_OUT_OF_MEMORY = 9,
  AERIE_ERROR_INTERNAL = 10 /* a bug: please report the message */
} aerie_status;

/* "ok", "invalid_argument", ... (a static string; any thread). */
AERIE_API const char* aerie_status_name(aerie_status status);
/* The message of the last call on this thread that did not return AERIE_OK ("" when none yet). Valid until
 * the next failing call on this thread. Any thread (the message is per thread). */
AERIE_API const char* aerie_last_error(void);

typedef struct aerie_model aerie_model;
typedef struct aerie_engine aerie_engine;

/* ---------------------------------------------------------------------------------------------------- */
/* Models                                                                                               */

typedef enum aerie_weight_format {
  AERIE_WEIGHTS_AS_STORED = 0, /* as the checkpoint stores them */
  AERIE_WEIGHTS_INT8 = 1,      /* float projections quantised to int8 at load */
  AERIE_WEIGHTS_INT4 = 2       /* float projections quantised to int4 at load */
} aerie_weight_format;

typedef struct aerie_model_options {
  size_t size;                 /* sizeof(aerie_model_options) */
  int32_t n_threads;           /* compute threads of this model and its engines; 0: every core */
  aerie_weight_format weights; /* default AERIE_WEIGHTS_AS_STORED */
  const char* tokenizer_dir;   /* NULL: the model folder's own tokenizer (none is fine: ids only) */
} aerie_model_options;

/* Defaults. Any thread. */
AERIE_API void aerie_model_options_init(aerie_model_options* options);
/* Loads the model in `dir` (a Hugging Face folder or a GGUF file) and its tokenizer, when it has one.
 * `options` may be NULL (defaults). On success *out is a new model, to be freed with aerie_model_free.
 * Any thread. */
AERIE_API aerie_status aerie_model_load(const char* dir, const aerie_model_options* options, aerie_model** out);
/* Frees the model. Engines created from it keep what they need until they are freed themselves. NULL is
 * ignored. Not concurrently with other calls on the same model. */
AERIE_API void aerie_model_free(aerie_model* model);
/* Vocabulary size of the model's output layer; -1 for NULL. Any thread. */
AERIE_API int64_t aerie_model_n_vocab(const aerie_model* model);
/* Whether the model has a tokenizer (text prompts, text events, stop strings, JSON schemas) and a chat
 * template (chat messages). Any thread. */
AERIE_API bool aerie_model_has_tokenizer(const aerie_model* model);
AERIE_API bool aerie_model_has_chat_template(const aerie_model* model);

/* ---------------------------------------------------------------------------------------------------- */
/* Text: tokenizer and chat template (any thread; they need the model's tokenizer)                       */

/* Outputs follow one rule: `capacity` is the room at the output pointer, *length (never NULL) receives
 * the full length (ids, or bytes without the terminating NUL). When it does not fit (capacity <= length for
 * text, which is NUL-terminated; capacity < length for ids) nothing is written and the call returns
 * AERIE_ERROR_BUFFER_TOO_SMALL: call again with room for *length (+1 for text). The output may be NULL
 * when capacity is 0, to ask for the length. */

/* Encodes `text` (`text_length` bytes, UTF-8). add_special: the tokenizer's BOS as it configures it. */
AERIE_API aerie_status aerie_tokenize(const aerie_model* model, const char* text, size_t text_length,
                                      bool add_special, int32_t* ids, size_t capacity, size_t* length);
/* Decodes ids into UTF-8 text; skip_special drops special tokens (e.g. <|eot_id|>). */
AERIE_API aerie_status aerie_detokenize(const aerie_model* model, const int32_t* ids, size_t n_ids,
                                        bool skip_special, char* text, size_t capacity, size_t* length);

typedef struct aerie_chat_message {
  const char* role;    /* "system", "user", "assistant", ... */
  const char* content; /* UTF-8, NUL-terminated */
} aerie_chat_message;

/* Renders `messages` with the model's chat template the way Hugging Face's apply_chat_template does (the
 * tokenizer's bos_token and eos_token given to it); add_generation_prompt opens the assistant's turn. */
AERIE_API aerie_status aerie_apply_chat_template(const aerie_model* model, const aerie_chat_message* messages,
                                                 size_t n_messages, bool add_generation_prompt, char* text,
                                                 size_t capacity, size_t* length);

/* ---------------------------------------------------------------------------------------------------- */
/* Engines                                                                                              */

typedef struct aerie_engine_options {
  size_t size;                    /* sizeof(aerie_engine_options) */
  const char* draft;              /* NULL or "": plain decoding; an EAGLE head folder, "mtp" or "ngram" */
  int32_t num_speculative_tokens; /* K, drafts per round; 0: the engine's default (3) */
  int64_t max_num_seqs;           /* sequences decoded together (default 16) */
  int64_t max_length;             /* per sequence, prompt + output; 0: the model's context */
  uint64_t kv_cache_bytes;        /* 0: what max_num_seqs x max_length need, within half of free memory */
  int64_t max_in_flight;          /* requests queued or running at once; beyond: AERIE_ERROR_OVERLOADED */

  /* Since version 3 (read only when `size` covers them). LoRA adapters in PEFT's layout (a folder with
   * adapter_config.json and adapter_model.safetensors), loaded with the engine and served beside the base
   * model: a request picks one by name (aerie_request.lora_name). lora_names[i] (unique, non-empty) names
   * the folder lora_paths[i]; n_loras 0: none. max_lora_rank: the largest rank accepted, in [1, 1024]; 0: 256.
   * A folder that does not load, or does not fit the model, fails with AERIE_ERROR_LOAD naming it. */
  const char* const* lora_names;
  const char* const* lora_paths;
  size_t n_loras;
  int64_t max_lora_rank;
} aerie_engine_options;

/* Defaults. Any thread. Through the macro below, the caller's sizeof(*options) goes along: the library writes
 * the fields it knows within that size and zeroes the rest, so an older program's smaller struct is never
 * written past its end (and a newer program's is refused by aerie_engine_create, by name). The function
 * itself, without a size, is what programs built against version 1 call: it writes version 1's fields. */
AERIE_API void aerie_engine_options_init_sized(aerie_engine_options* options, size_t size);
AERIE_API void aerie_engine_options_init(aerie_engine_options* options);
#ifndef AERIE_BUILDING_LIBRARY
#define aerie_engine_options_init(options) aerie_engine_options_init_sized((options), sizeof(*(options)))
#endif
/* Loads the draft (if any) and starts the engine's loop thread. `options` may be NULL. On success *out is a
 * new engine, to be freed with aerie_engine_free. Any thread. */
AERIE_API aerie_status aerie_engine_create(aerie_model* model, const aerie_engine_options* options,
                                           aerie_engine** out);
/* Cancels what is in flight, stops the loop thread and frees the engine and every request's events. NULL is
 * ignored. Not concurrently with any other call on this engine. */
AERIE_API void aerie_engine_free(aerie_engine* engine);

/* ---------------------------------------------------------------------------------------------------- */
/* Requests and their events                                                                            */

typedef enum aerie_finish_reason {
  AERIE_FINISH_NONE = 0,      /* not finished */
  AERIE_FINISH_STOP = 1,      /* an end-of-sequence token, a stop token or a stop string */
  AERIE_FINISH_LENGTH = 2,    /* max_tokens, or the engine's max_length */
  AERIE_FINISH_CANCELLED = 3, /* aerie_request_cancel (or the engine was freed) */
  AERIE_FINISH_ERROR = 4      /* this request failed; the event's error says why */
} aerie_finish_reason;

typedef struct aerie_event {
  uint64_t request_id;
  const int32_t* tokens;  /* the new token ids since the previous event */
  size_t n_tokens;
  const char* text;       /* their text (NUL-terminated; "" without a tokenizer), stop strings held back */
  size_t text_length;
  bool finished;          /* the request's last event */
  aerie_finish_reason finish_reason;
  const char* error;      /* "" unless AERIE_FINISH_ERROR */
  int64_t prompt_tokens;
  int64_t cached_prompt_tokens; /* prompt positions taken from the prefix cache */
  int64_t generated_tokens;     /* so far */
  int64_t draft_tokens;         /* speculation so far: drafts verified, */
  int64_t accepted_tokens;      /* of them accepted, */
  int64_t spec_rounds;          /* in this many target forwards that carried drafts */

  /* Since version 2. The library writes these fields only for a request submitted with a version-2
   * aerie_request (its size covers `logprobs`), so a version-1 program's smaller aerie_event is never
   * written past spec_rounds. With aerie_request.logprobs = n >= 0, per token of `tokens`: its
   * log-probability under the model's own distribution (log-softmax of the raw logits, before temperature,
   * filters and constraints), and the n most likely tokens (fewer only when the vocabulary is smaller), most
   * likely first, ties to the lower id. Token i's j-th is top_logprob_ids[i * n_top_logprobs + j]. NULL and
   * 0 when the request asked for none. */
  const float* logprobs;          /* [n_tokens] */
  const int32_t* top_logprob_ids; /* [n_tokens, n_top_logprobs] */
  const float* top_logprobs;      /* [n_tokens, n_top_logprobs] */
  size_t n_top_logprobs;

  /* Since version 3, written for a version-3 request only. With aerie_request.prompt_logprobs = n >= 0: the
   * entries of prompt tokens 1, 2, ... (the first has none), in order, each reported once, across the events
   * of the prefill (the last chunk's come with the first generated token). Entry i: the prompt token
   * prompt_logprob_tokens[i], its log-probability given the tokens before it (as `logprobs`), its rank in that
   * distribution (1: the most likely; ties to the lower id), and the n most likely in
   * prompt_top_logprob_ids[i * n + j] / prompt_top_logprobs[i * n + j], n = n_prompt_top_logprobs. */
  const int32_t* prompt_logprob_tokens;  /* [n_prompt_logprobs] */
  const float* prompt_logprobs;          /* [n_prompt_logprobs] */
  const int64_t* prompt_logprob_ranks;   /* [n_prompt_logprobs] */
  const int32_t* prompt_top_logprob_ids; /* [n_prompt_logprobs, n_prompt_top_logprobs] */
  const float* prompt_top_logprobs;      /* [n_prompt_logprobs, n_prompt_top_logprobs] */
  size_t n_prompt_logprobs;
  size_t n_prompt_top_logprobs;
} aerie_event;

/* Called on the engine's loop thread for each event of a request that streams (aerie_request.on_event).
 * The event and its buffers are valid during the call only. It must return quickly and call nothing of
 * this API but aerie_request_cancel. */
typedef void (*aerie_event_callback)(void* user_data, const aerie_event* event);

typedef struct aerie_request {
  size_t size; /* sizeof(aerie_request) */
  /* The prompt: exactly one of ids, text (encoded with the tokenizer's special tokens, e.g. BOS) and chat
   * messages (rendered with the chat template, add_generation_prompt, then encoded without them). */
  const int32_t* prompt_ids;
  size_t n_prompt_ids;
  const char* prompt_text;
  const aerie_chat_message* messages;
  size_t n_messages;

  int64_t max_tokens; /* default 128 */
  /* Sampling: temperature 0 is greedy (the default). top_k 0: off; top_p 1: off; min_p 0: off. */
  float temperature;
  int64_t top_k;
  float top_p;
  float min_p;
  uint64_t seed;      /* the request's own random stream: the same seed, the same tokens */

  /* Stops, besides the model's end-of-sequence ids (unless ignore_eos): */
  const char* const* stop; /* stop strings (the text ends before the first one; needs a tokenizer). The
                            * last event's ids still include the tokens that completed it. */
  size_t n_stop;
  const int32_t* stop_token_ids;
  size_t n_stop_token_ids;
  bool ignore_eos;

  /* Constraint: NULL, or a JSON schema (its text) the output must match; "{}" for any JSON value. */
  const char* json_schema;

  /* NULL: pull the events with aerie_request_next_event. Else they go to this callback. */
  aerie_event_callback on_event;
  void* user_data;

  /* Since version 2 (read only when `size` covers it). -1 (the default): no log-probabilities; n >= 0 (at
   * most the vocabulary size): each generated token's log-probability and the n most likely, in the
   * events' logprobs fields (the server's OpenAI `logprobs` and `top_logprobs = n`). */
  int64_t logprobs;

  /* Since version 3. NULL or "": the base model; else the name of one of the engine's LoRA adapters
   * (aerie_engine_options.lora_names); another name is AERIE_ERROR_INVALID_ARGUMENT. */
  const char* lora_name;
  /* Since version 3. Penalties on the tokens the sequence holds (prompt and output), as the server's OpenAI
   * fields: presence and frequency in [-2, 2] (0: off) on the output's tokens, vLLM's repetition in (0, 10]
   * (1, the default: off) on every token's. logit_bias: n_logit_bias distinct ids, each bias in [-100, 100],
   * added to the logits first. Sampling and speculation stay exact with respect to the penalised model;
   * log-probabilities stay the model's own. */
  float presence_penalty;
  float frequency_penalty;
  float repetition_penalty;
  const int32_t* logit_bias_ids;
  const float* logit_bias_values;
  size_t n_logit_bias;
  /* Since version 3. -1 (the default): none; n >= 0 (at most the vocabulary size): every prompt token's
   * log-probability, rank and n most likely, in the events' prompt_logprob fields (vLLM's prompt_logprobs).
   * Such a request computes every prompt position itself (no prefix cache); with max_tokens 0 it ends after
   * the prompt (scoring). */
  int64_t prompt_logprobs;
} aerie_request;

/* Defaults (greedy, 128 tokens, no prompt: set one). Any thread. Sized as aerie_engine_options_init. */
AERIE_API void aerie_request_init_sized(aerie_request* request, size_t size);
AERIE_API void aerie_request_init(aerie_request* request);
#ifndef AERIE_BUILDING_LIBRARY
#define aerie_request_init(request) aerie_request_init_sized((request), sizeof(*(request)))
#endif
/* Checks and queues a request; *id names it in the calls below. Everything the request points to is copied:
 * it may be freed on return. Refuses a request the engine can never run (AERIE_ERROR_INVALID_ARGUMENT,
 * naming the field), and AERIE_ERROR_OVERLOADED beyond max_in_flight. Any thread. */
AERIE_API aerie_status aerie_request_submit(aerie_engine* engine, const aerie_request* request, uint64_t* id);
/* Waits up to timeout_ms (0: do not wait; negative: no limit) for the request's next event. On AERIE_OK
 * *event holds it, its buffers valid until the next aerie_request_next_event or aerie_request_release of
 * this request. After the finished event, further calls return AERIE_ERROR_NOT_FOUND. Any thread, but one
 * consumer per request. */
AERIE_API aerie_status aerie_request_next_event(aerie_engine* engine, uint64_t id, int32_t timeout_ms,
                                                aerie_event* event);
/* Cancels the request wherever it is; its last event (AERIE_FINISH_CANCELLED) follows. Cancelling a request
 * that already finished is fine (AERIE_OK). Any thread, also from an event callback. */
AERIE_API aerie_status aerie_request_cancel(aerie_engine* engine, uint64_t id);
/* Frees the request's events (cancelling it if it still runs): every submitted request is released once.
 * Any thread, not concurrently with aerie_request_next_event of the same request. */
AERIE_API aerie_status aerie_request_release(aerie_engine* engine, uint64_t id);

#ifdef __cplusplus
}
#endif

#endif /* AERIE_H */
