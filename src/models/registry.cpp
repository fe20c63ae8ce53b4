#include "models/registry.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "io/deepseek_config.h"
#include "io/llama_config.h"
#include "models/deepseek_v3.h"
#include "models/gguf_loader.h"
#include "models/llama3.h"
#include "quant/int4_weights.h"

namespace aerie {
namespace {

bool tensor_parallel(const LoadOptions& options) {
  return options.communicator != nullptr && options.communicator->size() > 1;
}

WeightStore open_weights(const std::filesystem::path& dir, LoadOptions options) {
  if (tensor_parallel(options)) {  // each rank reads only its shards: no copy, no whole-file prefault
    options.weight_memory = WeightMemory::kMapped;
    options.prefault = false;
  }
  const bool quantize = options.weights != WeightFormat::kAsStored;
  WeightStore store = WeightStore::open_dir(
      dir, WeightLoadOptions{quantize ? WeightMemory::kMapped : options.weight_memory, options.progress});
  if (options.prefault && !quantize) store.prefault(options.progress);  // quantising reads every page anyway
  if (options.weight_memory_report != nullptr) *options.weight_memory_report = store.memory_report();
  return store;
}

nlohmann::json read_json(const std::filesystem::path& path) {
  return read_json_file(path, " (is this a Hugging Face checkpoint folder?)");
}

std::unique_ptr<Model> load_llama(const std::filesystem::path& dir, const nlohmann::json& json,
                                  ThreadPool& pool, const LoadOptions& options) {
  LlamaConfig config = parse_llama_config(json, (dir / "config.json").string());
  AERIE_CHECK(!tensor_parallel(options) || options.layout != ParallelLayout::kExpert, dir.string(),
              ": --expert-parallel shards a mixture of experts; LlamaForCausalLM has none (use --tensor-parallel)");
  AERIE_CHECK(!tensor_parallel(options) || options.layout != ParallelLayout::kData, dir.string(),
              ": --data-parallel pairs attention by sequence with expert-parallel MoE layers; LlamaForCausalLM has no "
              "experts to share (use --tensor-parallel)");
  AERIE_CHECK(!tensor_parallel(options) || options.weights == WeightFormat::kAsStored, dir.string(),
              ": tensor parallelism splits F32/BF16/F16 weights only; int8 and int4 projections (--weights int8 or "
              "int4) cannot be split yet");
  WeightStore store = open_weights(dir, options);
  normalize_int8_scales(store);
  convert_int4_checkpoint(store, json, &pool);
  if (options.weights == WeightFormat::kInt4)
    quantize_projections_int4(store, options.int4_group, config.tie_word_embeddings ? "model.embed_tokens.weight" : "",
                              &pool);
  if (options.weights == WeightFormat::kInt8)
    quantize_projections_int8(store, options.int8_group, config.tie_word_embeddings ? "model.embed_tokens.weight" : "",
                              &pool);
  return std::make_unique<LlamaModel>(std::move(config), std::move(store), pool, options.communicator);
}

std::unique_ptr<Model> load_deepseek_v3(const std::filesystem::path& dir, const nlohmann::json& json,
                                        ThreadPool& pool, const LoadOptions& options) {
  DeepseekV3Config config = parse_deepseek_v3_config(json, (dir / "config.json").string());
  AERIE_CHECK(!tensor_parallel(options) || options.weights == WeightFormat::kAsStored, dir.string(),
              ": several ranks split BF16 and FP8 weights only; --weights int8 or int4 cannot be split yet");
  WeightStore store = open_weights(dir, options);
  normalize_int8_scales(store);
  // Published GPTQ / AWQ / compressed-tensors 4-bit projections, repacked (quant/int4_weights.h).
  const int64_t n_int4 = convert_int4_checkpoint(store, json, &pool);
  AERIE_CHECK(
      !tensor_parallel(options) || n_int4 == 0, dir.string(),
      ": several ranks split BF16 and FP8 weights only; this checkpoint's int4 projections cannot be split yet");
  if (options.weights == WeightFormat::kInt8) quantize_projections_int8(store, options.int8_group, "", &pool);
  if (options.weights == WeightFormat::kInt4) quantize_projections_int4(store, options.int4_group, "", &pool);
  return std::make_unique<DeepseekV3Model>(std::move(config), std::move(store), pool, options.communicator,
                                           options.layout);
}

}  // namespace

std::unique_ptr<Model> load_model(const std::filesystem::path& dir, ThreadPool& pool, const LoadOptions& options) {
  if (is_gguf_file(dir)) return load_gguf_model(dir, pool, options);
  const std::filesystem::path config_path = dir / "config.json";
  const nlohmann::json json = read_json(config_path);
  std::string architecture;
  if (json.contains("architectures") && json["architectures"].is_array() && !json["architectures"].empty() &&
      json["architectures"][0].is_string())
    architecture = json["architectures"][0].get<std::string>();
  AERIE_CHECK(!architecture.empty(), config_path.string(), ": missing key 'architectures'");
  if (architecture == "LlamaForCausalLM") return load_llama(dir, json, pool, options);
  if (architecture == "DeepseekV3ForCausalLM") return load_deepseek_v3(dir, json, pool, options);
  throw Error(str_cat(config_path.string(), ": unsupported architecture '", architecture,
                      "' (supported: LlamaForCausalLM, DeepseekV3ForCausalLM)"));
}

}  // namespace aerie
