// The serving loop: one thread that runs engine.step() while there is work and sleeps in
// engine.wait_for_work() while there is none. HTTP handler threads submit requests here and read their
// token events from an EventQueue (mutex + condition variable); the engine's callbacks run on the loop
// thread and only push into those queues, so no handler ever touches engine state.
//
// Admission is bounded: at most `max_in_flight` engine requests may be queued or running at once; beyond
// that submit() throws Overloaded (the HTTP layer answers 429 with Retry-After) instead of queuing without
// limit. Engine metrics are snapshotted on the loop thread after every step, so readers never race the
// step thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "engine/engine.h"

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

// The events of one HTTP request (all its choices).
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

// Thrown by submit when the server cannot take the request now (429 when full, 503 when draining).
class Overloaded : public std::runtime_error {
 public:
  Overloaded(int status, const char* what) : std::runtime_error(what), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

struct SubmitJob {
  std::vector<int64_t> prompt;
  RequestOptions options;
  int choice = 0;
};

class EngineLoop {
 public:
  // on_idle: called from the loop thread whenever a step found no work, before it waits for some (a
  // tensor-parallel driver's heartbeat to the other ranks: models/tensor_parallel_driver.h).
  EngineLoop(Engine& engine, int64_t max_in_flight, std::function<void()> on_idle = {});
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Submits all jobs or none: admission for the whole set is checked first (Overloaded), and when the
  // engine refuses one (aerie::Error) the ones already queued are cancelled. Returns the engine ids.
  std::vector<uint64_t> submit(std::vector<SubmitJob> jobs, std::shared_ptr<EventQueue> queue);
  void cancel(uint64_t id);

  EngineMetrics metrics() const;
  int64_t in_flight() const { return in_flight_.load(); }
  int64_t max_in_flight() const { return max_in_flight_; }
  const Engine& engine() const { return engine_; }
  // True once step() itself has thrown (a request's own failure never does: the engine fails that request
  // alone): the engine's state can no longer be trusted, and failure() says why.
  bool failed() const { return failed_.load(); }
  std::string failure() const;

  // Refuse new submissions from now on (503).
  void stop_admission() { admitting_.store(false); }
  // Waits until nothing is in flight or the deadline passes; true when nothing is.
  bool wait_until_empty(std::chrono::steady_clock::time_point deadline) const;
  // Cancels every request still in flight (their final events follow from the next step).
  void cancel_all();
  // Stops the loop thread (after the current step).
  void stop();

 private:
  void run();
  void snapshot();

  Engine& engine_;
  const int64_t max_in_flight_;
  std::function<void()> on_idle_;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<bool> admitting_{true};
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  mutable std::mutex failure_mutex_;
  std::string failure_;

  mutable std::mutex ids_mutex_;
  mutable std::condition_variable ids_cv_;
  std::unordered_set<uint64_t> live_ids_;
  std::mutex admit_mutex_;

  mutable std::mutex metrics_mutex_;
  EngineMetrics metrics_;

  std::thread thread_;
};

}  // namespace aerie::server
