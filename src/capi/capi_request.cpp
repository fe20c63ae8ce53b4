// The C API's requests and events (include/aerie.h): a request becomes an EngineJob whose callback, on the
// engine loop thread, turns each TokenEvent into ids and text (an incremental decoder, then the stop
// strings) and hands it to the request's Slot: a queue its consumer pulls from, or the caller's callback.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>

#include "capi/handles.h"
#include "grammar/json_constraint.h"
#include "grammar/json_schema.h"
#include "sched/stop_strings.h"

namespace aerie::capi {

namespace {

// The first version of each struct: what a version-1 caller's aerie_request holds and its aerie_event has
// room for. Version 2 appended the log-probability fields to both.
constexpr size_t kRequestV1 = offsetof(aerie_request, logprobs);
constexpr size_t kRequestV2 = offsetof(aerie_request, lora_name);
constexpr size_t kRequestV3 = sizeof(aerie_request);
constexpr size_t kEventV1 = offsetof(aerie_event, logprobs);
constexpr size_t kEventV2 = offsetof(aerie_event, prompt_logprob_tokens);

// One event as the consumer will see it (owns what aerie_event points into).
struct PendingEvent {
  uint64_t id = 0;
  std::vector<int32_t> tokens;
  std::string text;
  bool finished = false;
  aerie_finish_reason reason = AERIE_FINISH_NONE;
  std::string error;
  int64_t prompt_tokens = 0, cached_prompt_tokens = 0, generated_tokens = 0;
  int64_t draft_tokens = 0, accepted_tokens = 0, spec_rounds = 0;
  // With aerie_request.logprobs: per token, and its n_top most likely flat ([tokens, n_top]).
  bool with_logprobs = false;
  std::vector<float> logprobs;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
  size_t n_top = 0;
  // With aerie_request.prompt_logprobs: per prompt entry, and its n_prompt_top most likely flat.
  bool with_prompt_logprobs = false;
  std::vector<int32_t> prompt_tokens_lp;
  std::vector<float> prompt_logprobs;
  std::vector<int64_t> prompt_ranks;
  std::vector<int32_t> prompt_top_ids;
  std::vector<float> prompt_top_logprobs;
  size_t n_prompt_top = 0;

  aerie_event view() const {
    aerie_event e{};
    e.request_id = id;
    e.tokens = tokens.data();
    e.n_tokens = tokens.size();
    e.text = text.c_str();
    e.text_length = text.size();
    e.finished = finished;
    e.finish_reason = reason;
    e.error = error.c_str();
    e.prompt_tokens = prompt_tokens;
    e.cached_prompt_tokens = cached_prompt_tokens;
    e.generated_tokens = generated_tokens;
    e.draft_tokens = draft_tokens;
    e.accepted_tokens = accepted_tokens;
    e.spec_rounds = spec_rounds;
    if (with_logprobs) {
      e.logprobs = logprobs.data();
      e.top_logprob_ids = top_ids.data();
      e.top_logprobs = top_logprobs.data();
      e.n_top_logprobs = n_top;
    }
    if (with_prompt_logprobs) {
      e.prompt_logprob_tokens = prompt_tokens_lp.data();
      e.prompt_logprobs = prompt_logprobs.data();
      e.prompt_logprob_ranks = prompt_ranks.data();
      e.prompt_top_logprob_ids = prompt_top_ids.data();
      e.prompt_top_logprobs = prompt_top_logprobs.data();
      e.n_prompt_logprobs = prompt_tokens_lp.size();
      e.n_prompt_top_logprobs = n_prompt_top;
    }
    return e;
  }
};

aerie_finish_reason finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return AERIE_FINISH_NONE;
    case FinishReason::kStop: return AERIE_FINISH_STOP;
    case FinishReason::kLength: return AERIE_FINISH_LENGTH;
    case FinishReason::kCancelled: return AERIE_FINISH_CANCELLED;
    case FinishReason::kError: return AERIE_FINISH_ERROR;
  }
  return AERIE_FINISH_ERROR;
}

}  // namespace

struct Slot {
  EngineLoop* loop = nullptr;
  // Loop thread only.
  const Tokenizer* tokenizer = nullptr;  // text events when set
  std::optional<IncrementalDecoder> decoder;
  std::optional<StopStringMatcher> stop;
  bool ended = false;  // the finished event went out (a stop string ends it before the engine does)
  aerie_event_callback callback = nullptr;
  void* user_data = nullptr;
  size_t event_size = kEventV1;  // how much of the consumer's aerie_event its version has (kEventV1, V2 or all)
  int64_t n_top_logprobs = -1;   // -1: the request asked for no log-probabilities
  int64_t n_prompt_top_logprobs = -1;  // -1: no prompt log-probabilities

