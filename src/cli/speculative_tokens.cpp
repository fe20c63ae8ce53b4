#include "cli/speculative_tokens.h"

#include "core/error.h"

namespace aerie::cli {

void parse_num_speculative_tokens(const std::string& text, SpecOptions& spec) {
  std::string k = text;
  spec.adaptive_k = text.rfind("auto", 0) == 0;
  if (spec.adaptive_k) {
    AERIE_CHECK(text == "auto" || text.rfind("auto:", 0) == 0, "--num-speculative-tokens: expected K, auto or auto:N, got '",
                text, "'");
    k = text == "auto" ? std::to_string(kAutoMaxK) : text.substr(5);
  }
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(k, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  AERIE_CHECK(used == k.size() && !k.empty() && value >= 1 && value <= 32,
              "--num-speculative-tokens: expected K in 1..32, auto or auto:N (N in 1..32), got '", text, "'");
  spec.num_speculative_tokens = value;
}

void apply_num_speculative_tokens(const Args& args, int64_t fallback, SpecOptions& spec) {
  if (args.has("--num-speculative-tokens")) return parse_num_speculative_tokens(args.str("--num-speculative-tokens"), spec);
  spec.num_speculative_tokens = fallback;
  spec.adaptive_k = false;
}

std::string num_speculative_tokens_text(const SpecOptions& spec) {
  return spec.adaptive_k ? "auto:" + std::to_string(spec.num_speculative_tokens)
                         : std::to_string(spec.num_speculative_tokens);
}

}  // namespace aerie::cli
