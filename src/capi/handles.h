// What the C API's opaque handles hold, and the guard every entry point runs its body in: exceptions become
// status codes and a per-thread message (aerie_last_error), so none crosses the C boundary.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "aerie.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/engine_loop.h"
#include "grammar/token_trie.h"
#include "jinja/chat_template.h"
#include "models/lora.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace aerie::capi {

// Thrown inside the library for a failure with its own status (the guard maps aerie::Error to the call's
// default status, most often AERIE_ERROR_INVALID_ARGUMENT).
struct StatusError : Error {
  StatusError(aerie_status status, std::string message) : Error(std::move(message)), status(status) {}
  aerie_status status;
};

// Sets the thread's message and returns `status` (for the guard and plain failure paths).
aerie_status fail(aerie_status status, std::string message);

// Runs `body` (returning void) and maps what it throws: StatusError to its status, aerie::Error to
// `error_status`, aerie::Overloaded to overloaded or engine-failed, bad_alloc to out-of-memory, anything
// else to internal.
template <typename Body>
aerie_status guarded(aerie_status error_status, Body&& body) noexcept;

// Fails with AERIE_ERROR_INVALID_ARGUMENT naming `what` when `p` is null.
#define AERIE_CAPI_REQUIRE(p, what) \
  if ((p) == nullptr) throw ::aerie::capi::StatusError(AERIE_ERROR_INVALID_ARGUMENT, std::string(what) + " is NULL")

// Copies `ours` into the caller's struct of `size` bytes: the part both have, and zeroes past ours (the fields
// of a newer header this library does not know). Never writes beyond `size`.
template <typename Struct>
void write_sized(Struct* out, const Struct& ours, size_t size) {
  std::memcpy(static_cast<void*>(out), &ours, std::min(size, sizeof(Struct)));
  if (size > sizeof(Struct)) std::memset(reinterpret_cast<char*>(out) + sizeof(Struct), 0, size - sizeof(Struct));
}

// Checks a caller's struct version: `size` must cover the first version of the struct and not exceed this
// library's (a newer header's struct is refused by name rather than half read).
void check_struct_size(size_t size, size_t first_version, size_t ours, const char* name);

// The shared part of a model: engines hold it too, so aerie_model_free may come before aerie_engine_free.
struct ModelState {
  std::string dir;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;       // null: ids only
  std::optional<ChatTemplate> chat_template;  // parsed at load when the tokenizer config has one
  std::string chat_template_error;            // why it did not parse
  std::vector<int64_t> eos_ids;               // config.json's and generation_config.json's
  std::once_flag vocabulary_once;             // the byte trie JSON constraints walk, built on first use
  std::shared_ptr<const TokenTrie> vocabulary;

  const Tokenizer& need_tokenizer(const char* what) const;
  std::shared_ptr<const TokenTrie> json_vocabulary();
};

// One request's events, from the loop thread to its consumer (or its callback).
struct Slot;

struct EngineState {
  std::shared_ptr<ModelState> model;
  std::unique_ptr<Drafter> draft;
  std::shared_ptr<const LoraSet> adapters;  // null: none (aerie_engine_options.lora_names)
  std::unique_ptr<Engine> engine;
  std::unique_ptr<EngineLoop> loop;

  std::mutex slots_mutex;
  std::unordered_map<uint64_t, std::shared_ptr<Slot>> slots;
  std::shared_ptr<Slot> find(uint64_t id);

  ~EngineState();
};

// The text of a prompt given as chat messages (the model's chat template, add_generation_prompt).
std::string render_messages(const ModelState& model, const aerie_chat_message* messages, size_t n,
                            bool add_generation_prompt);

}  // namespace aerie::capi

struct aerie_model {
  std::shared_ptr<aerie::capi::ModelState> state;
};

struct aerie_engine {
  std::unique_ptr<aerie::capi::EngineState> state;
};

namespace aerie::capi {

template <typename Body>
aerie_status guarded(aerie_status error_status, Body&& body) noexcept {
  try {
    body();
    return AERIE_OK;
  } catch (const StatusError& e) {
    return fail(e.status, e.what());
  } catch (const Overloaded& e) {
    return fail(e.status() == 429 ? AERIE_ERROR_OVERLOADED : AERIE_ERROR_ENGINE_FAILED, e.what());
  } catch (const Error& e) {
    return fail(error_status, e.what());
  } catch (const std::bad_alloc&) {
    return fail(AERIE_ERROR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(AERIE_ERROR_INTERNAL, e.what());
  } catch (...) {
    return fail(AERIE_ERROR_INTERNAL, "an unknown exception");
  }
}

}  // namespace aerie::capi
