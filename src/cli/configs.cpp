#include "cli/configs.h"

#include <algorithm>
#include <string_view>
#include <type_traits>

#include "cli/common.h"
#include "cli/draft.h"
#include "cli/speculative_tokens.h"
#include "core/error.h"
#include "core/limits.h"
#include "kv/disk_block_store.h"
#include "kv/disk_identity.h"
#include "ops/ops.h"
#include "spec/drafter_registry.h"

namespace aerie::cli {

SamplingParams sampling_params(const Args& args) {
  SamplingParams p;
  p.temperature = float(args.number("--temperature"));
  p.top_k = args.integer("--top-k");
  p.top_p = float(args.number("--top-p"));
  p.min_p = float(args.number("--min-p"));
  p.seed = uint64_t(args.integer("--seed"));
  validate(p);
  return p;
}

Penalties penalties(const Args& args) {
  Penalties p;
  p.presence = float(args.number("--presence-penalty"));
  p.frequency = float(args.number("--frequency-penalty"));
  p.repetition = float(args.number("--repetition-penalty"));
  validate(p);
  return p;
}

GenerateOptions generate_options(const Args& args) {
  GenerateOptions options;
  options.max_tokens = args.integer("--max-tokens");
  options.max_length = args.integer("--max-length");
  options.kv_cache_dtype = kv_cache_dtype(args);
  options.deterministic = args.has("--deterministic");
  options.sampling = sampling_params(args);
  options.penalties = penalties(args);
  return options;
}

EngineConfig engine_config(const Args& args) {
  EngineConfig config;
  auto read = [&](const char* name, auto& field) {
    if (args.declares(name)) field = std::remove_reference_t<decltype(field)>(args.integer(name));
  };
  read("--max-num-seqs", config.max_num_seqs);
  read("--max-batch-tokens", config.max_batch_tokens);
  read("--max-prefill-rows-while-decoding", config.max_prefill_rows_while_decoding);
  read("--kv-cache-memory", config.kv_cache_memory);
  read("--max-length", config.max_length);
  if (args.declares("--max-queue")) config.max_queue = args.integer("--max-queue") + 1;
  config.kv_cache_dtype = kv_cache_dtype(args);
  config.deterministic = args.has("--deterministic");
  if (args.has("--num-speculative-tokens-per-batch-size"))
    config.k_by_batch_size = DraftTokensByBatchSize::parse(args.str("--num-speculative-tokens-per-batch-size"));
  return config;
}

void check_kv_disk_flags(const Args& args) {
  if (!args.has("--kv-cache-dir")) {
    AERIE_CHECK(!args.has("--kv-cache-disk-bytes"), "--kv-cache-disk-bytes needs --kv-cache-dir");
    return;
  }
  AERIE_CHECK(parallel_ranks(args) == 1,
              "--kv-cache-dir does not work with --tensor-parallel, --expert-parallel or --data-parallel");
  const std::string dir = args.str("--kv-cache-dir");
  AERIE_CHECK(!dir.empty(), "--kv-cache-dir needs a directory");
  DiskBlockStore::check_directory(dir, "--kv-cache-dir " + dir);
}

KvDiskOptions kv_disk_options(const Args& args, const std::filesystem::path& model_dir) {
  KvDiskOptions disk;
  check_kv_disk_flags(args);
  if (!args.has("--kv-cache-dir")) return disk;
  disk.dir = args.str("--kv-cache-dir");
  disk.max_bytes = uint64_t(args.integer("--kv-cache-disk-bytes"));
  // The same checkpoint loaded another way computes other rows: quantised at load, or on other kernels.
  const WeightChoice weights = weight_choice(args);
  IdentityHasher target;
  target.add(checkpoint_fingerprint(model_dir)).add(uint64_t(weights.format));
  target.add(uint64_t(weights.int8_group)).add(uint64_t(weights.int4_group));
  target.add(uint64_t(ops::bf16_activations())).add(ops::matmul_isa(DType::kBF16)).add(ops::rope_isa());
  disk.identity = target.value();
  const std::string draft = args.has("--draft") ? args.str("--draft") : "";
  if (draft.empty() || draft == "none" || draft == kNgramDraftName) return disk;  // no head cache
  IdentityHasher head;
  head.add(draft);
  if (std::filesystem::exists(draft)) head.add(checkpoint_fingerprint(draft));
  for (const char* name : {"--draft-layers", "--draft-weights"}) head.add(args.has(name) ? args.str(name) : "");
  head.add(uint64_t(args.has("--draft-layer-ids-are-outputs")));
  disk.draft_identity = head.value();
  return disk;
}

SpecOptions spec_options(const Args& args, Drafter* drafter) {
  SpecOptions spec;
  if (drafter == nullptr) {
    for (const char* name : {"--num-speculative-tokens", "--draft-proposal", "--num-speculative-tokens-per-batch-size",
                             "--synthetic-acceptance", "--synthetic-depth-decay", "--synthetic-sibling-rate",
                             "--spec-tree-top-k", "--spec-tree-depth", "--spec-tree-tokens", "--spec-tree-shape"})
      AERIE_CHECK(!args.has(name), name, " needs --draft");
    return spec;
  }
  parse_num_speculative_tokens(args.str("--num-speculative-tokens"), spec);
  spec.proposal = draft_proposal(args, *drafter);
  apply_tree_options(args, spec);
  if (args.has("--synthetic-acceptance")) spec.synthetic_acceptance = args.number("--synthetic-acceptance");
  apply_synthetic_model(args, spec);
  return spec;
}

void apply_synthetic_model(const Args& args, SpecOptions& spec) {
  for (const char* name : {"--synthetic-depth-decay", "--synthetic-sibling-rate"})
    AERIE_CHECK(!args.has(name) || args.has("--synthetic-acceptance") || args.declares("--rates"), name,
                " needs --synthetic-acceptance");
  spec.synthetic_depth_decay = args.number("--synthetic-depth-decay");
  spec.synthetic_sibling_rate = args.number("--synthetic-sibling-rate");
}

std::optional<RelaxedAcceptance> relaxed_acceptance(const Args& args) {
  if (args.str("--thinking-acceptance") != "relaxed") return std::nullopt;
  const RelaxedAcceptance relaxed{args.integer("--relaxed-top-k"), args.number("--relaxed-delta")};
  validate(relaxed);
  return relaxed;
}

server::ServerOptions server_options(const Args& args) {
  server::ServerOptions options;
  options.host = args.str("--host");
  options.port = int(args.integer("--port"));
  options.api_key = args.str("--api-key");
  if (args.has("--allowed-origins")) options.cors = server::parse_allowed_origins(args.str("--allowed-origins"));
  AERIE_CHECK(!args.has("--allow-credentials") || options.cors.enabled(),
              "--allow-credentials needs --allowed-origins (which origins may send credentials)");
  options.cors.credentials = args.has("--allow-credentials");
  options.served_model_name = args.has("--served-model-name") ? args.str("--served-model-name") : args.str("--model");
  options.http_threads = int(args.integer("--http-threads"));
  options.max_in_flight = args.integer("--max-queue");
  options.responses_store.max_responses = args.integer("--responses-store-max");
  options.responses_store.max_bytes = args.integer("--responses-store-bytes");
  RequestSideLimits limits;
  if (args.has("--limit")) {
    const std::string list = args.str("--limit");
    for (size_t begin = 0; begin <= list.size();) {
      const size_t end = std::min(list.find(',', begin), list.size());
      set_limit(limits, std::string_view(list).substr(begin, end - begin));
      begin = end + 1;
    }
  }
  // The specific flags, where given, win over --limit http.* (their defaults are HttpLimits' own).
  auto read = [&](const char* name, auto& field) {
    if (args.has(name)) field = std::remove_reference_t<decltype(field)>(args.integer(name));
  };
  read("--max-request-bytes", limits.http.max_body_bytes);
  read("--max-header-bytes", limits.http.max_header_bytes);
  read("--header-timeout", limits.http.header_deadline_s);
  read("--body-timeout", limits.http.body_deadline_s);
  read("--keep-alive-timeout", limits.http.keep_alive_idle_s);
  options.limits = limits.http;
  options.json_limits = limits.json;
  options.request_limits = limits.request;
  options.schema_limits = limits.schema;
  options.template_limits = limits.chat_template;
  return options;
}

std::shared_ptr<const LoraSet> lora_adapters(const Args& args, const Model& target, bool quiet) {
  std::vector<std::pair<std::string, std::string>> specs;  // {name, dir}
  if (args.declares("--lora-modules"))
    for (const std::string& spec : args.all("--lora-modules")) specs.push_back(parse_lora_module_spec(spec));
  if (args.declares("--lora") && args.has("--lora")) specs.push_back({"lora", args.str("--lora")});
  if (specs.empty()) return nullptr;
  std::shared_ptr<const LoraSet> set = load_lora_set(specs, target.lora_targets(),
                                                     LoraOptions{args.integer("--max-lora-rank")});
  if (!quiet)
    for (const LoraAdapter& a : set->adapters)
      std::fprintf(stderr, "LoRA adapter '%s' (%s): rank %lld, scale %g, %zu modules, %.1f MiB\n", a.name.c_str(),
                   a.dir.c_str(), (long long)a.rank, double(a.scale), a.target_modules.size(),
                   double(a.nbytes()) / (1 << 20));
  return set;
}

}  // namespace aerie::cli
