#include "engine/engine_loop.h"

#include <cstdio>

#include "core/error.h"

namespace aerie {

EngineLoop::EngineLoop(Engine& engine, int64_t max_in_flight, std::function<void()> on_idle)
    : engine_(engine), max_in_flight_(max_in_flight), on_idle_(std::move(on_idle)), metrics_(engine.metrics()) {
  AERIE_CHECK(max_in_flight >= 1, "the server's queue bound must be at least 1");
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() { stop(); }

std::vector<uint64_t> EngineLoop::submit(std::vector<EngineJob> jobs) {
  const int64_t n = int64_t(jobs.size());
  {
    std::lock_guard<std::mutex> lock(admit_mutex_);
    if (failed_.load()) throw Overloaded(503, "The engine has failed and cannot take requests; restart the server.");
    if (!admitting_.load()) throw Overloaded(503, "The server is shutting down.");
    if (in_flight_.load() + n > max_in_flight_) throw Overloaded(429, "The server is currently overloaded.");
    in_flight_ += n;
  }
  try {
    for (const EngineJob& job : jobs) engine_.check_request(job.prompt, job.options);
  } catch (...) {
    in_flight_ -= n;
    throw;
  }
  std::vector<uint64_t> ids;
  ids.reserve(jobs.size());
  {
    // Recorded before the loop thread can see them: their final events erase them.
    std::lock_guard<std::mutex> ids_lock(ids_mutex_);
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    for (EngineJob& job : jobs) {
      const uint64_t id = next_id_++;
      live_ids_.insert(id);
      ids.push_back(id);
      inbox_.push_back(Pending{id, std::move(job)});
    }
  }
  inbox_cv_.notify_all();
  return ids;
}

void EngineLoop::cancel(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    cancels_.push_back(id);
  }
  inbox_cv_.notify_all();
}

void EngineLoop::finished(uint64_t id) {
  std::lock_guard<std::mutex> lock(ids_mutex_);
  if (live_ids_.erase(id) == 0) return;
  --in_flight_;
  ids_cv_.notify_all();
}

void EngineLoop::refuse(Pending& pending, const std::string& error) {
  std::fprintf(stderr, "aerie: request %llu failed: %s\n", (unsigned long long)pending.id, error.c_str());
  TokenEvent event;
  event.request_id = pending.id;
  event.finished = true;
  event.finish_reason = FinishReason::kError;
  event.error = error;
  finished(pending.id);
  if (pending.job.on_event) pending.job.on_event(event);
}

void EngineLoop::take_in() {
  std::vector<Pending> incoming;
  std::vector<uint64_t> cancels;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    incoming.swap(inbox_);
    cancels.swap(cancels_);
  }
  for (Pending& pending : incoming) {
    // The request leaves the in-flight count before its last event is handed on, so that whoever hears
    // of the end finds it gone.
    EventCallback on_event = [this, user = pending.job.on_event](const TokenEvent& e) {
      if (e.finished) finished(e.request_id);
      if (user) user(e);
    };
    try {
      engine_.submit(std::move(pending.job.prompt), pending.job.options, std::move(on_event), pending.id);
    } catch (const std::exception& e) {
      refuse(pending, e.what());  // checked at submit(); here only when the engine's own queue is full
    }
  }
  for (uint64_t id : cancels) engine_.cancel(id);
}

std::string EngineLoop::failure() const {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  return failure_;
}

void EngineLoop::cancel_all() {
  std::lock_guard<std::mutex> lock(ids_mutex_);
  for (uint64_t id : live_ids_) cancel(id);
}

EngineMetrics EngineLoop::metrics() const {
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  return metrics_;
}

bool EngineLoop::wait_until_empty(std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock<std::mutex> lock(ids_mutex_);
  return ids_cv_.wait_until(lock, deadline, [this] { return live_ids_.empty(); });
}

void EngineLoop::run() {
  while (!stop_.load()) {
    bool worked = false;
    try {
      take_in();
      worked = engine_.step().worked;
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
    {
      const EngineMetrics& m = engine_.metrics();
      std::lock_guard<std::mutex> lock(metrics_mutex_);
      metrics_ = m;
    }
    if (!worked) {
      std::unique_lock<std::mutex> lock(inbox_mutex_);
      inbox_cv_.wait_for(lock, std::chrono::milliseconds(50),
                         [this] { return !inbox_.empty() || !cancels_.empty() || stop_.load(); });
    }
  }
}

void EngineLoop::stop() {
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    stop_.store(true);
  }
  inbox_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace aerie
