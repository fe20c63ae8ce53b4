// EngineLoop: the thread-safe facade over the single-threaded Engine — what the server and an embedder
// use. Any thread submits requests (each with its event callback) and cancels them; one loop thread
// takes them in, runs engine.step() while there is work and sleeps while there is none. The callbacks run
// on the loop thread, between or inside steps, and must only hand the events on (e.g. into a queue).
//
// Admission is bounded: at most `max_in_flight` requests may be queued or running at once; beyond that
// submit() throws Overloaded (429 for the HTTP layer) instead of queuing without limit. A request the
// engine can never run is refused at submit() (aerie::Error), from the engine's own checks. Metrics are
// snapshotted on the loop thread after every step, so readers never race the step.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "engine/engine.h"

namespace aerie {

// Thrown by submit when the loop cannot take the request now: status 429 when full, 503 when it stops
// admitting (draining) or the engine has failed.
class Overloaded : public std::runtime_error {
 public:
  Overloaded(int status, const char* what) : std::runtime_error(what), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

struct EngineJob {
  std::vector<int64_t> prompt;
  RequestOptions options;
  EventCallback on_event;  // called on the loop thread; the last event has finished = true
};

class EngineLoop {
 public:
  // on_idle: called from the loop thread whenever a step found no work, before it waits for some (a
  // tensor-parallel driver's heartbeat to the other ranks: models/tensor_parallel_driver.h).
  EngineLoop(Engine& engine, int64_t max_in_flight, std::function<void()> on_idle = {});
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Submits all jobs or none (Overloaded, or aerie::Error for a request the engine can never run).
  // Returns their ids, in order.
  std::vector<uint64_t> submit(std::vector<EngineJob> jobs);
  // Cancels a request wherever it is; its last event (kCancelled) follows from the loop thread.
  void cancel(uint64_t id);

  EngineMetrics metrics() const;
  int64_t in_flight() const { return in_flight_.load(); }
  int64_t max_in_flight() const { return max_in_flight_; }
  // True once step() itself has thrown (a request's own failure never does: the engine fails that request
  // alone): the engine's state can no longer be trusted, and failure() says why.
  bool failed() const { return failed_.load(); }
  std::string failure() const;

  // Refuse new submissions from now on (503).
  void stop_admission() { admitting_.store(false); }
  // Waits until nothing is in flight or the deadline passes; true when nothing is.
  bool wait_until_empty(std::chrono::steady_clock::time_point deadline) const;
  // Cancels every request still in flight (their final events follow from the loop thread).
  void cancel_all();
  // Stops the loop thread (after the current step).
  void stop();

 private:
  struct Pending {
    uint64_t id;
    EngineJob job;
  };
  void run();
  // Takes the queued submissions and cancellations into the engine (loop thread).
  void take_in();
  // The last event of a request that never reached the engine.
  void refuse(Pending& pending, const std::string& error);
  void finished(uint64_t id);

  Engine& engine_;
  const int64_t max_in_flight_;
  std::function<void()> on_idle_;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<bool> admitting_{true};
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  mutable std::mutex failure_mutex_;
  std::string failure_;

  // Submissions and cancellations waiting for the loop thread.
  std::mutex inbox_mutex_;
  std::condition_variable inbox_cv_;
  std::vector<Pending> inbox_;
  std::vector<uint64_t> cancels_;
  uint64_t next_id_ = 1;  // under inbox_mutex_

  // Requests submitted and not yet finished.
  mutable std::mutex ids_mutex_;
  mutable std::condition_variable ids_cv_;
  std::unordered_set<uint64_t> live_ids_;
  std::mutex admit_mutex_;

  mutable std::mutex metrics_mutex_;
  EngineMetrics metrics_;

  std::thread thread_;
};

}  // namespace aerie
