// Memory plan: how many KV blocks the engine gets, from a byte budget and what one position costs in the
// target's cache plus the draft head's. When not even one sequence of the requested max length fits, the
// max length is lowered (and the plan says so), or the plan is refused when nothing useful fits.
#pragma once

#include <cstdint>
#include <string>

namespace aerie {

struct MemoryPlanInput {
  uint64_t budget_bytes = 0;          // 0: fraction of MemAvailable
  double budget_fraction = 0.5;
  uint64_t target_bytes_per_position = 0;
  uint64_t draft_bytes_per_position = 0;
  int64_t block_size = 16;
  int64_t max_length = 0;             // wanted per-sequence length (prompt + output)
  int64_t min_useful_length = 64;     // below this the plan is refused
};

struct MemoryPlan {
  uint64_t budget_bytes = 0;
  int64_t n_blocks = 0;
  int64_t max_length = 0;       // possibly lowered
  bool lowered = false;
  std::string summary;          // one line for the log
};

// Throws aerie::Error when the budget cannot hold min_useful_length positions.
MemoryPlan plan_memory(const MemoryPlanInput& input);

}  // namespace aerie
