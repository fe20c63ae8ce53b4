// aerie._aerie: the Python extension, a thin layer over the C API (include/aerie.h) and nothing else. One
// class per handle (Model, Engine); requests are submitted with their options and read back as plain dicts
// of events. Everything vLLM-shaped (SamplingParams, RequestOutput, batching, streaming) is Python, in
// python/aerie/. Every blocking call runs without the GIL; a failing status becomes the aerie.errors class
// for it, carrying aerie_last_error()'s message.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "aerie.h"

namespace py = pybind11;

namespace {

// Raises aerie.errors' class for `status` (errors.py maps the status name to it) with `message`.
[[noreturn]] void raise_status(aerie_status status, const std::string& message) {
  py::object error = py::module_::import("aerie.errors").attr("from_status")(aerie_status_name(status), message);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw py::error_already_set();
}

// Runs `call` (returning aerie_status) without the GIL and raises on failure. The message is read on this
// thread right after the call: aerie_last_error() is per thread.
// Thrown (without the GIL) by a call on an Engine that close() freed; checked() raises it as a Python error.
struct EngineClosed {};

template <typename Call>
void checked(Call&& call) {
  aerie_status status;
  std::string message;
  try {
    py::gil_scoped_release release;
    status = call();
    if (status != AERIE_OK) message = aerie_last_error();
  } catch (const EngineClosed&) {
    status = AERIE_ERROR_INVALID_ARGUMENT;
    message = "the engine is closed (LLM.close)";
  }
  if (status != AERIE_OK) raise_status(status, message);
}

// The C API's outputs may end inside a UTF-8 character only where the caller decodes single tokens: such
// bytes become U+FFFD rather than an exception.
py::str utf8(const char* text, size_t length) {
  PyObject* s = PyUnicode_DecodeUTF8(text, Py_ssize_t(length), "replace");
  if (!s) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

// Calls `fill(buffer, capacity, &length)` under the header's rule for outputs: once with a guess, and again
// with the room it asked for when that did not fit.
template <typename T, typename Fill>
std::vector<T> sized_output(size_t guess, size_t extra, Fill&& fill) {
  std::vector<T> out(guess + extra);
  size_t length = 0;
  aerie_status status;
  std::string message;
  {
    py::gil_scoped_release release;
    status = fill(out.data(), out.size(), &length);
    if (status == AERIE_ERROR_BUFFER_TOO_SMALL) {
      out.resize(length + extra);
      status = fill(out.data(), out.size(), &length);
    }
    if (status != AERIE_OK) message = aerie_last_error();
  }
  if (status != AERIE_OK) raise_status(status, message);
  out.resize(length);
  return out;
}

// An aerie_event's contents, owned: its buffers are the engine's only until the next call on the request.
struct Event {
  Event() = default;
  explicit Event(const aerie_event& e)
      : tokens(e.tokens, e.tokens + e.n_tokens),
        text(e.text, e.text_length),
        finished(e.finished),
        finish_reason(e.finish_reason),
        error(e.error),
        counts{e.prompt_tokens, e.cached_prompt_tokens, e.generated_tokens,
               e.draft_tokens,  e.accepted_tokens,      e.spec_rounds},
        with_logprobs(e.logprobs != nullptr),
        n_top(e.n_top_logprobs),
        with_prompt_logprobs(e.prompt_logprob_tokens != nullptr),
        n_prompt_top(e.n_prompt_top_logprobs) {
    if (with_logprobs) {
      logprobs.assign(e.logprobs, e.logprobs + e.n_tokens);
      top_ids.assign(e.top_logprob_ids, e.top_logprob_ids + e.n_tokens * n_top);
      top_logprobs.assign(e.top_logprobs, e.top_logprobs + e.n_tokens * n_top);
    }
    if (with_prompt_logprobs) {
      const size_t n = e.n_prompt_logprobs;
      prompt_tokens.assign(e.prompt_logprob_tokens, e.prompt_logprob_tokens + n);
      prompt_logprobs.assign(e.prompt_logprobs, e.prompt_logprobs + n);
      prompt_ranks.assign(e.prompt_logprob_ranks, e.prompt_logprob_ranks + n);
      prompt_top_ids.assign(e.prompt_top_logprob_ids, e.prompt_top_logprob_ids + n * n_prompt_top);
      prompt_top_logprobs.assign(e.prompt_top_logprobs, e.prompt_top_logprobs + n * n_prompt_top);
    }
  }

  // What aerie/llm.py reads: the counts by the C API's names, log-probabilities as lists (None when not
  // asked for), each position's top ones as (id, log-probability) pairs.
  py::dict dict() const {
    static const char* const kReasons[] = {"", "stop", "length", "cancelled", "error"};
    static const char* const kCounts[] = {"prompt_tokens", "cached_prompt_tokens", "generated_tokens",
                                          "draft_tokens",  "accepted_tokens",      "spec_rounds"};
    py::dict d;
    d["tokens"] = tokens;
    d["text"] = utf8(text.data(), text.size());
    d["finished"] = finished;
    d["finish_reason"] = kReasons[int(finish_reason)];
    d["error"] = error;
    for (int i = 0; i < 6; ++i) d[kCounts[i]] = counts[i];
    d["logprobs"] = py::none();
    d["top_logprobs"] = py::none();
    d["prompt_logprobs"] = py::none();
    if (with_logprobs) {
      d["logprobs"] = logprobs;
      d["top_logprobs"] = pairs(top_ids, top_logprobs, tokens.size(), n_top);
    }
    if (with_prompt_logprobs) {  // (token, log-probability, rank, [(id, log-probability), ...]) per entry
      const py::list top = pairs(prompt_top_ids, prompt_top_logprobs, prompt_tokens.size(), n_prompt_top);
      py::list entries;
      for (size_t i = 0; i < prompt_tokens.size(); ++i)
        entries.append(py::make_tuple(prompt_tokens[i], prompt_logprobs[i], prompt_ranks[i], top[i]));
      d["prompt_logprobs"] = entries;
    }
    return d;
  }

  // Per row of n (id, log-probability) pairs: a list of n tuples.
  static py::list pairs(const std::vector<int32_t>& ids, const std::vector<float>& values, size_t rows, size_t n) {
    py::list out;
    for (size_t i = 0; i < rows; ++i) {
      py::list row;
      for (size_t j = i * n; j < (i + 1) * n; ++j) row.append(py::make_tuple(ids[j], values[j]));
      out.append(row);
    }
    return out;
  }

  std::vector<int32_t> tokens;
  std::string text;
  bool finished = false;
  aerie_finish_reason finish_reason = AERIE_FINISH_NONE;
  std::string error;
  int64_t counts[6] = {};  // prompt, cached prompt, generated, draft, accepted tokens; spec rounds
  bool with_logprobs = false;
  size_t n_top = 0;
  std::vector<float> logprobs;      // [tokens]
  std::vector<int32_t> top_ids;     // [tokens, n_top]
  std::vector<float> top_logprobs;  // [tokens, n_top]
  bool with_prompt_logprobs = false;
  size_t n_prompt_top = 0;
  std::vector<int32_t> prompt_tokens;      // [entries]: prompt tokens 1, 2, ...
  std::vector<float> prompt_logprobs;      // [entries]
  std::vector<int64_t> prompt_ranks;       // [entries]
  std::vector<int32_t> prompt_top_ids;     // [entries, n_prompt_top]
  std::vector<float> prompt_top_logprobs;  // [entries, n_prompt_top]
};

class Model {
 public:
  Model(const std::string& dir, int32_t n_threads, int weights, const std::optional<std::string>& tokenizer_dir) {
    aerie_model_options options;
    aerie_model_options_init(&options);
    options.n_threads = n_threads;
    options.weights = aerie_weight_format(weights);
    options.tokenizer_dir = tokenizer_dir ? tokenizer_dir->c_str() : nullptr;
    checked([&] { return aerie_model_load(dir.c_str(), &options, &model_); });
  }
  ~Model() { aerie_model_free(model_); }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  aerie_model* get() const { return model_; }
  int64_t n_vocab() const { return aerie_model_n_vocab(model_); }
  bool has_tokenizer() const { return aerie_model_has_tokenizer(model_); }
  bool has_chat_template() const { return aerie_model_has_chat_template(model_); }

  std::vector<int32_t> tokenize(const std::string& text, bool add_special) const {
    return sized_output<int32_t>(text.size() + 2, 0, [&](int32_t* ids, size_t capacity, size_t* length) {
      return aerie_tokenize(model_, text.data(), text.size(), add_special, ids, capacity, length);
    });
  }

  py::str detokenize(const std::vector<int32_t>& ids, bool skip_special) const {
    const std::vector<char> text = sized_output<char>(ids.size() * 8, 1,
                                                      [&](char* out, size_t capacity, size_t* length) {
                                                        return aerie_detokenize(model_, ids.data(), ids.size(),
                                                                                skip_special, out, capacity, length);
                                                      });
    return utf8(text.data(), text.size());
  }

  // messages: (role, content) pairs.
  py::str apply_chat_template(const std::vector<std::pair<std::string, std::string>>& messages,
                              bool add_generation_prompt) const {
    std::vector<aerie_chat_message> list;
    for (const auto& [role, content] : messages) list.push_back({role.c_str(), content.c_str()});
    const std::vector<char> text = sized_output<char>(1024, 1, [&](char* out, size_t capacity, size_t* length) {
      return aerie_apply_chat_template(model_, list.data(), list.size(), add_generation_prompt, out, capacity, length);
    });
    return utf8(text.data(), text.size());
  }

 private:
  aerie_model* model_ = nullptr;
};

// An engine and its requests. close() (or the destructor) frees it; aerie_engine_free must not run beside
// another call on the engine, so every call holds a shared lock and close() the exclusive one.
class Engine {
 public:
  // lora_names[i] names the adapter folder lora_paths[i]; max_lora_rank 0: the library's default.
  Engine(const Model& model, const std::optional<std::string>& draft, int32_t num_speculative_tokens,
         int64_t max_num_seqs, int64_t max_length, uint64_t kv_cache_bytes, int64_t max_in_flight,
         const std::vector<std::string>& lora_names, const std::vector<std::string>& lora_paths,
         int64_t max_lora_rank) {
    if (lora_names.size() != lora_paths.size())
      throw py::value_error("Engine: lora_names and lora_paths differ in length");
    std::vector<const char*> names, paths;
    for (size_t i = 0; i < lora_names.size(); ++i) {
      names.push_back(lora_names[i].c_str());
      paths.push_back(lora_paths[i].c_str());
    }
    aerie_engine_options options;
    aerie_engine_options_init(&options);
    options.lora_names = names.data();
    options.lora_paths = paths.data();
    options.n_loras = names.size();
    options.max_lora_rank = max_lora_rank;
    options.draft = draft ? draft->c_str() : nullptr;
    options.num_speculative_tokens = num_speculative_tokens;
    options.max_num_seqs = max_num_seqs;
    options.max_length = max_length;
    options.kv_cache_bytes = kv_cache_bytes;
    options.max_in_flight = max_in_flight;
    checked([&] { return aerie_engine_create(model.get(), &options, &engine_); });
  }
  ~Engine() { close(); }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void close() {
    closing_ = true;
    py::gil_scoped_release release;
    std::unique_lock lock(mutex_);
    aerie_engine_free(std::exchange(engine_, nullptr));
  }

  uint64_t submit(const std::vector<int32_t>& prompt_ids, int64_t max_tokens, float temperature, int64_t top_k,
                  float top_p, float min_p, uint64_t seed, const std::vector<std::string>& stop,
                  const std::vector<int32_t>& stop_token_ids, bool ignore_eos, int64_t logprobs,
                  const std::optional<std::string>& lora_name, float presence_penalty, float frequency_penalty,
                  float repetition_penalty, const std::vector<std::pair<int32_t, float>>& logit_bias,
                  const std::optional<std::string>& json_schema, int64_t prompt_logprobs) {
    aerie_request r;
    aerie_request_init(&r);
    r.prompt_ids = prompt_ids.data();
    r.n_prompt_ids = prompt_ids.size();
    r.max_tokens = max_tokens;
    r.temperature = temperature;
    r.top_k = top_k;
    r.top_p = top_p;
    r.min_p = min_p;
    r.seed = seed;
    std::vector<const char*> stops;
    for (const std::string& s : stop) stops.push_back(s.c_str());
    r.stop = stops.data();
    r.n_stop = stops.size();
    r.stop_token_ids = stop_token_ids.data();
    r.n_stop_token_ids = stop_token_ids.size();
    r.ignore_eos = ignore_eos;
    r.logprobs = logprobs;
    r.lora_name = lora_name ? lora_name->c_str() : nullptr;
    r.presence_penalty = presence_penalty;
    r.frequency_penalty = frequency_penalty;
    r.repetition_penalty = repetition_penalty;
    std::vector<int32_t> bias_ids;
    std::vector<float> bias_values;
    for (const auto& [token, bias] : logit_bias) {
      bias_ids.push_back(token);
      bias_values.push_back(bias);
    }
    r.logit_bias_ids = bias_ids.data();
    r.logit_bias_values = bias_values.data();
    r.n_logit_bias = bias_ids.size();
    r.json_schema = json_schema ? json_schema->c_str() : nullptr;
    r.prompt_logprobs = prompt_logprobs;
    uint64_t id = 0;
    checked([&] { return locked([&] { return aerie_request_submit(engine_, &r, &id); }); });
    return id;
  }

  // The request's next event as a dict, waiting up to timeout_s (negative: as long as it takes); None when
  // none came in time. The wait is cut into slices so that Ctrl-C (a pending signal) raises between them.
  py::object next_event(uint64_t id, double timeout_s) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s < 0 ? 0 : timeout_s);
    Event event;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      const int32_t slice = timeout_s < 0 ? kSliceMs : int32_t(std::clamp<int64_t>(left, 0, kSliceMs));
      bool timed_out = false;
      checked([&] {
        const aerie_status status = locked([&] {
          aerie_event e{};
          const aerie_status s = aerie_request_next_event(engine_, id, slice, &e);
          if (s == AERIE_OK) event = Event(e);  // copied while the engine surely lives (close() waits)
          return s;
        });
        timed_out = status == AERIE_ERROR_TIMEOUT;
        return timed_out ? AERIE_OK : status;
      });
      if (!timed_out) break;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (timeout_s >= 0 && Clock::now() >= deadline) return py::none();
    }
    return event.dict();
  }

  void cancel(uint64_t id) {
    checked([&] { return locked([&] { return aerie_request_cancel(engine_, id); }); });
  }
  void release(uint64_t id) {
    checked([&] { return locked([&] { return aerie_request_release(engine_, id); }); });
  }

 private:
  static constexpr int32_t kSliceMs = 50;

  // Runs `call` under the shared lock (without the GIL); EngineClosed once close() began.
  template <typename Call>
  aerie_status locked(Call&& call) {
    std::shared_lock lock(mutex_);
    if (closing_ || !engine_) throw EngineClosed{};
    return call();
  }

  aerie_engine* engine_ = nullptr;
  std::atomic<bool> closing_ = false;
  std::shared_mutex mutex_;
};

}  // namespace

