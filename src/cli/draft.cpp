#include "cli/draft.h"

#include "cli/common.h"

#include <chrono>
#include <cstdio>

#include "spec/drafter_registry.h"

namespace aerie::cli {

std::vector<OptionSpec> draft_options() {
  return {
      {"--draft", true, "EAGLE-1 or EAGLE-3 draft head folder, 'mtp' (a DeepSeek-V3 target's own MTP layer), or 'none'"},
      {"--draft-layers", true, "target layers an EAGLE-3 head fuses, e.g. 2,16,29 (default: its config)"},
      {"--draft-layer-ids-are-outputs", false, "the head's eagle_aux_hidden_state_layer_ids count layer outputs (SGLang): add 1"},
  };
}

std::unique_ptr<DraftHead> load_draft_verbose(const Args& args, const Model& target, ThreadPool& pool, bool quiet,
                                              const std::filesystem::path& fallback) {
  const std::string draft = args.has("--draft") ? args.str("--draft") : fallback.string();
  if (draft.empty() || draft == "none") return nullptr;
  DraftLoadOptions options;
  if (args.has("--draft-layers"))
    for (int64_t layer : args.integers("--draft-layers")) options.target_layers.push_back(int(layer));
  options.aux_layer_ids_are_outputs = args.has("--draft-layer-ids-are-outputs");
  const WeightChoice weights = weight_choice(args);  // the head's format follows the target's
  options.weights = weights.format;
  options.int8_group = weights.int8_group;
  options.int4_group = weights.int4_group;
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<DraftHead> head = load_drafter(draft, target, pool, options);  // a folder, or "mtp"
  if (!quiet) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string layers;
    for (int l : head->target_layers()) {
      if (!layers.empty()) layers += ',';
      layers += l == kFinalNormLayer ? std::string("final_norm") : std::to_string(l);
    }
    std::fprintf(stderr, "loaded draft %s in %.2f s (%s; fuses target layers %s)\n", draft.c_str(),
                 seconds, head->describe().c_str(), layers.c_str());
  }
  return head;
}

}  // namespace aerie::cli
