#include "spec/spec_options.h"

#include <algorithm>

#include "core/error.h"

namespace aerie {

void validate(const SpecOptions& spec) {
  AERIE_CHECK(spec.num_speculative_tokens >= 1 && spec.num_speculative_tokens <= kMaxDraftTokens,
              "num_speculative_tokens must be in [1, ", kMaxDraftTokens, "], got ", spec.num_speculative_tokens);
  AERIE_CHECK(spec.synthetic_acceptance <= 1.0, "synthetic acceptance must be in [0, 1], got ",
              spec.synthetic_acceptance);
  AERIE_CHECK(spec.synthetic_depth_decay >= 0.0 && spec.synthetic_depth_decay <= 1.0,
              "synthetic depth decay must be in [0, 1], got ", spec.synthetic_depth_decay);
  AERIE_CHECK(spec.synthetic_sibling_rate >= 0.0 && spec.synthetic_sibling_rate <= 1.0,
              "synthetic sibling rate must be in [0, 1], got ", spec.synthetic_sibling_rate);
  if (spec.relaxed_thinking) {
    validate(*spec.relaxed_thinking);
    AERIE_CHECK(spec.think_end_token >= 0, "relaxed thinking acceptance needs the token that ends the thinking phase");
  }
  validate(spec.tree);
}

SyntheticAcceptance synthetic_model(const SpecOptions& spec) {
  return {std::max(0.0, spec.synthetic_acceptance), spec.synthetic_depth_decay, spec.synthetic_sibling_rate};
}

AcceptRule accept_rule(const SamplingParams& sampling, const SpecOptions& spec, bool has_draft) {
  if (has_draft && spec.synthetic_acceptance >= 0.0) return AcceptRule::kSynthetic;
  if (sampling.greedy()) return AcceptRule::kGreedy;
  if (!has_draft) return AcceptRule::kTargetMatch;
  return spec.proposal == DraftProposal::kSampled ? AcceptRule::kRejection : AcceptRule::kTargetMatch;
}

bool drafts_tree(const SpecOptions& spec, bool constrained, bool penalised) {
  return spec.tree.enabled() && !constrained && !penalised && !spec.relaxed_thinking;
}

}  // namespace aerie
