// The events of one HTTP request, which may run several engine requests (its choices, `n`): each engine
// event is tagged with its choice and pushed into the request's EventQueue on the loop thread
// (engine/engine_loop.h); the handler thread pops them, so no handler ever touches engine state.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine_loop.h"

namespace aerie::server {

// One engine event, tagged with the choice (sub-request) it belongs to.
struct ChoiceEvent {
  int choice = 0;
  std::vector<int64_t> tokens;
  std::vector<TokenLogprobs> logprobs;  // one per token when the request asked for them
  std::vector<PromptTokenLogprob> prompt_logprobs;  // prompt entries, in order across events (TokenEvent)
  bool finished = false;
  aerie::FinishReason finish_reason = aerie::FinishReason::kNone;
  std::string error;
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double mean_acceptance_length = 0.0;  // 1 + accepted / rounds; 0 when nothing was drafted
  SpecStats spec;                       // the choice's speculation figures, on the final event only
};

class EventQueue {
 public:
  void push(ChoiceEvent event);
  // Moves every queued event into `out` (appending); waits up to `timeout` when there is none. Returns
  // whether anything was moved.
  bool wait_pop(std::vector<ChoiceEvent>& out, std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<ChoiceEvent> events_;
};

struct SubmitJob {
  std::vector<int64_t> prompt;
  RequestOptions options;
  int choice = 0;
};

// Submits every choice through `loop` with events into `queue` (all or none: Overloaded, aerie::Error);
// returns the engine ids, in order.
std::vector<uint64_t> submit_choices(EngineLoop& loop, std::vector<SubmitJob> jobs, std::shared_ptr<EventQueue> queue);

}  // namespace aerie::server