  // Between the loop thread and the consumer.
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<PendingEvent> queue;
  bool taken_last = false;  // the consumer has taken the finished event
  PendingEvent current;     // what the consumer's aerie_event points into

  void on_event(const TokenEvent& e);
  void translate(const TokenEvent& e);  // on_event's work: the event's ids and text, its stop strings
  void copy_logprobs(const TokenEvent& e, PendingEvent& out) const;
  void copy_prompt_logprobs(const TokenEvent& e, PendingEvent& out) const;
  void deliver(PendingEvent&& event);
};

void Slot::on_event(const TokenEvent& e) {
  if (ended) return;  // a stop string matched: the engine's later events (its cancellation) are not the caller's
  try {
    translate(e);
  } catch (const std::exception& error) {  // never into the engine's step: this request fails alone
    ended = true;
    if (!e.finished) loop->cancel(e.request_id);
    PendingEvent out;
    out.id = e.request_id;
    out.finished = true;
    out.reason = AERIE_FINISH_ERROR;
    out.error = str_cat("libaerie: ", error.what());
    deliver(std::move(out));
  }
}

void Slot::translate(const TokenEvent& e) {
  PendingEvent out;
  out.id = e.request_id;
  out.tokens.assign(e.tokens.begin(), e.tokens.end());
  out.finished = e.finished;
  out.reason = finish_reason(e.finish_reason);
  out.error = e.error;
  out.prompt_tokens = e.prompt_tokens;
  out.cached_prompt_tokens = e.cached_prompt_tokens;
  out.generated_tokens = e.generated_tokens;
  if (e.spec) {
    out.draft_tokens = e.spec->draft_tokens;
    out.accepted_tokens = e.spec->accepted_tokens;
    out.spec_rounds = e.spec->rounds;
  }
  if (n_top_logprobs >= 0) copy_logprobs(e, out);
  if (n_prompt_top_logprobs >= 0) copy_prompt_logprobs(e, out);
  if (decoder) {
    std::string piece;
    for (int64_t token : e.tokens) decoder->push(int32_t(token), piece);
    if (e.finished) piece += decoder->flush();
    if (stop) {
      out.text = stop->push(piece);
      if (stop->stopped()) {
        out.finished = true;
        out.reason = AERIE_FINISH_STOP;
        if (!e.finished) loop->cancel(e.request_id);
      } else if (e.finished) {
        out.text += stop->finish();
      }
    } else {
      out.text = std::move(piece);
    }
  }
  ended = out.finished;
  deliver(std::move(out));
}

void Slot::copy_logprobs(const TokenEvent& e, PendingEvent& out) const {
  out.with_logprobs = true;
  out.n_top = size_t(n_top_logprobs);
  if (e.logprobs.size() != e.tokens.size())
    throw Error(
        str_cat("the engine sent ", e.logprobs.size(), " log-probability entries for ", e.tokens.size(), " tokens"));
  for (const TokenLogprobs& entry : e.logprobs) {
    if (entry.top.size() != out.n_top)
      throw Error(str_cat("the engine sent ", entry.top.size(), " top log-probabilities, ", out.n_top, " asked"));
    out.logprobs.push_back(entry.logprob);
    for (const auto& [token, logprob] : entry.top) {
      out.top_ids.push_back(int32_t(token));
      out.top_logprobs.push_back(logprob);
    }
  }
}

void Slot::copy_prompt_logprobs(const TokenEvent& e, PendingEvent& out) const {
  out.with_prompt_logprobs = true;
  out.n_prompt_top = size_t(n_prompt_top_logprobs);
  for (const PromptTokenLogprob& entry : e.prompt_logprobs) {
    if (entry.logprobs.top.size() != out.n_prompt_top)
      throw Error(str_cat("the engine sent ", entry.logprobs.top.size(), " top prompt log-probabilities, ",
                          out.n_prompt_top, " asked"));
    out.prompt_tokens_lp.push_back(int32_t(entry.token));
    out.prompt_logprobs.push_back(entry.logprobs.logprob);
    out.prompt_ranks.push_back(entry.rank);
    for (const auto& [token, logprob] : entry.logprobs.top) {
      out.prompt_top_ids.push_back(int32_t(token));
      out.prompt_top_logprobs.push_back(logprob);
    }
  }
}

