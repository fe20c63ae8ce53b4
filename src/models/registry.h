// The registry: the ONLY place that switches on the checkpoint's architecture string.
#pragma once

#include <filesystem>
#include <memory>

#include "core/thread_pool.h"
#include "dist/communicator.h"
#include "io/weight_store.h"
#include "models/model.h"
#include "quant/quantize.h"

namespace aerie {

struct LoadOptions {
  ProgressFn progress;     // called while the weights are paged in
  bool prefault = true;    // touch every page at load so the first forward does not pay page faults
  WeightMemory weight_memory = WeightMemory::kMapped;  // where the weights live (io/weight_memory.h)
  WeightMemoryReport* weight_memory_report = nullptr;  // when set, filled with what the load used
  // int8: every projection and the output head quantised at load (quant/quantize.h), Llama targets;
  // int8_group inputs per scale, 0 = one per output channel. The float weights then stay mapped (no
  // huge-page copy of what is about to be replaced). Int8 checkpoints load as they are either way.
  WeightFormat weights = WeightFormat::kAsStored;
  int64_t int8_group = 0;
  // int4: the same with asymmetric int4 (quant/int4_weights.h), int4_group inputs per scale and zero point
  // (0 = one per output channel). GPTQ and AWQ checkpoints load as they are either way.
  int64_t int4_group = 128;
  // Tensor parallelism over this communicator's ranks when it has more than one (each rank loads its shards:
  // models/llama3.h, models/deepseek_v3.h). Null: the whole model in this process. Parallel loads keep the
  // weights mapped and skip the whole-file prefault (each rank pages in only what its shards read, during
  // the first forward); --weights int8/int4 is refused (quantised projections cannot be split yet).
  // Must outlive the model.
  dist::Communicator* communicator = nullptr;
  // With a communicator: kTensor splits attention heads and FFNs (and, for DeepSeek-V3, shards the routed
  // experts); kExpert (DeepSeek-V3 only) shards the routed experts and keeps attention and dense layers whole
  // on every rank; kData (DeepSeek-V3 only) does as kExpert and runs each sequence's attention on the one rank
  // that holds its KV (Model::kv_partitions).
  ParallelLayout layout = ParallelLayout::kTensor;
};

// Reads DIR/config.json, picks the architecture and loads the weights; or, when DIR is a GGUF file (or one
// shard of a split GGUF), loads that (models/gguf_loader.h). Throws aerie::Error for an
// unknown architecture (naming it and the supported ones), a bad config or bad weights.
std::unique_ptr<Model> load_model(const std::filesystem::path& dir, ThreadPool& pool,
                                  const LoadOptions& options = {});

}  // namespace aerie
