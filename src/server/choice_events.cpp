#include "server/choice_events.h"

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

std::vector<uint64_t> submit_choices(EngineLoop& loop, std::vector<SubmitJob> jobs, std::shared_ptr<EventQueue> queue) {
  std::vector<EngineJob> engine_jobs;
  engine_jobs.reserve(jobs.size());
  for (SubmitJob& job : jobs) {
    const int choice = job.choice;
    engine_jobs.push_back(EngineJob{std::move(job.prompt), std::move(job.options), [queue, choice](const TokenEvent& e) {
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
      queue->push(std::move(out));
    }});
  }
  return loop.submit(std::move(engine_jobs));
}

}  // namespace aerie::server
