#include "cli/speculative_tokens.h"

#include <cstdio>

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

std::vector<OptionSpec> tree_option_specs() {
  return {{"--spec-tree-top-k", true, "with an EAGLE head on a Llama target: draft EAGLE-2 trees, expanding the top "
                                      "k candidates of the k best nodes per level (default: chains of K)", integers(1, 16)},
          {"--spec-tree-depth", true, "with --spec-tree-top-k: the tree's levels (SGLang num_steps; default 5)", integers(1, 16)},
          {"--spec-tree-tokens", true, "with --spec-tree-top-k: nodes verified per round, the best by cumulative "
                                       "draft probability (SGLang num_draft_tokens; default 8)", integers(1, 64)}};
}

void apply_tree_options(const Args& args, SpecOptions& spec) {
  if (!args.has("--spec-tree-top-k")) {
    for (const char* name : {"--spec-tree-depth", "--spec-tree-tokens"})
      AERIE_CHECK(!args.has(name), name, " needs --spec-tree-top-k");
    return;
  }
  spec.tree = DraftTreeShape{args.integer("--spec-tree-top-k", 0), args.integer("--spec-tree-depth", 5),
                             args.integer("--spec-tree-tokens", 8)};
  AERIE_CHECK(spec.tree.top_k >= 1, "--spec-tree-top-k must be at least 1");
  validate(spec.tree);
}

DraftTreeShape parse_tree_shape(const std::string& text) {
  DraftTreeShape shape;
  char tail = 0;
  long long k = 0, depth = 0, tokens = 0;
  AERIE_CHECK(std::sscanf(text.c_str(), "%lld:%lld:%lld%c", &k, &depth, &tokens, &tail) == 3 && k >= 1,
              "a tree is TOP_K:DEPTH:TOKENS (e.g. 2:4:4), got '", text, "'");
  shape = DraftTreeShape{k, depth, tokens};
  validate(shape);
  return shape;
}

}  // namespace aerie::cli
