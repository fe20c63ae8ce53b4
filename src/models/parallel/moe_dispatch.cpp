#include "models/parallel/moe_dispatch.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "dist/shard.h"
#include "ops/ops.h"

namespace aerie {

void dispatch_moe(const float* x, int64_t n_rows, const MoeWeights& w, const RouterShape& s,
                  dist::Communicator& ranks, MoeScratch& moe, MoeDispatchScratch& d, float* out, ThreadPool& pool) {
  const int n_ranks = ranks.size(), rank = ranks.rank();
  const int64_t n_embd = w.router.n_in(), k = s.n_expert_used, n_expert = s.n_expert;
  const int64_t record = 2 * k + n_embd, stride = 1 + n_expert;
  AERIE_CHECK(w.owned == dist::balanced_split(n_expert, n_ranks, rank) && (!w.has_shared || w.shared_here),
              "dispatch_moe: rank ", rank, " does not hold its balanced share of the experts and every shared one");
  if (d.expert_rank.size() != size_t(n_expert)) {  // once: a scratch serves one model over one set of ranks
    d.expert_rank.resize(size_t(n_expert));
    for (int r = 0; r < n_ranks; ++r) {
      const dist::Range e = dist::balanced_split(n_expert, n_ranks, r);
      std::fill(d.expert_rank.begin() + e.begin, d.expert_rank.begin() + e.end, r);
    }
  }

  // 1. Route this rank's rows.
  moe_route(x, n_rows, w, s, moe, pool);
  const int32_t* chosen = moe.chosen.data();
  const float* chosen_weight = moe.chosen_weight.data();

  // 2. Rows for each rank (a row once per rank owning any of its experts), and the step's load.
  d.row_to.assign(size_t(n_rows * n_ranks), 0);
  d.rows_to.assign(size_t(n_ranks), 0);
  for (int64_t t = 0; t < n_rows; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int r = d.expert_rank[size_t(chosen[t * k + j])];
      if (d.row_to[size_t(t * n_ranks + r)] == 0) d.row_to[size_t(t * n_ranks + r)] = 1, ++d.rows_to[size_t(r)];
    }
  d.count_send.assign(size_t(n_ranks * stride), 0.0f);
  for (int64_t p = 0; p < n_rows * k; ++p) d.count_send[size_t(1 + chosen[p])] += 1.0f;  // piece 0's histogram
  for (int r = 0; r < n_ranks; ++r) {
    float* piece = d.count_send.data() + r * stride;
    if (r > 0) std::copy_n(d.count_send.data() + 1, n_expert, piece + 1);
    piece[0] = float(d.rows_to[size_t(r)]);
  }
  d.count_recv.resize(size_t(n_ranks * stride));
  d.send_counts.assign(size_t(n_ranks), int(stride));
  d.recv_counts.assign(size_t(n_ranks), int(stride));
  ranks.all_to_all_v(d.count_send, d.send_counts, d.count_recv, d.recv_counts);
  d.rows_from.resize(size_t(n_ranks));
  int64_t n_recv = 0, n_sent = 0;
  moe.routed_rows.resize(size_t(n_expert), 0);
  for (int r = 0; r < n_ranks; ++r) {
    const float* piece = d.count_recv.data() + r * stride;
    d.rows_from[size_t(r)] = int64_t(piece[0]);
    n_recv += d.rows_from[size_t(r)];
    n_sent += d.rows_to[size_t(r)];
    for (int64_t e = 0; e < n_expert; ++e) moe.routed_rows[size_t(e)] += int64_t(piece[1 + e]);
  }

  // 3. Dispatch: records in rank order, rows ascending within each piece.
  float* send = d.send.reserve(std::max<int64_t>(n_sent, 1) * record);
  d.send_row.clear();
  float* rec = send;
  for (int r = 0; r < n_ranks; ++r) {
    for (int64_t t = 0; t < n_rows; ++t) {
      if (d.row_to[size_t(t * n_ranks + r)] == 0) continue;
      for (int64_t j = 0; j < k; ++j) {
        const bool here = d.expert_rank[size_t(chosen[t * k + j])] == r;
        rec[j] = here ? float(chosen[t * k + j]) : -1.0f;
        rec[k + j] = here ? chosen_weight[t * k + j] : 0.0f;
      }
      std::memcpy(rec + 2 * k, x + t * n_embd, size_t(n_embd) * sizeof(float));
      d.send_row.push_back(t);
      rec += record;
    }
    d.send_counts[size_t(r)] = int(d.rows_to[size_t(r)] * record);
    d.recv_counts[size_t(r)] = int(d.rows_from[size_t(r)] * record);
  }
  float* recv = d.recv.reserve(std::max<int64_t>(n_recv, 1) * record);
  ranks.all_to_all_v(std::span<const float>(send, size_t(n_sent * record)), d.send_counts,
                     std::span<float>(recv, size_t(n_recv * record)), d.recv_counts);

  // 4. This rank's experts over what it received; the partial sums go back where they came from.
  d.chosen.resize(size_t(n_recv * k));
  d.weight.resize(size_t(n_recv * k));
  for (int64_t i = 0; i < n_recv; ++i)
    for (int64_t j = 0; j < k; ++j) {
      d.chosen[size_t(i * k + j)] = int32_t(recv[i * record + j]);
      d.weight[size_t(i * k + j)] = recv[i * record + k + j];
    }
  float* partial = d.partial.reserve(std::max<int64_t>(n_recv, 1) * n_embd);
  moe_run_experts(recv + 2 * k, record, n_recv, d.chosen.data(), d.weight.data(), k, w, moe, partial, pool);
  // This rank's rows' shared experts now, while slower ranks still run theirs, not after the combine.
  float* shared = d.shared.reserve(std::max<int64_t>(n_rows, 1) * n_embd);
  if (w.has_shared && n_rows > 0) swiglu_ffn(x, n_rows, w.shared, moe.ffn, shared, pool);
  for (int r = 0; r < n_ranks; ++r) {
    d.send_counts[size_t(r)] = int(d.rows_from[size_t(r)] * n_embd);
    d.recv_counts[size_t(r)] = int(d.rows_to[size_t(r)] * n_embd);
  }
  float* back = d.back.reserve(std::max<int64_t>(n_sent, 1) * n_embd);
  ranks.all_to_all_v(std::span<const float>(partial, size_t(n_recv * n_embd)), d.send_counts,
                     std::span<float>(back, size_t(n_sent * n_embd)), d.recv_counts);

  // 5. Each row's partials in rank order (the order they were sent), then its shared experts.
  if (n_rows > 0) std::memset(out, 0, size_t(n_rows * n_embd) * sizeof(float));
  for (int64_t i = 0; i < n_sent; ++i) {
    float* dst = out + d.send_row[size_t(i)] * n_embd;
    const float* src = back + i * n_embd;
    for (int64_t c = 0; c < n_embd; ++c) dst[c] += src[c];
  }
  if (w.has_shared && n_rows > 0) ops::add_inplace(out, shared, n_rows * n_embd);
}

}  // namespace aerie
