#include "engine/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "io/weight_memory.h"

namespace aerie {
namespace {

// a * b, or UINT64_MAX when it does not fit: a config's max_position_embeddings times a flag's sequence
// count times a big model's bytes per position may not.
uint64_t saturating_mul(uint64_t a, uint64_t b) {
  return b != 0 && a > std::numeric_limits<uint64_t>::max() / b ? std::numeric_limits<uint64_t>::max() : a * b;
}

std::string bytes_str(double bytes) {
  char s[32];
  if (bytes >= 1e9) std::snprintf(s, sizeof(s), "%.1f GB", bytes / 1e9);
  else if (bytes >= 1e6) std::snprintf(s, sizeof(s), "%.1f MB", bytes / 1e6);
  else std::snprintf(s, sizeof(s), "%.1f KB", bytes / 1e3);
  return s;
}

// The default budget: what max_num_seqs full sequences need, at most budget_fraction of MemAvailable.
// Sets need_bytes and capped; returns the reason for the summary.
std::string default_budget(const MemoryPlanInput& in, uint64_t per_block, MemoryPlan& plan) {
  const int64_t positions = std::max<int64_t>(in.max_length, 1) + kMaxDraftPositions;
  const uint64_t blocks_per_seq = uint64_t((positions + in.block_size - 1) / in.block_size);
  plan.need_bytes = saturating_mul(saturating_mul(blocks_per_seq, uint64_t(std::max<int64_t>(in.max_num_seqs, 1))),
                                   per_block);
  const uint64_t available =
      in.mem_available_bytes > 0 ? in.mem_available_bytes : probe_memory_system().mem_available_bytes;
  AERIE_CHECK(available > 0, "memory plan: cannot read MemAvailable; give --kv-cache-memory BYTES");
  const uint64_t cap = uint64_t(double(available) * in.budget_fraction);
  plan.capped = plan.need_bytes > cap;
  plan.budget_bytes = std::min(plan.need_bytes, cap);
  const std::string need = str_cat(in.max_num_seqs, " sequences x ", positions, " positions x ",
                                   bytes_str(double(per_block) / double(in.block_size)));
  const std::string share = str_cat(int(in.budget_fraction * 100 + 0.5), "% of MemAvailable ", bytes_str(double(available)));
  if (plan.capped) return str_cat("capped at ", share, "; ", need, " would need ", bytes_str(double(plan.need_bytes)));
  return str_cat("by need: ", need, "; at most ", share);
}

}  // namespace

MemoryPlan plan_memory(const MemoryPlanInput& in) {
  AERIE_CHECK(in.block_size > 0 && in.target_bytes_per_position > 0, "memory plan: empty KV geometry");
  MemoryPlan plan;
  const uint64_t per_block = (in.target_bytes_per_position + in.draft_bytes_per_position) * uint64_t(in.block_size);
  std::string why = "--kv-cache-memory";
  if (in.budget_bytes > 0) {
    plan.budget_bytes = in.budget_bytes;
  } else {
    why = default_budget(in, per_block, plan);
  }
  plan.n_blocks = int64_t(std::min<uint64_t>(plan.budget_bytes / per_block, std::numeric_limits<int32_t>::max()));
  const int64_t positions = plan.n_blocks * in.block_size;
  plan.bytes_per_token = in.target_bytes_per_position + in.draft_bytes_per_position;
  plan.n_tokens = positions;
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
    << " positions, " << bytes_str(double(plan.n_blocks) * double(per_block)) << ", " << kv_dtype_name(in.kv_dtype) << " "
    << bytes_str(double(plan.bytes_per_token)) << " per token (" << why << ")";
  if (plan.lowered) s << "; max length lowered from " << in.max_length << " to " << plan.max_length << " to fit";
  plan.summary = s.str();
  return plan;
}

}  // namespace aerie
