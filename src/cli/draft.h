// Drafter options shared by generate, serve, logits and the benches (declared in cli/options.cpp):
//   --draft DIR                       an EAGLE-1 / EAGLE-3 head for the --model target (MHA, or MLA for a
//                                     DeepSeek-V3 target)
//   --draft none                      no draft (where a command has a default one)
//   --draft mtp                       a DeepSeek-V3 target's own MTP layer (model.layers.{L}.*)
//   --draft ngram                     prompt lookup (spec/ngram_drafter.h), for any target:
//     --ngram-min N --ngram-max M     the gram lengths it matches, longest first (vLLM's
//                                     prompt_lookup_min/max; giving one sets the other to it)
//   --draft suffix                    a suffix index over the sequence and earlier requests
//                                     (spec/suffix_drafter.h), for any target: --suffix-min-match,
//                                     --suffix-factor, --suffix-cache-tokens
//   --draft DIR --suffix-draft        the suffix index beside a head (spec/suffix_head.h): the index
//                                     drafts on a long match, the head (K: --suffix-head-k) elsewhere
//   --draft-layers 2,16,29            target layers an EAGLE-3 head fuses (residual entering layer i)
//   --draft-layer-ids-are-outputs     the head config's eagle_aux_hidden_state_layer_ids count layer outputs
//                                     (SGLang convention): add 1 to each
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/args.h"
#include "core/thread_pool.h"
#include "models/model.h"
#include "spec/draft_head.h"
#include "spec/spec_options.h"

namespace aerie::cli {

// Loads --draft for `target`, printing a summary unless quiet. Null when --draft is "none", or absent and
// `fallback` is empty; when --draft is absent, `fallback` (a head folder) is loaded instead.
std::unique_ptr<Drafter> load_draft_verbose(const Args& args, const Model& target, ThreadPool& pool, bool quiet,
                                            const std::filesystem::path& fallback = {});

// --draft-proposal (sampled or argmax) for `drafter`. A token drafter proposes
// deterministically (always verified as argmax proposals): an explicit "sampled" is refused.
DraftProposal draft_proposal(const Args& args, Drafter& drafter);

}  // namespace aerie::cli
