#include "engine/memory_plan.h"

#include "core/error.h"
#include "io/weight_memory.h"

namespace aerie {

MemoryPlan plan_memory(const MemoryPlanInput& in) {
  AERIE_CHECK(in.block_size > 0 && in.target_bytes_per_position > 0, "memory plan: empty KV geometry");
  MemoryPlan plan;
  plan.budget_bytes = in.budget_bytes;
  if (plan.budget_bytes == 0) {
    const uint64_t available = probe_memory_system().mem_available_bytes;
    AERIE_CHECK(available > 0, "memory plan: cannot read MemAvailable; give --kv-cache-memory BYTES");
    plan.budget_bytes = uint64_t(double(available) * in.budget_fraction);
  }
  const uint64_t per_block = (in.target_bytes_per_position + in.draft_bytes_per_position) * uint64_t(in.block_size);
  plan.n_blocks = int64_t(plan.budget_bytes / per_block);
  const int64_t positions = plan.n_blocks * in.block_size;
  AERIE_CHECK(positions >= in.min_useful_length, "KV cache budget of ", plan.budget_bytes, " bytes holds ", positions,
              " positions (", per_block / uint64_t(in.block_size), " bytes each): fewer than ", in.min_useful_length,
              "; raise --kv-cache-memory");
  plan.max_length = in.max_length;
  if (plan.max_length > positions) {
    plan.max_length = positions;
    plan.lowered = true;
  }
  std::ostringstream s;
  s << "KV cache: " << plan.n_blocks << " blocks of " << in.block_size << " positions = " << positions
    << " positions, " << double(plan.n_blocks) * double(per_block) / 1e9 << " GB";
  if (plan.lowered) s << "; max length lowered from " << in.max_length << " to " << plan.max_length << " to fit";
  plan.summary = s.str();
  return plan;
}

}  // namespace aerie
