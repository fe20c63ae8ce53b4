// --num-speculative-tokens K | auto | auto:N, shared by generate, serve, bench-accept and bench-engine.
// "auto" lets the engine choose K per sequence and step in 0..N (default kAutoMaxK) from the acceptance
// and step costs it measures (spec/adaptive_k.h): 0 where speculation does not pay.
#pragma once

#include <cstdint>
#include <string>

#include "cli/args.h"
#include "spec/spec_options.h"

namespace aerie::cli {

inline constexpr int64_t kAutoMaxK = 8;

// Sets spec.num_speculative_tokens and spec.adaptive_k from `text`; an aerie::Error naming the option for
// anything but a K in 1..32, "auto" or "auto:N" with N in 1..32.
void parse_num_speculative_tokens(const std::string& text, SpecOptions& spec);
// From --num-speculative-tokens, or K = `fallback` (fixed) when it is absent.
void apply_num_speculative_tokens(const Args& args, int64_t fallback, SpecOptions& spec);
// "3" or "auto:8", as the option takes it.
std::string num_speculative_tokens_text(const SpecOptions& spec);

}  // namespace aerie::cli
