#include "cli/speculative_tokens.h"

#include <cstdio>

#include "core/error.h"
#include "spec/spec_options.h"

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
  AERIE_CHECK(used == k.size() && !k.empty() && value >= 1 && value <= kMaxDraftTokens,
              "--num-speculative-tokens: expected K in 1..", kMaxDraftTokens, ", auto or auto:N (N in 1..", kMaxDraftTokens,
              "), got '", text, "'");
  spec.num_speculative_tokens = value;
}

std::vector<SpecOptions> speculative_token_runs(const Args& args) {
  const std::string list = args.str("--num-speculative-tokens");
  std::vector<SpecOptions> runs;
  for (size_t start = 0;;) {
    const size_t end = list.find(',', start);
    SpecOptions spec;
    parse_num_speculative_tokens(list.substr(start, end == std::string::npos ? end : end - start), spec);
    runs.push_back(spec);
    if (end == std::string::npos) return runs;
    start = end + 1;
  }
}

std::string num_speculative_tokens_text(const SpecOptions& spec) {
  return spec.adaptive_k ? "auto:" + std::to_string(spec.num_speculative_tokens)
                         : std::to_string(spec.num_speculative_tokens);
}

void apply_tree_options(const Args& args, SpecOptions& spec) {
  if (!args.has("--spec-tree-top-k")) {
    for (const char* name : {"--spec-tree-depth", "--spec-tree-tokens", "--spec-tree-shape"})
      AERIE_CHECK(!args.has(name), name, " needs --spec-tree-top-k");
    return;
  }
  spec.tree = DraftTreeShape{args.integer("--spec-tree-top-k"), args.integer("--spec-tree-depth"),
                             args.integer("--spec-tree-tokens"), tree_score(args)};
  AERIE_CHECK(spec.tree.top_k >= 1, "--spec-tree-top-k must be at least 1");
  validate(spec.tree);
}

TreeScore tree_score(const Args& args) {
  return args.str("--spec-tree-shape") == "confidence" ? TreeScore::kConfidence : TreeScore::kLearned;
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
