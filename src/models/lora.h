// LoRA adapters in PEFT's layout (a folder with adapter_config.json and adapter_model.safetensors), loaded
// once against a model's LoraTargets and applied in the forward as their own low-rank products:
//   y = x W^T + scale * (x A^T) B^T      A: lora_A [rank, n_in], B: lora_B [n_out, rank]
// W is never merged or copied, so one batch can mix the base model and several adapters, and every base
// weight format (BF16, FP8, int8, int4, GGUF) takes adapters alike: the update only adds to linear()'s output.
//
// A and B are kept as f32: an adapter is small (rank x (n_in + n_out) per projection; at rank 16 on all seven
// projections of Llama-3.1-8B, 1.3 M values a layer, 1.2 % of the layer's BF16 bytes even in f32), so f32 costs
// little memory and bandwidth, holds the BF16/F16/F32 tensors PEFT saves exactly, and keeps the update's
// rounding below the base matmul's.
//
// What a loader refuses, each an aerie::Error naming the file and the field or tensor: a config that is not
// PEFT's LORA; use_dora, bias other than "none", modules_to_save, layers_to_transform / layers_pattern,
// rank_pattern / alpha_pattern, fan_in_fan_out, exclude_modules, layer_replication, target_parameters; a
// target module the model has not (lm_head, embed_tokens, anything not q/k/v/o/gate/up/down_proj) or a model
// that takes none (LoraTargets::refusal); a rank outside [1, max_rank]; a missing, unexpected or misshapen
// tensor (docs/lora.md lists them).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "models/lora_targets.h"
#include "models/model.h"
#include "models/scratch.h"

namespace aerie {

inline constexpr int64_t kDefaultMaxLoraRank = 256;
inline constexpr int64_t kMaxLoraRankLimit = 1024;  // the largest --max-lora-rank accepted

struct LoraOptions {
  int64_t max_rank = kDefaultMaxLoraRank;  // in [1, kMaxLoraRankLimit]
};

// One projection's update; empty when the adapter does not target it in this layer.
struct LoraPair {
  std::vector<float> a;   // [rank, n_in] f32
  std::vector<float> b;   // [n_out, rank] f32
  Tensor a_view, b_view;  // F32 views of a and b (ops::matmul's weight argument)
  bool empty() const { return a.empty(); }
};

struct LoraAdapter {
  std::string name;  // what a request selects it by (serve --lora-modules name=DIR); may be empty
  std::string dir;
  int64_t rank = 0;
  float scale = 0.0f;                       // lora_alpha / rank, or lora_alpha / sqrt(rank) with use_rslora
  std::vector<std::string> target_modules;  // module names, in LoraModule order
  // Names the adapter's contents (config and tensors): the prefix cache chains it into a sequence's first
  // block hash so that KV computed under one adapter is never served to another (or to the base model).
  uint64_t identity = 0;
  std::vector<std::array<LoraPair, kLoraModules>> layers;  // [n_layer], by LoraModule

  LoraAdapter() = default;
  LoraAdapter(LoraAdapter&&) = default;  // the views point into the vectors' heap storage, which moves along
  LoraAdapter& operator=(LoraAdapter&&) = default;
  LoraAdapter(const LoraAdapter&) = delete;
  LoraAdapter& operator=(const LoraAdapter&) = delete;
  uint64_t nbytes() const;
};

// Reads `dir`/adapter_config.json and `dir`/adapter_model.safetensors and checks them against `targets`.
LoraAdapter load_lora_adapter(const std::filesystem::path& dir, const LoraTargets& targets, const LoraOptions& options,
                              std::string name = "");

// The adapters an engine serves, in the order given; SequenceRows::adapter indexes it.
struct LoraSet {
  std::vector<LoraAdapter> adapters;
  int32_t size() const { return int32_t(adapters.size()); }
  // The adapter named `name`, or -1.
  int32_t index_of(std::string_view name) const;
};

// The adapters named by `specs` ({name, dir} each, names unique and non-empty), loaded in that order: what
// `serve --lora-modules`, `generate --lora` and the C API's engine options load. An aerie::Error naming the
// adapter otherwise.
std::shared_ptr<const LoraSet> load_lora_set(std::span<const std::pair<std::string, std::string>> specs,
                                             const LoraTargets& targets, const LoraOptions& options);

// Every adapter of `set` fits `targets` (it was loaded against this model, or one of the same shapes); an
// aerie::Error naming the adapter otherwise, or the refusal of a model that takes none.
void check_lora_fits(const LoraSet& set, const LoraTargets& targets);

// "name=DIR" (vLLM's --lora-modules form), or the JSON form {"name": ..., "path": ...}; an aerie::Error
// naming `spec` otherwise. Returns {name, dir}.
std::pair<std::string, std::string> parse_lora_module_spec(const std::string& spec);

// One forward's rows grouped by adapter, and the update applied per projection. Each adapter's A and B are
// read once per projection per step, whatever number of its rows the batch holds. Owned by the model as
// scratch; begin() at the start of every forward.
class LoraBatch {
 public:
  // Groups the rows of `batch` by SequenceRows::adapter (rows of the base model are left out).
  void begin(const StepBatch& batch);
  bool active() const { return !groups_.empty(); }
  // y[r] += scale * (x[r] A^T) B^T for every row r whose adapter targets `module` in `layer`.
  //   x: [n_tokens, n_in] f32;  y: [n_tokens, n_out] f32
  void add(int64_t layer, LoraModule module, const float* x, float* y, ThreadPool& pool);

 private:
  struct Group {
    int32_t adapter = 0;
    size_t first_range = 0, n_ranges = 0;  // into ranges_
    int64_t n_rows = 0;
  };
  struct RowRange {
    int64_t begin = 0, n_rows = 0;
  };
  const LoraSet* set_ = nullptr;
  std::vector<Group> groups_;
  std::vector<RowRange> ranges_;
  ScratchBuffer gathered_, low_, delta_;
};

// Where a block applies a LoraBatch: its layer. A null batch (the default) applies nothing.
struct LoraAt {
  LoraBatch* batch = nullptr;
  int64_t layer = 0;
  void add(LoraModule module, const float* x, float* y, ThreadPool& pool) const {
    if (batch != nullptr && batch->active()) batch->add(layer, module, x, y, pool);
  }
};

}  // namespace aerie
