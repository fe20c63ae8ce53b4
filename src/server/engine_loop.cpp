#include "server/engine_loop.h"

#include <cstdio>

#include "core/error.h"

namespace aerie::server {

void EventQueue::push(ChoiceEvent event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

bool EventQueue::wait_pop(std::vector<ChoiceEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_for(lock, timeout, [this] { return !events_.empty(); });
  if (events_.empty()) return false;
  for (ChoiceEvent& event : events_) out.push_back(std::move(event));
  events_.clear();
  return true;
}

EngineLoop::EngineLoop(Engine& engine, int64_t max_in_flight, std::function<void()> on_idle)
    : engine_(engine), max_in_flight_(max_in_flight), on_idle_(std::move(on_idle)), metrics_(engine.metrics()) {
  AERIE_CHECK(max_in_flight >= 1, "the server's queue bound must be at least 1");
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() { stop(); }

std::vector<uint64_t> EngineLoop::submit(std::vector<SubmitJob> jobs, std::shared_ptr<EventQueue> queue) {
  const int64_t n = int64_t(jobs.size());
  {
    std::lock_guard<std::mutex> lock(admit_mutex_);
    if (failed_.load()) throw Overloaded(503, "The engine has failed and cannot take requests; restart the server.");
    if (!admitting_.load()) throw Overloaded(503, "The server is shutting down.");
    if (in_flight_.load() + n > max_in_flight_) throw Overloaded(429, "The server is currently overloaded.");
    in_flight_ += n;
  }
  std::vector<uint64_t> ids;
  try {
    for (SubmitJob& job : jobs) {
      const int choice = job.choice;
      // Held across submit + insert: the final event (on the loop thread) erases the id, so it must not
      // run before the id is recorded.
      std::lock_guard<std::mutex> lock(ids_mutex_);
      const uint64_t id = engine_.submit(std::move(job.prompt), job.options, [this, queue, choice](const TokenEvent& e) {
        ChoiceEvent out;
        out.choice = choice;
        out.tokens = e.tokens;
        out.logprobs = e.logprobs;
        out.prompt_logprobs = e.prompt_logprobs;
        out.finished = e.finished;
        out.finish_reason = e.finish_reason;
        out.error = e.error;
        out.prompt_tokens = e.prompt_tokens;
        out.cached_prompt_tokens = e.cached_prompt_tokens;
        out.generated_tokens = e.generated_tokens;
        out.mean_acceptance_length = e.spec != nullptr && e.spec->rounds > 0 ? e.spec->mean_acceptance_length() : 0.0;
        if (e.finished && e.spec != nullptr) out.spec = *e.spec;
        if (e.finished) {
          std::lock_guard<std::mutex> ids_lock(ids_mutex_);
          live_ids_.erase(e.request_id);
          --in_flight_;
          ids_cv_.notify_all();
        }
        queue->push(std::move(out));
      });
      live_ids_.insert(id);
      ids.push_back(id);
    }
  } catch (...) {
    in_flight_ -= n - int64_t(ids.size());
    for (uint64_t id : ids) engine_.cancel(id);
    throw;
  }
  return ids;
}

void EngineLoop::cancel(uint64_t id) { engine_.cancel(id); }

std::string EngineLoop::failure() const {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  return failure_;
}

void EngineLoop::cancel_all() {
  std::lock_guard<std::mutex> lock(ids_mutex_);
  for (uint64_t id : live_ids_) engine_.cancel(id);
}

EngineMetrics EngineLoop::metrics() const {
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  return metrics_;
}

bool EngineLoop::wait_until_empty(std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock<std::mutex> lock(ids_mutex_);
  return ids_cv_.wait_until(lock, deadline, [this] { return live_ids_.empty(); });
}

void EngineLoop::snapshot() {
  EngineMetrics m = engine_.metrics();
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  metrics_ = std::move(m);
}

void EngineLoop::run() {
  while (!stop_.load()) {
    bool worked = false;
    try {
      worked = engine_.step();
      if (!worked && on_idle_) on_idle_();
    } catch (const std::exception& e) {
      // A step that throws leaves the engine in an unknown state: stop taking requests, cancel the live
      // ones and keep stepping so that their final events (and the HTTP responses) still come.
      {
        std::lock_guard<std::mutex> lock(failure_mutex_);
        if (failure_.empty()) failure_ = std::string("engine step failed: ") + e.what();
      }
      if (!failed_.exchange(true)) std::fprintf(stderr, "aerie serve: engine step failed: %s\n", e.what());
      cancel_all();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    snapshot();
    if (!worked) engine_.wait_for_work(std::chrono::milliseconds(50));
  }
}

void EngineLoop::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

}  // namespace aerie::server