void Slot::deliver(PendingEvent&& event) {
  if (callback) {
    const aerie_event view = event.view();
    callback(user_data, &view);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    queue.push_back(std::move(event));
  }
  cv.notify_all();
}

namespace {

std::vector<int64_t> prompt_of(ModelState& model, const aerie_request& r) {
  const int given = int(r.prompt_ids != nullptr || r.n_prompt_ids > 0) + int(r.prompt_text != nullptr) +
                    int(r.messages != nullptr || r.n_messages > 0);
  if (given != 1)
    throw Error(
        str_cat("aerie_request: give exactly one prompt (prompt_ids, prompt_text or messages); ", given, " given"));
  std::vector<int64_t> prompt;
  if (r.prompt_ids || r.n_prompt_ids) {
    AERIE_CAPI_REQUIRE(r.prompt_ids, "aerie_request.prompt_ids");
    prompt.assign(r.prompt_ids, r.prompt_ids + r.n_prompt_ids);
    return prompt;
  }
  const bool chat = r.prompt_text == nullptr;
  const std::string text = chat ? render_messages(model, r.messages, r.n_messages, /*add_generation_prompt=*/true)
                                : std::string(r.prompt_text);
  const Tokenizer& tokenizer = model.need_tokenizer("aerie_request.prompt_text");
  // A rendered chat carries its own special tokens (BOS): encoding adds none.
  for (int32_t id : tokenizer.encode(text, /*add_special_tokens=*/!chat)) prompt.push_back(id);
  if (prompt.empty()) throw Error("aerie_request: the prompt encodes to no tokens");
  return prompt;
}

// The engine's adapter named `name` (RequestOptions::adapter).
int32_t adapter_index(const EngineState& state, const char* name) {
  const int32_t index = state.adapters ? state.adapters->index_of(name) : -1;
  if (index >= 0) return index;
  std::string loaded;
  if (state.adapters)
    for (const LoraAdapter& a : state.adapters->adapters)
      loaded += str_cat(loaded.empty() ? "" : ", ", "'", a.name, "'");
  throw Error(str_cat("aerie_request.lora_name: the engine has no LoRA adapter named '", name, "' (",
                      loaded.empty() ? "it loaded none: aerie_engine_options.lora_names" : "it has " + loaded, ")"));
}

// The request's logit bias, by token id (RequestOptions::logit_bias), each entry checked.
std::vector<LogitBias> logit_bias_of(ModelState& model, const aerie_request& r) {
  std::vector<LogitBias> out;
  if (r.n_logit_bias == 0) return out;
  AERIE_CAPI_REQUIRE(r.logit_bias_ids, "aerie_request.logit_bias_ids");
  AERIE_CAPI_REQUIRE(r.logit_bias_values, "aerie_request.logit_bias_values");
  for (size_t i = 0; i < r.n_logit_bias; ++i) {
    const int32_t id = r.logit_bias_ids[i];
    const float bias = r.logit_bias_values[i];
    if (id < 0 || id >= model.model->n_vocab())
      throw Error(str_cat("aerie_request.logit_bias_ids[", i, "] = ", id, " is outside the vocabulary [0, ",
                          model.model->n_vocab(), ")"));
    if (!(bias >= -100.0f && bias <= 100.0f))
      throw Error(str_cat("aerie_request.logit_bias_values[", i, "] = ", bias, " is outside [-100, 100]"));
    out.push_back({id, bias});
  }
  std::sort(out.begin(), out.end(), [](const LogitBias& a, const LogitBias& b) { return a.token < b.token; });
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].token == out[i - 1].token)
      throw Error(str_cat("aerie_request.logit_bias_ids: token ", out[i].token, " is given twice"));
  return out;
}