PYBIND11_MODULE(_aerie, m) {
  m.doc() = "aerie's C API for Python (use the aerie package: LLM, SamplingParams)";
  m.attr("API_VERSION") = AERIE_API_VERSION;
  py::class_<Model>(m, "Model")
      .def(py::init<const std::string&, int32_t, int, const std::optional<std::string>&>(), py::arg("dir"),
           py::arg("n_threads"), py::arg("weights"), py::arg("tokenizer_dir"))
      .def_property_readonly("n_vocab", &Model::n_vocab)
      .def_property_readonly("has_tokenizer", &Model::has_tokenizer)
      .def_property_readonly("has_chat_template", &Model::has_chat_template)
      .def("tokenize", &Model::tokenize, py::arg("text"), py::arg("add_special"))
      .def("detokenize", &Model::detokenize, py::arg("ids"), py::arg("skip_special"))
      .def("apply_chat_template", &Model::apply_chat_template, py::arg("messages"), py::arg("add_generation_prompt"));
  py::class_<Engine>(m, "Engine")
      .def(py::init<const Model&, const std::optional<std::string>&, int32_t, int64_t, int64_t, uint64_t, int64_t,
                    const std::vector<std::string>&, const std::vector<std::string>&, int64_t>(),
           py::arg("model"), py::arg("draft"), py::arg("num_speculative_tokens"), py::arg("max_num_seqs"),
           py::arg("max_length"), py::arg("kv_cache_bytes"), py::arg("max_in_flight"), py::arg("lora_names"),
           py::arg("lora_paths"), py::arg("max_lora_rank"))
      .def("close", &Engine::close)
      .def("submit", &Engine::submit, py::arg("prompt_ids"), py::arg("max_tokens"), py::arg("temperature"),
           py::arg("top_k"), py::arg("top_p"), py::arg("min_p"), py::arg("seed"), py::arg("stop"),
           py::arg("stop_token_ids"), py::arg("ignore_eos"), py::arg("logprobs"), py::arg("lora_name") = std::nullopt,
           py::arg("presence_penalty") = 0.0f, py::arg("frequency_penalty") = 0.0f,
           py::arg("repetition_penalty") = 1.0f, py::arg("logit_bias") = std::vector<std::pair<int32_t, float>>{},
           py::arg("json_schema") = std::nullopt, py::arg("prompt_logprobs") = -1)
      .def("next_event", &Engine::next_event, py::arg("id"), py::arg("timeout_s") = -1.0)
      .def("cancel", &Engine::cancel, py::arg("id"))
      .def("release", &Engine::release, py::arg("id"));
}
