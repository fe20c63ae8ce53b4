// How a sequence speculates: K drafts per target forward, how the drafts are proposed, and an optional
// synthetic acceptance rate for performance tests. The engine (src/engine/engine.h) runs the round.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "sample/sampling.h"
#include "spec/draft_tree.h"
#include "spec/verify.h"

namespace aerie {

struct AdaptiveKMemory;  // spec/adaptive_k.h

// The most drafts a round may carry (K), whatever chooses it: --num-speculative-tokens, its per-batch-size
// ranges, auto (spec/adaptive_k.h). Checked once, where the K policy is made (engine/k_policy.h).
inline constexpr int64_t kMaxDraftTokens = 32;

// A rank-2 child's synthetic acceptance once the rank-1 child was rejected. An assumption, not a measurement
// of a trained EAGLE head: Medusa's first head is right ~60% at top 1 and over 80% at top 5 (Cai et al.
// 2024, "Medusa", on tree attention), so the second rank catches roughly a quarter to a third of what the
// first misses; later ranks are given the same rate here, which flatters wide trees.
inline constexpr double kDefaultSyntheticSiblingRate = 0.3;

enum class DraftProposal {
  kSampled,  // T > 0: drafts drawn from the head's processed distribution, verified by rejection sampling
  kArgmax,   // drafts are the head's argmax, verified by drawing from the target and comparing
};

struct SpecOptions {
  int64_t num_speculative_tokens = 3;  // K; with adaptive_k the most a sequence drafts
  // --num-speculative-tokens auto: K chosen per sequence and round in 0..num_speculative_tokens from the
  // measured acceptance and step costs (spec/adaptive_k.h, engine/k_policy.h).
  bool adaptive_k = false;
  // With adaptive_k: the costs and acceptance learned so far, shared by the engines given the same object
  // one after another (spec/adaptive_k.h, AdaptiveKMemory); null: each engine learns from nothing.
  std::shared_ptr<AdaptiveKMemory> adaptive_memory;
  DraftProposal proposal = DraftProposal::kSampled;
  // In [0, 1]: synthetic acceptance for performance tests (output is not the target's). Negative: off.
  double synthetic_acceptance = -1.0;
  // With it, the synthetic model's per-level factor and sibling rate (spec/verify.h, SyntheticAcceptance):
  // the draft at depth d is accepted with synthetic_acceptance * decay^(d-1); a tree's rank-2+ child, after
  // its earlier siblings were rejected, with the sibling rate.
  double synthetic_depth_decay = 1.0;
  double synthetic_sibling_rate = kDefaultSyntheticSiblingRate;
  // Relaxed acceptance inside the thinking phase (spec/verify.h; lossy, off when empty): between the
  // tokens think_begin_token and think_end_token (a sequence starts inside when its request says so).
  std::optional<RelaxedAcceptance> relaxed_thinking;
  int64_t think_begin_token = -1, think_end_token = -1;
  // EAGLE-2 dynamic draft trees (spec/draft_tree.h) instead of a chain of K, for heads that take tree
  // rows (EAGLE-1/3 on Llama targets). Requests (greedy or sampled) without penalties or structured output draft
  // trees; the others draft a chain of K. With adaptive_k, the tree (or one cut shallower) or a chain, each
  // round, whichever is expected faster (spec/adaptive_tree.h).
  DraftTreeShape tree;
};

// Throws aerie::Error unless K is in [1, kMaxDraftTokens], the synthetic acceptance, depth decay and sibling rate are
// at most 1 (the last two also >= 0) and a tree's shape is valid.
void validate(const SpecOptions& spec);

// The synthetic acceptance model of these options (its rate 0 when synthetic acceptance is off).
SyntheticAcceptance synthetic_model(const SpecOptions& spec);

// How a sequence with these sampling parameters verifies its drafts: greedy at T = 0, rejection sampling
// for sampled proposals, target-match for argmax proposals; synthetic in performance tests. Without a
// draft head a sampled token is a plain draw (kTargetMatch over no drafts).
AcceptRule accept_rule(const SamplingParams& sampling, const SpecOptions& spec, bool has_draft);

// Whether a sequence drafts an EAGLE-2 tree rather than a chain: trees are on and its request has no
// penalties, no structured output and no relaxed acceptance (spec/tree_verify.h verifies greedy, sampled
// and synthetic trees).
bool drafts_tree(const SpecOptions& spec, bool constrained, bool penalised);

}  // namespace aerie
