#include "models/parallel/vocab_parallel_head.h"

#include <cstring>
#include <span>

#include "core/error.h"
#include "dist/shard.h"

namespace aerie {

void vocab_parallel_logits(const float* x, int64_t n_rows, const LinearWeight& slice, int64_t vocab_begin,
                           int64_t n_vocab, dist::Communicator& ranks, VocabParallelScratch& scratch, float* logits,
                           ThreadPool& pool) {
  const int n_ranks = ranks.size(), rank = ranks.rank();
  const int64_t n_slice = slice.n_out();
  const dist::Range mine{vocab_begin, vocab_begin + n_slice};
  AERIE_CHECK(dist::balanced_split(n_vocab, n_ranks, rank) == mine, "output head: rank ", rank, " holds vocabulary [",
              vocab_begin, ", ", vocab_begin + n_slice, "), not its balanced share of ", n_vocab);
  float* part = scratch.slice.reserve(n_rows * n_slice);  // [n_rows, n_slice] this rank's logits
  linear(x, n_rows, slice, part, pool);
  scratch.send_counts.assign(size_t(n_ranks), 0);
  scratch.recv_counts.assign(size_t(n_ranks), 0);
  scratch.send_counts[0] = int(n_rows * n_slice);
  if (rank == 0)
    for (int r = 0; r < n_ranks; ++r)
      scratch.recv_counts[size_t(r)] = int(n_rows * dist::balanced_split(n_vocab, n_ranks, r).size());
  float* gathered = scratch.gathered.reserve(rank == 0 ? n_rows * n_vocab : 1);
  ranks.all_to_all_v(std::span<const float>(part, size_t(n_rows * n_slice)), scratch.send_counts,
                     std::span<float>(gathered, rank == 0 ? size_t(n_rows * n_vocab) : 0), scratch.recv_counts);
  if (rank != 0) return;
  const float* from = gathered;  // rank r's [n_rows, its vocabulary], in rank order
  for (int r = 0; r < n_ranks; ++r) {
    const dist::Range v = dist::balanced_split(n_vocab, n_ranks, r);
    for (int64_t i = 0; i < n_rows; ++i, from += v.size())
      std::memcpy(logits + i * n_vocab + v.begin, from, size_t(v.size()) * sizeof(float));
  }
}

}  // namespace aerie