RequestOptions options_of(ModelState& model, const aerie_request& r) {
  RequestOptions o;
  o.max_tokens = r.max_tokens;
  o.sampling.temperature = r.temperature;
  o.sampling.top_k = r.top_k;
  o.sampling.top_p = r.top_p;
  o.sampling.min_p = r.min_p;
  o.sampling.seed = r.seed;
  o.ignore_eos = r.ignore_eos;
  if (r.size >= kRequestV2) {  // a version-1 struct has no logprobs field: none asked
    if (r.logprobs < -1 || r.logprobs > model.model->n_vocab())
      throw Error(str_cat("aerie_request.logprobs must be -1 (none) or in [0, ", model.model->n_vocab(),
                          "] (the vocabulary size), got ", r.logprobs));
    o.logprobs = r.logprobs;
  }
  if (r.size >= kRequestV3) {  // older structs have no penalties: none
    o.penalties.presence = r.presence_penalty;
    o.penalties.frequency = r.frequency_penalty;
    o.penalties.repetition = r.repetition_penalty;
    try {
      validate(o.penalties);
    } catch (const Error& e) {
      throw Error(str_cat("aerie_request.", e.what()));
    }
    o.logit_bias = logit_bias_of(model, r);
    if (r.prompt_logprobs < -1 || r.prompt_logprobs > model.model->n_vocab())
      throw Error(str_cat("aerie_request.prompt_logprobs must be -1 (none) or in [0, ", model.model->n_vocab(),
                          "] (the vocabulary size), got ", r.prompt_logprobs));
    o.prompt_logprobs = r.prompt_logprobs;
  }
  if (!r.ignore_eos) o.stop_token_ids = model.eos_ids;
  if (r.n_stop_token_ids > 0) AERIE_CAPI_REQUIRE(r.stop_token_ids, "aerie_request.stop_token_ids");
  for (size_t i = 0; i < r.n_stop_token_ids; ++i) {
    if (r.stop_token_ids[i] < 0 || r.stop_token_ids[i] >= model.model->n_vocab())
      throw Error(str_cat("aerie_request.stop_token_ids[", i, "] = ", r.stop_token_ids[i],
                          " is outside the vocabulary [0, ", model.model->n_vocab(), ")"));
    o.stop_token_ids.push_back(r.stop_token_ids[i]);
  }
  if (r.json_schema) {
    const std::shared_ptr<const TokenTrie> vocabulary = model.json_vocabulary();
    try {
      o.constraint = make_json_constraint(compile_json_schema_text(r.json_schema), vocabulary);
    } catch (const Error& e) {
      throw Error(str_cat("aerie_request.json_schema: ", e.what()));
    }
  }
  return o;
}

}  // namespace

}  // namespace aerie::capi

using namespace aerie;
using namespace aerie::capi;

