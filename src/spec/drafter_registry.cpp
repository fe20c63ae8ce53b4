#include "spec/drafter_registry.h"

#include <algorithm>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/eagle_config.h"
#include "io/json_file.h"
#include "io/mla_head_config.h"
#include "models/deepseek_v3.h"
#include "quant/int4_weights.h"
#include "quant/quantize.h"
#include "spec/draft_model.h"
#include "spec/eagle_head.h"
#include "spec/fused_layers.h"
#include "spec/head_names.h"
#include "spec/mla_head.h"
#include "spec/mtp_drafter.h"
#include "spec/ngram_drafter.h"
#include "spec/suffix_head.h"

namespace aerie {
namespace {

// One row of the table in the header: what picks the entry and what it needs of its target.
struct DrafterEntry {
  DrafterKind kind;
  const char* name;
  std::vector<std::string> architectures;  // config.json architectures[0] that pick it (MTP, n-gram: none)
  std::vector<ModelFamily> targets;        // the target families it fits
  bool final_hidden_only;  // reads only the target's final-normed hidden state: no target layers to choose
                           // (the n-gram drafter reads none: refused in load_ngram)
  bool int4;               // --weights int4 quantises its projections (else refused)
  const char* reads;       // why its hidden size must be the target's (heads in a folder)
};

const std::vector<DrafterEntry>& entries() {
  static const std::vector<DrafterEntry> table = {
      {DrafterKind::kEagle1, "EAGLE-1 head", {"LlamaForCausalLM", "LlamaForCausalLMEagle"}, {ModelFamily::kLlama},
       true, true, "the head reads the target's final hidden state and logits through its lm_head"},
      {DrafterKind::kEagle3Mha, "EAGLE-3 MHA head", {"LlamaForCausalLMEagle3"},
       {ModelFamily::kLlama, ModelFamily::kDeepseekV3}, false, true, "fc reads the target's hidden states"},
      {DrafterKind::kEagle3Mla, "EAGLE-3 MLA head", {"Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM"},
       {ModelFamily::kDeepseekV3}, false, true, "fc reads the target's hidden states"},
      {DrafterKind::kMtp, "MTP layer", {}, {ModelFamily::kDeepseekV3}, true, false, nullptr},
      {DrafterKind::kNgram, "n-gram drafter", {}, {ModelFamily::kLlama, ModelFamily::kDeepseekV3}, false, false,
       nullptr},
      {DrafterKind::kSuffix, "suffix drafter", {}, {ModelFamily::kLlama, ModelFamily::kDeepseekV3}, false, false,
       nullptr},
      // Picked before the heads by is_draft_model_folder (a full LlamaForCausalLM or DeepseekV3ForCausalLM).
      {DrafterKind::kDraftModel, "draft model", {}, {ModelFamily::kLlama, ModelFamily::kDeepseekV3}, false, true,
       nullptr},
  };
  return table;
}

const DrafterEntry& entry_of(DrafterKind kind) {
  for (const DrafterEntry& e : entries())
    if (e.kind == kind) return e;
  throw Error("drafter registry: no entry for a drafter kind");  // unreachable: every kind has a row
}

const char* family_title(ModelFamily family) { return family == ModelFamily::kLlama ? "Llama" : "DeepSeek-V3"; }

// A head folder, identified: its entry, its parsed config and its tensors (mapped, not yet read).
struct HeadFolder {
  const DrafterEntry* entry = nullptr;
  std::string source;  // DIR/config.json
  std::string architecture;
  std::optional<EagleConfig> eagle;  // EAGLE-1 and EAGLE-3 MHA heads
  std::optional<MlaHeadConfig> mla;  // EAGLE-3 MLA heads
  WeightStore store;
};

std::string supported_architectures() {
  std::string s;
  for (const DrafterEntry& e : entries()) {
    if (e.architectures.empty()) continue;
    for (const std::string& a : e.architectures) s += a + ", ";
    s.resize(s.size() - 2);
    s += str_cat(" (", e.name, "); ");
  }
  return s + "--draft " + kMtpDraftName + " (" + entry_of(DrafterKind::kMtp).name + "); --draft " + kNgramDraftName +
         " (" + entry_of(DrafterKind::kNgram).name + "); or --draft " + kSuffixDraftName + " (" +
         entry_of(DrafterKind::kSuffix).name + ")";
}

// The entry config.json's architecture picks; an EAGLE-1 architecture over EAGLE-3 tensors is an EAGLE-3
// head (checkpoints published as LlamaForCausalLM with midlayer.*), decided in open_head_folder.
const DrafterEntry& entry_for_architecture(const std::string& architecture, const std::string& source) {
  for (const DrafterEntry& e : entries())
    if (std::find(e.architectures.begin(), e.architectures.end(), architecture) != e.architectures.end()) return e;
  throw Error(str_cat(source, ": unknown draft head architecture '", architecture,
                      "' (supported: ", supported_architectures(), ")"));
}

HeadFolder open_head_folder(const std::filesystem::path& dir, const ProgressFn& progress) {
  HeadFolder f;
  f.source = (dir / "config.json").string();
  const nlohmann::json json = read_json_file(dir / "config.json", " (--draft takes a head folder, 'mtp', 'ngram' or 'suffix')");
  AERIE_CHECK(json.is_object() && json.contains("architectures") && json["architectures"].is_array() &&
                  !json["architectures"].empty() && json["architectures"][0].is_string(),
              f.source, ": missing key 'architectures'");
  f.architecture = json["architectures"][0].get<std::string>();
  f.entry = &entry_for_architecture(f.architecture, f.source);
  if (f.entry->kind == DrafterKind::kEagle3Mla)
    f.mla = parse_mla_head_config(json, f.source);
  else
    f.eagle = parse_eagle_config(json, f.source);
  f.store = WeightStore::open_dir(dir, progress);
  if (f.entry->kind == DrafterKind::kEagle1 && has_eagle3_tensors(f.store))
    f.entry = &entry_of(DrafterKind::kEagle3Mha);
  return f;
}

// The widths and vocabulary a head was trained against, as its config states them.
struct HeadClaims {
  int64_t reads_n_embd = 0;
  const char* reads_key = "hidden_size";  // the config key reads_n_embd came from
  int64_t n_vocab = 0;
};

// The checks every entry shares: the target's family, then (for heads in a folder) the hidden size the
// head reads and the vocabulary, then the target layers it may be given. `subject` starts each message.
void check_fits(const DrafterEntry& e, const std::string& subject, const std::string& source,
                const std::optional<HeadClaims>& claims, const Model& target, const DraftLoadOptions& options) {
  if (std::find(e.targets.begin(), e.targets.end(), target.family()) == e.targets.end()) {
    std::string wanted;
    for (ModelFamily f : e.targets) wanted += str_cat(wanted.empty() ? "" : " or ", family_title(f));
    throw Error(str_cat(subject, " needs a ", wanted, " target; the target is ", model_family_name(target.family()),
                        " (", target.architecture(), ")"));
  }
  if (claims) {
    AERIE_CHECK(claims->reads_n_embd == target.n_embd(), source, ": ", e.name, " ", claims->reads_key, " ",
                claims->reads_n_embd, " does not match the target's hidden_size ", target.n_embd(), " (", e.reads, ")");
    AERIE_CHECK(claims->n_vocab == target.n_vocab(), source, ": ", e.name, " vocab_size ", claims->n_vocab,
                " does not match the target's vocab_size ", target.n_vocab(),
                " (the head embeds and names tokens in the target's vocabulary)");
  }
  if (e.final_hidden_only)
    AERIE_CHECK(options.target_layers.empty() || options.target_layers == std::vector<int>{kFinalNormLayer},
                claims ? str_cat(source, ": an ", e.name) : subject,
                " reads only the target's final hidden state; target layers cannot be chosen (asked for ",
                layers_str(options.target_layers), ")");
}

// The one downcast of the target: the entries that fit only DeepSeek-V3 build on its config and weights.
// check_fits has verified the family first.
const DeepseekV3Model& deepseek_target(const Model& target) {
  const auto* ds = dynamic_cast<const DeepseekV3Model*>(&target.local());
  AERIE_CHECK(ds != nullptr, "the target reports the deepseek_v3 family but is not a DeepseekV3Model: ",
              target.describe());
  return *ds;
}

// DeepSeek heads come with 2 or 3 fused layers (SpecForge), so fc's width decides; Llama heads keep
// EAGLE's default of 3 (spec/fused_layers.h).
std::vector<int> fused_layers(const HeadFolder& f, const std::vector<int>& aux_layer_ids, const Model& target,
                              const DraftLoadOptions& options) {
  FusedLayerInputs in{aux_layer_ids, target.n_layer(), target.n_embd(), 0};
  if (target.family() == ModelFamily::kLlama)
    return eagle3_fused_layers(FusedLayerRule::kEagleDefault, in, options, f.store.source());
  const Tensor& fc = f.store.get(top_name(f.store, "fc.weight"));
  AERIE_CHECK(fc.shape.ndim() == 2, f.store.source(), ": fc.weight must be a matrix, has shape ", fc.shape.str());
  in.fc_width = fc.dim(1);
  return eagle3_fused_layers(FusedLayerRule::kByFcWidth, in, options, f.store.source());
}

// Int8 scales widened, then --weights int8 / int4 applied to the head's own projections, or its pages
// touched now so the first draft step does not fault them in.
void prepare_weights(HeadFolder& f, ThreadPool& pool, const DraftLoadOptions& options) {
  AERIE_CHECK(options.weights != WeightFormat::kInt4 || f.entry->int4, f.store.source(),
              ": int4 weights are not supported for ", f.entry->name, "s");
  normalize_int8_scales(f.store);
  if (options.weights == WeightFormat::kInt8) {
    quantize_projections_int8(f.store, options.int8_group, "", &pool);
  } else if (options.weights == WeightFormat::kInt4) {
    quantize_projections_int4(f.store, options.int4_group, "", &pool);
  } else if (options.prefault) {
    f.store.prefault(options.progress);
  }
}

std::string head_subject(const HeadFolder& f) {
  return str_cat(f.source, ": an ", f.entry->name, " (", f.architecture, ")");
}

std::unique_ptr<DraftHead> load_eagle(HeadFolder f, const Model& target, ThreadPool& pool,
                                      const DraftLoadOptions& options) {
  EagleConfig& config = *f.eagle;
  const bool eagle1 = f.entry->kind == DrafterKind::kEagle1;
  const HeadClaims claims{eagle1 ? config.llama.n_embd : config.target_n_embd,
                          !eagle1 && config.has_target_n_embd ? "target_hidden_size" : "hidden_size",
                          config.llama.n_vocab};
  check_fits(*f.entry, head_subject(f), f.source, claims, target, options);
  std::vector<int> layers =
      eagle1 ? std::vector<int>{kFinalNormLayer} : fused_layers(f, config.aux_layer_ids, target, options);
  prepare_weights(f, pool, options);
  return std::make_unique<EagleHead>(std::move(config), std::move(f.store),
                                     eagle1 ? EagleKind::kEagle1 : EagleKind::kEagle3, std::move(layers), target,
                                     pool);
}

std::unique_ptr<DraftHead> load_mla(HeadFolder f, const Model& target, ThreadPool& pool,
                                    const DraftLoadOptions& options) {
  MlaHeadConfig& config = *f.mla;
  const HeadClaims claims{config.target_n_embd, config.has_target_n_embd ? "target_hidden_size" : "hidden_size",
                          config.attn.n_vocab};
  check_fits(*f.entry, head_subject(f), f.source, claims, target, options);
  const DeepseekV3Model& ds = deepseek_target(target);
  const DeepseekV3Config& c = config.attn;
  const DeepseekV3Config& tc = ds.config();
  AERIE_CHECK(c.kv_cache_width() == tc.kv_cache_width(), f.source,
              ": MLA head cache width kv_lora_rank + qk_rope_head_dim = ", c.kv_lora_rank, " + ", c.qk_rope_head_dim,
              " = ", c.kv_cache_width(), " differs from the target's ", tc.kv_lora_rank, " + ", tc.qk_rope_head_dim,
              " = ", tc.kv_cache_width(), " (the head's cache is a one-layer view of the target's latent geometry)");
  std::vector<int> layers = fused_layers(f, config.aux_layer_ids, target, options);
  prepare_weights(f, pool, options);
  return std::make_unique<MlaEagleHead>(std::move(config), std::move(f.store), std::move(layers), ds, pool);
}

// The MTP layer's weights are the target's (already in the format the target was loaded with).
std::unique_ptr<DraftHead> load_mtp(const Model& target, ThreadPool& pool, const DraftLoadOptions& options) {
  const DrafterEntry& e = entry_of(DrafterKind::kMtp);
  check_fits(e, str_cat("--draft ", kMtpDraftName, " (the target's own MTP layer)"), "", std::nullopt, target,
             options);
  const DeepseekV3Model& ds = deepseek_target(target);
  AERIE_CHECK(ds.config().num_nextn_predict_layers >= 1, ds.store().source(),
              ": the checkpoint has no MTP layer (num_nextn_predict_layers = ", ds.config().num_nextn_predict_layers,
              "), so --draft ", kMtpDraftName, " cannot be used");
  return std::make_unique<MtpDrafter>(ds, pool);
}

// Prompt lookup reads only token ids: it fits every target family and has no weights to format.
std::unique_ptr<Drafter> load_ngram(const Model& target, const DraftLoadOptions& options) {
  const std::string subject = str_cat("--draft ", kNgramDraftName, " (the ", entry_of(DrafterKind::kNgram).name, ")");
  check_fits(entry_of(DrafterKind::kNgram), subject, "", std::nullopt, target, options);
  AERIE_CHECK(options.target_layers.empty(), subject,
              " reads no hidden state of the target; target layers cannot be chosen (asked for ",
              layers_str(options.target_layers), ")");
  return std::make_unique<NgramDrafter>(options.ngram);  // validates the gram lengths
}

// The suffix drafter reads only token ids too.
std::unique_ptr<Drafter> load_suffix(const Model& target, const DraftLoadOptions& options) {
  const std::string subject = str_cat("--draft ", kSuffixDraftName, " (the ", entry_of(DrafterKind::kSuffix).name, ")");
  check_fits(entry_of(DrafterKind::kSuffix), subject, "", std::nullopt, target, options);
  AERIE_CHECK(options.target_layers.empty(), subject,
              " reads no hidden state of the target; target layers cannot be chosen (asked for ",
              layers_str(options.target_layers), ")");
  return std::make_unique<SuffixDrafter>(options.suffix);  // validates its options
}

}  // namespace

const char* drafter_kind_name(DrafterKind kind) { return entry_of(kind).name; }

DrafterKind identify_drafter(const std::string& draft) {
  if (draft == kMtpDraftName) return DrafterKind::kMtp;
  if (draft == kNgramDraftName) return DrafterKind::kNgram;
  if (draft == kSuffixDraftName) return DrafterKind::kSuffix;
  if (is_draft_model_folder(draft)) return DrafterKind::kDraftModel;
  return open_head_folder(draft, nullptr).entry->kind;
}

std::unique_ptr<DraftHead> load_drafter(const std::string& draft, const Model& target, ThreadPool& pool,
                                        const DraftLoadOptions& options) {
  if (draft == kMtpDraftName) return load_mtp(target, pool, options);
  for (DrafterKind token_drafter : {DrafterKind::kNgram, DrafterKind::kSuffix}) {
    const char* name = token_drafter == DrafterKind::kNgram ? kNgramDraftName : kSuffixDraftName;
    AERIE_CHECK(draft != name, "--draft ", name, " is the ", entry_of(token_drafter).name,
                ", not a draft head (load_any_drafter loads it)");
  }
  if (is_draft_model_folder(draft)) return load_draft_model(draft, target, options.target_dir, pool, options);
  HeadFolder f = open_head_folder(draft, options.progress);
  if (f.entry->kind == DrafterKind::kEagle3Mla) return load_mla(std::move(f), target, pool, options);
  return load_eagle(std::move(f), target, pool, options);
}

std::unique_ptr<Drafter> load_any_drafter(const std::string& draft, const Model& target, ThreadPool& pool,
                                          const DraftLoadOptions& options) {
  if (options.suffix_beside_head) {
    AERIE_CHECK(draft != kNgramDraftName && draft != kSuffixDraftName, "--suffix-draft goes beside a draft head "
                "(a head folder, a draft model or mtp), not --draft ", draft,
                draft == kSuffixDraftName ? " (which is the suffix index alone)" : "");
    return std::make_unique<SuffixBesideHead>(load_drafter(draft, target, pool, options), options.suffix);
  }
  if (draft == kNgramDraftName) return load_ngram(target, options);
  if (draft == kSuffixDraftName) return load_suffix(target, options);
  return load_drafter(draft, target, pool, options);
}

}  // namespace aerie
