// One /v1/chat/completions or /v1/completions request on the engine: its n x prompts choices are separate
// engine requests feeding one EventQueue. The whole response (run_to_completion) and the SSE stream (pump)
// are both built from each choice's ChoiceStream events.
//
// Destroying a Generation cancels every choice that has not finished, so a client that disconnects (the
// HTTP library drops the response and its content provider) frees its KV blocks; it also writes the
// request's log line.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/backend.h"
#include "server/choice_stream.h"
#include "server/openai_response.h"
#include "server/openai_schema.h"

namespace aerie::server {

struct GenerationPrompt {
  std::vector<int64_t> ids;
  std::string echo;  // text released before the generated text (completions with echo)
  bool echo_is_text = false;  // the echo is the request's text, without the special tokens encoding added
};

// tool_choice "required" (a list of calls) or a named function (its arguments), read back from JSON the
// output was constrained to (server/forced_tool_calls.h).
enum class ForcedTools { kNone, kNamed, kList };

struct GenerationPlan {
  bool chat = true;
  std::string id;     // "chatcmpl-..." / "cmpl-..."
  std::string request_id;  // X-Request-Id (EndpointContext::request_id): in the log line
  int64_t created = 0;
  std::string model;  // the served model name
  std::vector<GenerationPrompt> prompts;  // chat: one
  int64_t n = 1;
  RequestOptions options;                 // max_tokens, sampling (seed of choice 0), stop ids, logprobs
  // Prompt log-probabilities (options.prompt_logprobs is the larger k): vLLM's prompt_logprobs field (its
  // k), and the echoed prompt's entries of completions with echo and logprobs (theirs); -1: not asked.
  int64_t prompt_logprobs = -1;
  int64_t echo_logprobs = -1;
  std::vector<std::uint64_t> seeds;       // per choice (index = prompt * n + j)
  std::vector<std::string> stop;
  std::optional<ToolParserKind> tool_parser;  // chat with tools (tool_choice auto): the family's format
  ForcedTools forced_tools = ForcedTools::kNone;  // tool_choice required / named: constrained JSON
  std::string forced_function;                    // the named function
  uint64_t tool_call_id_seed = 0;
  bool stream = false;
  bool include_usage = false;
  bool include_speculation = false;  // the usage carries the speculation figures (an aerie extension)
  // Chat with a reasoning parser (server/reasoning.h): <think> blocks become reasoning_content; the split
  // starts inside one when the rendered prompt opened it.
  bool reasoning = false;
  bool starts_in_reasoning = false;
};

class Generation {
 public:
  Generation(std::shared_ptr<Backend> backend, GenerationPlan plan, LogFunction log);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Submits every choice (throws Overloaded, or aerie::Error when the engine refuses the request).
  void start();

  // Waits for every choice and returns the chat.completion / text_completion body. Throws ApiError when
  // the engine failed a choice (500) or the server cancelled it while shutting down (503). `client_gone`,
  // asked a few times a second, says the client has hung up: then nullopt comes back at once, and
  // destroying the Generation cancels the choices.
  std::optional<OrderedJson> run_to_completion(const std::function<bool()>& client_gone = {});

  const GenerationPlan& plan() const { return plan_; }

  // Delivers an event as the engine loop would (tests drive a Generation this way without an engine).
  void deliver(ChoiceEvent event) { queue_->push(std::move(event)); }

  enum class Pump { kMore, kDone, kClientGone };
  // One round of the SSE stream: waits briefly for events and writes the chunks they make (a comment
  // line after a long silence, so that a vanished client is noticed). kDone after `data: [DONE]`.
  Pump pump(const std::function<bool(std::string_view)>& write);

 private:
  struct Choice {
    int index = 0;
    size_t prompt = 0;
    uint64_t engine_id = 0;
    std::unique_ptr<ChoiceStream> stream;
    std::vector<ToolEvent> events;  // non-streamed: everything; streamed: this round's
    std::vector<TokenLogprob> logprobs;  // non-streamed: every entry (when asked for)
    std::vector<PromptTokenLogprob> prompt_entries;  // the engine's prompt log-probabilities so far
    bool opened = false;  // with prompt log-probabilities: its first chunk (or whole-response echo) is out
    int64_t text_offset = 0;             // completions streamed: echo + text of the entries sent so far
    bool started = false;           // role chunk sent (chat stream)
    bool stop_cancelled = false;    // cancelled by us after a stop string
    bool reported = false;          // finish chunk sent / final state recorded
    bool finished = false;          // the engine's final event came
    aerie::FinishReason engine_reason = aerie::FinishReason::kNone;
    FinishReason reason = FinishReason::kStop;  // what the client is told
    std::optional<std::string> stop_string;     // the stop string that ended it (vLLM's stop_reason)
    std::string error;                          // the choice failed (engine error, or cancelled by the server)
    double acceptance_length = 0.0;  // 0: no drafts verified
    SpecStats spec;                  // from the final event
  };

  void on_event(ChoiceEvent& event, std::string* sse);
  // A choice with prompt log-probabilities opens once they are all in (the last prompt chunk's come with
  // the first token): its echo and their entries go first in the whole response; streamed, its first chunk
  // (the role chunk of chat, the echo of completions) carries them, as prompt_logprobs.
  void open_with_prompt_logprobs(Choice& choice, std::string* sse);
  OrderedJson prompt_logprobs_json(const Choice& choice) const;
  void finish_choice(Choice& choice, std::string* sse);
  // sse null: keep the events for the whole response; otherwise append the SSE chunks they make.
  void append_events(Choice& choice, std::vector<ToolEvent>& events, std::optional<FinishReason> finish,
                     std::string* sse);
  // The logprobs object of a chunk releasing `entries` (null when the request did not ask for them).
  OrderedJson logprobs_json(Choice& choice, const std::vector<TokenLogprob>& entries) const;
  bool wants_logprobs() const { return plan_.options.logprobs >= 0; }
  bool wants_prompt_logprobs() const { return plan_.options.prompt_logprobs >= 0; }
  bool all_finished() const;
  bool all_reported() const;
  Usage usage() const;
  std::optional<ApiError> failure() const;
  void write_log(std::string_view outcome);

  std::shared_ptr<Backend> backend_;
  GenerationPlan plan_;
  LogFunction log_;
  std::shared_ptr<EventQueue> queue_;
  std::vector<Choice> choices_;
  std::chrono::steady_clock::time_point start_, first_token_, last_write_;
  bool have_first_token_ = false;
  bool submitted_ = false;
  bool done_ = false;
  bool client_gone_ = false;
  bool opened_ = false;
};

}  // namespace aerie::server