extern "C" {

void aerie_request_init_sized(aerie_request* request, size_t size) {
  if (!request || size == 0) return;
  aerie_request r{};
  r.size = size;  // a larger (newer) struct keeps its size: aerie_request_submit refuses it by name
  const RequestOptions defaults;
  r.max_tokens = defaults.max_tokens;
  r.temperature = defaults.sampling.temperature;
  r.top_k = defaults.sampling.top_k;
  r.top_p = defaults.sampling.top_p;
  r.min_p = defaults.sampling.min_p;
  r.logprobs = -1;
  r.repetition_penalty = defaults.penalties.repetition;
  r.prompt_logprobs = -1;
  write_sized(request, r, size);
}

void aerie_request_init(aerie_request* request) {
  aerie_request_init_sized(request, kRequestV1);  // the symbol version-1 programs call
}

aerie_status aerie_request_submit(aerie_engine* engine, const aerie_request* request, uint64_t* id) {
  return guarded(AERIE_ERROR_INVALID_ARGUMENT, [&] {
    AERIE_CAPI_REQUIRE(id, "id");
    *id = 0;
    AERIE_CAPI_REQUIRE(engine, "engine");
    AERIE_CAPI_REQUIRE(request, "request");
    check_struct_size(request->size, kRequestV1, kRequestV3, "aerie_request");
    EngineState& state = *engine->state;
    ModelState& model = *state.model;
    EngineJob job;
    job.prompt = prompt_of(model, *request);
    job.options = options_of(model, *request);
    if (request->size >= kRequestV3 && request->lora_name && *request->lora_name)
      job.options.adapter = adapter_index(state, request->lora_name);
    auto slot = std::make_shared<Slot>();
    slot->loop = state.loop.get();
    slot->callback = request->on_event;
    slot->user_data = request->user_data;
    // The event's version follows the request's: a version-2 struct has no room for the prompt fields.
    if (request->size >= kRequestV3) slot->event_size = sizeof(aerie_event);
    else if (request->size >= kRequestV2) slot->event_size = kEventV2;
    slot->n_prompt_top_logprobs = job.options.prompt_logprobs;
    slot->n_top_logprobs = job.options.logprobs;
    if (model.tokenizer) {
      slot->tokenizer = model.tokenizer.get();
      slot->decoder.emplace(*model.tokenizer, /*skip_special_tokens=*/true);
    }
    if (request->n_stop > 0) {
      AERIE_CAPI_REQUIRE(request->stop, "aerie_request.stop");
      model.need_tokenizer("aerie_request.stop (stop strings)");
      std::vector<std::string> stops;
      for (size_t i = 0; i < request->n_stop; ++i) {
        if (!request->stop[i]) throw Error(str_cat("aerie_request.stop[", i, "] is NULL"));
        if (*request->stop[i]) stops.emplace_back(request->stop[i]);
      }
      if (!stops.empty()) slot->stop.emplace(std::move(stops));
    }
    job.on_event = [slot](const TokenEvent& e) { slot->on_event(e); };
    // The slot is registered before submit: its first event may come before submit returns. Under the slots
    // lock nobody can look the id up before it is in the map.
    std::lock_guard<std::mutex> lock(state.slots_mutex);
    std::vector<EngineJob> jobs;
    jobs.push_back(std::move(job));
    uint64_t assigned = 0;
    try {
      assigned = state.loop->submit(std::move(jobs)).at(0);
    } catch (const Overloaded& e) {  // its words are the server's; these are the embedder's
      if (e.status() != 429)
        throw StatusError(AERIE_ERROR_ENGINE_FAILED,
                          str_cat("the engine cannot take requests: ", state.loop->failure()));
      throw StatusError(AERIE_ERROR_OVERLOADED,
                        str_cat("the engine is overloaded: it holds max_in_flight (", state.loop->max_in_flight(),
                                ") requests; retry when one ends"));
    }
    state.slots.emplace(assigned, slot);
    *id = assigned;
  });
}

aerie_status aerie_request_next_event(aerie_engine* engine, uint64_t id, int32_t timeout_ms, aerie_event* event) {
  return guarded(AERIE_ERROR_INVALID_ARGUMENT, [&] {
    AERIE_CAPI_REQUIRE(engine, "engine");
    AERIE_CAPI_REQUIRE(event, "event");
    // Only as much of *event as the request's version has: a version-1 program's struct is smaller.
    std::memset(static_cast<void*>(event), 0, kEventV1);
    const std::shared_ptr<Slot> slot = engine->state->find(id);
    std::memset(static_cast<void*>(event), 0, slot->event_size);
    if (slot->callback)
      throw Error(str_cat("request ", id, " streams its events to its on_event callback: there is nothing to pull"));
    std::unique_lock<std::mutex> lock(slot->mutex);
    if (slot->taken_last)
      throw StatusError(AERIE_ERROR_NOT_FOUND, str_cat("request ", id, " has finished: its last event was taken"));
    const auto ready = [&] { return !slot->queue.empty(); };
    if (timeout_ms < 0) {
      slot->cv.wait(lock, ready);
    } else if (!slot->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
      throw StatusError(AERIE_ERROR_TIMEOUT, str_cat("no event of request ", id, " within ", timeout_ms, " ms"));
    }
    slot->current = std::move(slot->queue.front());
    slot->queue.pop_front();
    slot->taken_last = slot->current.finished;
    const aerie_event view = slot->current.view();
    std::memcpy(static_cast<void*>(event), &view, slot->event_size);
  });
}

aerie_status aerie_request_cancel(aerie_engine* engine, uint64_t id) {
  return guarded(AERIE_ERROR_INVALID_ARGUMENT, [&] {
    AERIE_CAPI_REQUIRE(engine, "engine");
    engine->state->find(id);  // not found: refused by name
    engine->state->loop->cancel(id);
  });
}

aerie_status aerie_request_release(aerie_engine* engine, uint64_t id) {
  return guarded(AERIE_ERROR_INVALID_ARGUMENT, [&] {
    AERIE_CAPI_REQUIRE(engine, "engine");
    EngineState& state = *engine->state;
    std::shared_ptr<Slot> slot = state.find(id);
    {
      std::lock_guard<std::mutex> lock(state.slots_mutex);
      state.slots.erase(id);
    }
    // Still running: cancel it; the loop's callback keeps the slot alive until its last event.
    state.loop->cancel(id);
  });
}

}  // extern "C"
