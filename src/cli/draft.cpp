#include "cli/draft.h"

#include "cli/common.h"

#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "spec/drafter_registry.h"

namespace aerie::cli {
namespace {

// --ngram-min / --ngram-max as vLLM reads prompt_lookup_min / _max: one given sets the other.
NgramOptions ngram_options(const Args& args, const std::string& draft) {
  NgramOptions o;
  const bool has_min = args.has("--ngram-min"), has_max = args.has("--ngram-max");
  AERIE_CHECK(draft == kNgramDraftName || !(has_min || has_max), has_min ? "--ngram-min" : "--ngram-max",
              " needs --draft ", kNgramDraftName);
  if (has_min) o.min_n = o.max_n = args.integer("--ngram-min");
  if (has_max) {
    o.max_n = args.integer("--ngram-max");
    if (!has_min) o.min_n = o.max_n;
  }
  return o;
}

// The suffix index's flags: with --draft suffix, or beside a head with --suffix-draft.
SuffixOptions suffix_options(const Args& args, const std::string& draft, bool beside_head) {
  SuffixOptions o;
  const bool used = draft == kSuffixDraftName || beside_head;
  for (const char* name : {"--suffix-min-match", "--suffix-factor", "--suffix-cache-tokens", "--suffix-head-k"})
    AERIE_CHECK(used || !args.has(name), name, " needs --draft ", kSuffixDraftName, " or --suffix-draft beside a head");
  AERIE_CHECK(beside_head || !args.has("--suffix-head-k"), "--suffix-head-k needs --suffix-draft (a head beside the index)");
  if (args.has("--suffix-min-match")) o.min_match = args.integer("--suffix-min-match");
  if (args.has("--suffix-factor")) o.factor = args.number("--suffix-factor");
  if (args.has("--suffix-cache-tokens")) o.cache_tokens = args.integer("--suffix-cache-tokens");
  if (args.has("--suffix-head-k")) o.head_k = args.integer("--suffix-head-k");
  return o;
}

std::string layers_text(const DraftHead& head) {
  std::string layers;
  for (int l : head.target_layers()) {
    if (!layers.empty()) layers += ',';
    layers += l == kFinalNormLayer ? std::string("final_norm") : std::to_string(l);
  }
  return layers;
}

}  // namespace

std::unique_ptr<Drafter> load_draft_verbose(const Args& args, const Model& target, ThreadPool& pool, bool quiet,
                                            const std::filesystem::path& fallback) {
  const std::string draft = args.has("--draft") ? args.str("--draft") : fallback.string();
  const NgramOptions ngram = ngram_options(args, draft);
  const bool beside_head = args.has("--suffix-draft");
  AERIE_CHECK(!beside_head || !(draft.empty() || draft == "none"), "--suffix-draft needs --draft DIR (a head, a draft "
              "model or mtp) to go beside (--draft ", kSuffixDraftName, " drafts from the index alone)");
  const SuffixOptions suffix = suffix_options(args, draft, beside_head);
  if (draft.empty() || draft == "none") return nullptr;
  DraftLoadOptions options;
  if (args.has("--draft-layers"))
    for (int64_t layer : args.integers("--draft-layers")) options.target_layers.push_back(int(layer));
  options.aux_layer_ids_are_outputs = args.has("--draft-layer-ids-are-outputs");
  const WeightChoice weights = weight_choice(args);  // the head's format follows the target's unless given
  options.weights = args.has("--draft-weights") ? parse_weight_format(args.str("--draft-weights"), "--draft-weights")
                                                : weights.format;
  options.int8_group = weights.int8_group;
  options.int4_group = weights.int4_group;
  options.ngram = ngram;
  options.suffix = suffix;
  options.suffix_beside_head = beside_head;
  if (args.has("--model")) options.target_dir = args.str("--model");  // a draft model's tokenizer is compared
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Drafter> drafter = load_any_drafter(draft, target, pool, options);  // a folder, "mtp", "ngram" or "suffix"
  if (!quiet) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const DraftHead* head = drafter->as_head();
    std::fprintf(stderr, "loaded draft %s in %.2f s (%s%s)\n", draft.c_str(), seconds, drafter->describe().c_str(),
                 head ? ("; fuses target layers " + layers_text(*head)).c_str() : "");
  }
  return drafter;
}

DraftProposal draft_proposal(const Args& args, Drafter& drafter) {
  const std::string proposal = args.str("--draft-proposal");  // sampled or argmax: its choices (cli/options.cpp)
  AERIE_CHECK(!(drafter.as_token_drafter() && args.has("--draft-proposal") && proposal == "sampled"),
              "--draft-proposal sampled does not apply to ", drafter.describe(),
              ": its drafts are deterministic, verified as argmax proposals");
  return proposal == "sampled" ? DraftProposal::kSampled : DraftProposal::kArgmax;
}

}  // namespace aerie::cli
