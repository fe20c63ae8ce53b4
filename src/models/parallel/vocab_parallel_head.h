// The output head split by vocabulary over several ranks (issue 22): rank r holds rows
// dist::balanced_split(n_vocab, ranks, r) of the [n_vocab, n_embd] head (a column-parallel projection,
// models/parallel/parallel_linear.h), computes that slice of every wanted row's logits, and one all-to-all
// gathers the slices on rank 0, the only rank that samples. A gather there moves half the bytes of
// all-reducing zero-filled full rows.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "dist/communicator.h"
#include "models/linear.h"
#include "models/scratch.h"

namespace aerie {

// The buffers of vocab_parallel_logits, reused across calls.
struct VocabParallelScratch {
  ScratchBuffer slice;     // [n_rows, this rank's vocabulary]
  ScratchBuffer gathered;  // [ranks, n_rows, rank's vocabulary] the slices, on rank 0
  std::vector<int> send_counts, recv_counts;
};

// logits [n_rows, n_vocab] = head(x) on rank 0, whose `logits` it fills; on any other rank logits is not
// read (null is fine). x: [n_rows, n_embd] f32; slice: this rank's rows [vocab_begin, vocab_begin +
// slice.n_out()) of the head, which must be its balanced share of n_vocab (an aerie::Error otherwise).
// Every rank calls it with the same n_rows.
void vocab_parallel_logits(const float* x, int64_t n_rows, const LinearWeight& slice, int64_t vocab_begin,
                           int64_t n_vocab, dist::Communicator& ranks, VocabParallelScratch& scratch, float* logits,
                           ThreadPool& pool);

}  // namespace aerie
