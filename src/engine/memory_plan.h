// Memory plan: how many KV blocks the engine gets. With no budget given (--kv-cache-memory), the default is
// what the work can use: max_num_seqs sequences each holding max_length positions (plus the most draft
// positions a round can add), capped by a share of MemAvailable; a 6M-parameter model serving 16
// sequences of 512 positions gets tens of MB, not half the machine. The pages are not touched here or by
// the KV store (core/aligned_buffer.h): memory is taken as sequences fill the cache.
//
// When not even one sequence of the requested max length fits, the max length is lowered (and the plan
// says so), or the plan is refused when nothing useful fits. The summary line says what was chosen and why.
#pragma once

#include <cstdint>
#include <string>

#include "core/kv_dtype.h"

namespace aerie {

// Draft positions a sequence may hold beyond its max length during a round: the largest K the engine
// accepts (engine.cpp).
inline constexpr int64_t kMaxDraftPositions = 32;

struct MemoryPlanInput {
  uint64_t budget_bytes = 0;          // 0: by need, capped at budget_fraction of MemAvailable
  double budget_fraction = 0.5;
  uint64_t mem_available_bytes = 0;   // 0: read /proc/meminfo (tests set it)
  uint64_t target_bytes_per_position = 0;
  uint64_t draft_bytes_per_position = 0;
  KvDType kv_dtype = KvDType::kBF16;  // what the bytes per position were computed for (the summary names it)
  int64_t block_size = 16;
  int64_t max_length = 0;             // wanted per-sequence length (prompt + output)
  int64_t max_num_seqs = 1;           // sequences that may run (and hold their positions) at once
  int64_t min_useful_length = 64;     // below this the plan is refused
};

struct MemoryPlan {
  uint64_t budget_bytes = 0;
  uint64_t need_bytes = 0;      // what max_num_seqs full sequences take (saturates at UINT64_MAX)
  bool capped = false;          // the default budget was capped by the share of MemAvailable
  int64_t n_blocks = 0;
  uint64_t bytes_per_token = 0;  // target + draft KV bytes per position, all layers
  int64_t n_tokens = 0;          // positions the blocks hold: n_blocks * block_size
  int64_t max_length = 0;       // possibly lowered
  bool lowered = false;
  std::string summary;          // one line for the log: the size, and why
};

// Throws aerie::Error when the budget cannot hold min_useful_length positions.
MemoryPlan plan_memory(const MemoryPlanInput& input);

}  // namespace aerie
