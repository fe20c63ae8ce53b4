#include "models/parallel/parallel_moe.h"

#include <span>

namespace aerie {

void parallel_moe(const float* x, int64_t n_tokens, const MoeWeights& w, const RouterShape& shape,
                  const ExpertRanks& experts, MoeScratch& moe, MoeDispatchScratch& dispatch, float* out,
                  ThreadPool& pool) {
  switch (experts.exchange) {
    case ExpertExchange::kNone:
      moe_ffn(x, n_tokens, w, shape, moe, out, pool);
      return;
    case ExpertExchange::kSumOutputs:  // this rank's experts' (and shared slice's) partial sum, then the sum
      moe_ffn(x, n_tokens, w, shape, moe, out, pool);
      experts.ranks->all_reduce_sum(std::span<float>(out, size_t(n_tokens * w.router.n_in())));
      return;
    case ExpertExchange::kDispatchRows:
      dispatch_moe(x, n_tokens, w, shape, *experts.ranks, moe, dispatch, out, pool);
      return;
  }
}

}  // namespace aerie
