// What the engine keeps per sequence for speculation, beside the Sequence (which the scheduler owns): the
// drafter's state, the adaptive-K state, and whether it still speculates. Dropped with the sequence in
// one go (Engine::finish).
#pragma once

#include <memory>

#include "spec/adaptive_k.h"
#include "spec/proposer.h"

namespace aerie {

struct SpecState {
  std::unique_ptr<ProposerState> proposer;  // null without a drafter (spec/proposer.h)
  AdaptiveKState adaptive;                  // --num-speculative-tokens auto (engine/k_policy.h)
  // Plain decoding from now on: probing is dearer than it could find, the prompt is not worth the head's
  // pass over it (engine/k_policy.h), or the head fell too far behind (HeadProposer::kMaxDeferredRows).
  // A preempted sequence starts over.
  bool off = false;
  bool head_fed = false;  // the head has had rows of it (run or deferred) since it last started
};

}  // namespace aerie
