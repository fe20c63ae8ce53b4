// The MoE block when each rank holds only its own rows (data-parallel attention, issue 22): experts are
// sharded as under expert parallelism, and each row travels only to the ranks that own one of its experts.
//
//   1. every rank routes its own rows (the router is whole on every rank);
//   2. counts: each rank tells every rank how many rows it will send there, with the histogram of its
//      routed (row, expert) pairs, so every rank learns the whole step's expert load (one small all-to-all);
//   3. dispatch: each row goes once to each rank owning one of its chosen experts, with those (expert,
//      weight) pairs in a header (one all-to-all):
//        record = [expert_0 .. expert_{k-1} | weight_0 .. weight_{k-1} | x (n_embd)], expert -1 = elsewhere;
//   4. each rank runs its experts over the rows it received (moe_run_experts: one pass per expert), then its
//      own rows' shared experts (whole on every rank; run here, they overlap the slower ranks' experts), and
//      sends every received row's weighted partial sum back to where it came from (one all-to-all);
//   5. the sender adds the partials in rank order, then the shared experts' output.
//
// Example, 2 ranks, experts 0-3 on rank 0 and 4-7 on rank 1, k = 2: rank 0's row a chose {1, 6} and row b
// chose {2, 3}; rank 1's row c chose {0, 5}. Rank 0 sends a and b to itself and a to rank 1; rank 1 sends c to
// both. Rank 0 runs expert 1 on a, 2 and 3 on b, 0 on c; rank 1 runs 6 on a and 5 on c; a's output is
// partial_0(a) + partial_1(a) + shared(a) on rank 0.
//
// Per MoE layer a row crosses the network at most 2 * min(k, ranks) times (there and back), against every
// row reaching every rank twice for an all-gather before the block and an all-reduce after it.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/communicator.h"
#include "models/moe.h"
#include "models/scratch.h"

namespace aerie {

struct MoeDispatchScratch {
  std::vector<int32_t> expert_rank;             // [n_expert] the rank owning each expert
  std::vector<float> count_send, count_recv;    // [ranks, 1 + n_expert]: rows sent, then the histogram
  std::vector<int> send_counts, recv_counts;    // [ranks] floats of one all-to-all
  std::vector<int64_t> rows_to, rows_from;      // [ranks] rows sent to / received from each rank
  std::vector<char> row_to;                     // [rows, ranks] whether the row goes to the rank
  std::vector<int64_t> send_row;                // [rows sent] the local row of each record, in send order
  std::vector<int32_t> chosen;                  // [rows received, k] experts (-1: not this rank's)
  std::vector<float> weight;                    // [rows received, k]
  ScratchBuffer send, recv, partial, back, shared;
};

// out [n_rows, n_embd] = MoE(x [n_rows, n_embd]) for this rank's rows; every rank must call it for every MoE
// layer, with n_rows = 0 when it has none this step (its experts still serve the others). w.owned must be
// dist::balanced_split(n_expert, ranks, rank) and the shared experts whole. moe.routed_rows grows by every
// rank's routed pairs, so each rank's expert load is the whole job's.
void dispatch_moe(const float* x, int64_t n_rows, const MoeWeights& w, const RouterShape& shape,
                  dist::Communicator& ranks, MoeScratch& moe, MoeDispatchScratch& scratch, float* out,
                  ThreadPool& pool);

}  // namespace aerie
