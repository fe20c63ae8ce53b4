// The registry: the ONLY place that switches on the checkpoint's architecture string.
#pragma once

#include <filesystem>
#include <memory>

#include "core/thread_pool.h"
#include "io/weight_store.h"
#include "models/model.h"

namespace aerie {

struct LoadOptions {
  ProgressFn progress;     // called while the weights are paged in
  bool prefault = true;    // touch every page at load so the first forward does not pay page faults
  WeightMemory weight_memory = WeightMemory::kMapped;  // where the weights live (io/weight_memory.h)
  WeightMemoryReport* weight_memory_report = nullptr;  // when set, filled with what the load used
};

// Reads DIR/config.json, picks the architecture and loads the weights. Throws aerie::Error for an
// unknown architecture (naming it and the supported ones), a bad config or bad weights.
std::unique_ptr<Model> load_model(const std::filesystem::path& dir, ThreadPool& pool,
                                  const LoadOptions& options = {});

}  // namespace aerie
