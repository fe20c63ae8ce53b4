// Request: the engine's state for one request, over the Sequence the scheduler plans (sched/sequence.h):
// the options it was submitted with, its event callback, its sampling state, its speculation state and
// figures, and timing. The engine creates every Sequence of its scheduler as a Request, so a planned Sequence is always
// one (request_of).
#pragma once

#include <chrono>
#include <memory>

#include "engine/request.h"
#include "engine/spec_state.h"
#include "sample/sampling.h"
#include "sample/token_constraint.h"
#include "sched/sequence.h"
#include "sched/spec_stats.h"

namespace aerie {

struct Request : Sequence {
  RequestOptions options;
  EventCallback on_event;
  Rng rng{0};
  std::unique_ptr<TokenConstraint> constraint;  // this request's structured-output state (options' clone)
  bool thinking = false;  // inside the thinking phase (relaxed acceptance): options, then the tokens emitted
  SpecStats spec;
  SpecState speculation;  // the drafter's state for it, adaptive K, whether it still speculates

  // Timing.
  std::chrono::steady_clock::time_point submitted, first_scheduled, first_token_at, last_token_at;
  bool scheduled_seen = false;
  bool first_token_seen = false;
};

inline Request& request_of(Sequence& seq) { return static_cast<Request&>(seq); }
inline const Request& request_of(const Sequence& seq) { return static_cast<const Request&>(seq); }

}  // namespace aerie
