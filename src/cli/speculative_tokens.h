// --num-speculative-tokens K | auto | auto:N, shared by generate, serve, bench-accept and bench-engine.
// "auto" lets the engine choose K per sequence and step in 0..N (default kAutoMaxK) from the acceptance
// and step costs it measures (spec/adaptive_k.h): 0 where speculation does not pay.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/args.h"
#include "spec/spec_options.h"

namespace aerie::cli {

inline constexpr int64_t kAutoMaxK = 8;

// Sets spec.num_speculative_tokens and spec.adaptive_k from `text`; an aerie::Error naming the option for
// anything but a K in 1..32, "auto" or "auto:N" with N in 1..32.
void parse_num_speculative_tokens(const std::string& text, SpecOptions& spec);
// --num-speculative-tokens as bench-spec and bench-engine take it: a comma-separated list, one run each.
std::vector<SpecOptions> speculative_token_runs(const Args& args);
// "3" or "auto:8", as the option takes it.
std::string num_speculative_tokens_text(const SpecOptions& spec);

// EAGLE-2 draft trees, named as SGLang names them: --spec-tree-top-k (speculative_eagle_topk; absent:
// chains), --spec-tree-depth (num_steps), --spec-tree-tokens (num_draft_tokens).
// spec.tree from those options; an aerie::Error for depth or tokens without top-k, or a shape out of range.
void apply_tree_options(const Args& args, SpecOptions& spec);
// "TOP_K:DEPTH:TOKENS" (bench-accept's --trees entries) -> a shape, checked.
// --spec-tree-shape: how greedy trees score their nodes (spec/draft_tree.h TreeScore).
TreeScore tree_score(const Args& args);
DraftTreeShape parse_tree_shape(const std::string& text);

}  // namespace aerie::cli
