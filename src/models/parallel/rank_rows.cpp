#include "models/parallel/rank_rows.h"

#include <algorithm>

#include "kv/block_pool.h"

namespace aerie {

LocalRows RankRows::select(const StepBatch& batch, std::span<const int64_t> positions) {
  const int64_t n_tokens = int64_t(batch.token_ids.size());
  if (ranks_ == nullptr) return LocalRows{batch.sequences, batch.token_ids.data(), positions.data(), n_tokens};
  const int n_ranks = ranks_->size(), rank = ranks_->rank();
  sequences_.clear();
  token_ids_.clear();
  positions_.clear();
  row_owner_.resize(size_t(n_tokens));
  local_row_.resize(size_t(n_tokens));
  rows_per_rank_.assign(size_t(n_ranks), 0);  // rows each rank holds so far
  for (const SequenceRows& s : batch.sequences) {
    // The partition of its first block (kv/block_pool.h); an unpaged cache (one sequence run on every rank,
    // as `logits` does) is rank 0's.
    const std::span<const int32_t> blocks = s.kv->block_ids();
    const int64_t owner = s.kv->paged() && !blocks.empty()
                              ? BlockPool::partition_of(blocks[0], s.kv->store().n_blocks(), n_ranks)
                              : 0;
    for (int64_t r = 0; r < s.n_rows; ++r) {
      row_owner_[size_t(s.row_begin + r)] = int32_t(owner);
      local_row_[size_t(s.row_begin + r)] = rows_per_rank_[size_t(owner)] + r;
    }
    rows_per_rank_[size_t(owner)] += s.n_rows;
    if (owner != rank) continue;
    SequenceRows mine = s;
    mine.row_begin = int64_t(token_ids_.size());
    sequences_.push_back(mine);
    token_ids_.insert(token_ids_.end(), batch.token_ids.begin() + s.row_begin,
                      batch.token_ids.begin() + s.row_begin + s.n_rows);
    positions_.insert(positions_.end(), positions.begin() + s.row_begin, positions.begin() + s.row_begin + s.n_rows);
  }
  const int64_t n_rows = int64_t(token_ids_.size());
  rows_run_ += n_rows;
  return LocalRows{sequences_, token_ids_.data(), positions_.data(), n_rows};
}

const float* RankRows::gather(const float* x, int64_t n_tokens, bool all_rows, std::span<const int64_t> rows,
                              int root) {
  if (ranks_ == nullptr) return x;
  const int n_ranks = ranks_->size(), rank = ranks_->rank();
  const int64_t n_embd = n_embd_;
  want_.assign(size_t(n_tokens), all_rows ? 1 : 0);
  for (int64_t r : rows) want_[size_t(r)] = 1;
  // This rank's wanted rows, ascending, sent once to each receiving rank.
  mine_.clear();
  for (int64_t r = 0; r < n_tokens; ++r)
    if (want_[size_t(r)] != 0 && row_owner_[size_t(r)] == rank) mine_.push_back(r);
  const int64_t n_mine = int64_t(mine_.size());
  const int n_to = root < 0 ? n_ranks : 1;
  float* send = send_.reserve(std::max<int64_t>(n_mine * n_to, 1) * n_embd);
  for (int64_t i = 0; i < n_mine; ++i)
    std::copy_n(x + local_row_[size_t(mine_[size_t(i)])] * n_embd, n_embd, send + i * n_embd);
  for (int d = 1; d < n_to; ++d) std::copy_n(send, n_mine * n_embd, send + d * n_mine * n_embd);
  send_counts_.assign(size_t(n_ranks), 0);
  recv_counts_.assign(size_t(n_ranks), 0);
  int64_t n_recv = 0;
  for (int d = 0; d < n_ranks; ++d)
    if (root < 0 || d == root) send_counts_[size_t(d)] = int(n_mine * n_embd);
  const bool receives = root < 0 || rank == root;
  if (receives)
    for (int64_t r = 0; r < n_tokens; ++r)
      if (want_[size_t(r)] != 0) recv_counts_[size_t(row_owner_[size_t(r)])] += int(n_embd), ++n_recv;
  float* recv = recv_.reserve(std::max<int64_t>(n_recv, 1) * n_embd);
  ranks_->all_to_all_v(std::span<const float>(send, size_t(n_mine * n_to * n_embd)), send_counts_,
                       std::span<float>(recv, size_t(n_recv * n_embd)), recv_counts_);
  // The pieces arrive in rank order, each rank's rows ascending.
  float* out = gathered_.reserve(std::max<int64_t>(n_tokens, 1) * n_embd);
  if (!receives) return nullptr;
  const float* from = recv;
  for (int src = 0; src < n_ranks; ++src)
    for (int64_t r = 0; r < n_tokens; ++r)
      if (want_[size_t(r)] != 0 && row_owner_[size_t(r)] == src) {
        std::copy_n(from, n_embd, out + r * n_embd);
        from += n_embd;
      }
  return out;
}

}  // namespace aerie
