// The rows of a step's batch that this rank runs through the decoder layers, chosen once at load.
//   Every row (one process, tensor and expert parallelism): select() views the batch as it is and gather()
//   returns the stream it is given: nothing moves.
//   Data-parallel attention (issue 22, ParallelLayout::kData): each sequence runs only on the rank whose
//   partition of the engine's KV pool holds its blocks (kv/block_pool.h). select() gathers this rank's
//   sequences, in batch order, into a sub-batch that stays on this rank through every layer (its MoE layers
//   exchange rows with the experts' owners: models/parallel/moe_dispatch.h), and gather() brings rows of it
//   back into batch order where the whole batch is needed: a captured layer (for the draft head, on rank 0)
//   and the output head (split by vocabulary: the logit rows on every rank).
// So a model has one forward: embed select()'s rows, run the layers over them, gather() what the end reads.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dist/communicator.h"
#include "models/model.h"
#include "models/scratch.h"

namespace aerie {

// The rows this rank runs: a view of the batch, or of RankRows' sub-batch.
struct LocalRows {
  std::span<const SequenceRows> sequences;  // row_begin counts rows of these rows
  const int64_t* token_ids = nullptr;       // [n_rows]
  const int64_t* positions = nullptr;       // [n_rows]
  int64_t n_rows = 0;
};

class RankRows {
 public:
  RankRows() = default;  // every row
  // Data parallel: each of `ranks` runs its own sequences' rows of n_embd floats. ranks outlives this.
  RankRows(dist::Communicator& ranks, int64_t n_embd) : ranks_(&ranks), n_embd_(n_embd) {}
  RankRows(const RankRows&) = delete;
  RankRows& operator=(const RankRows&) = delete;
  RankRows(RankRows&&) = default;
  RankRows& operator=(RankRows&&) = default;

  bool data_parallel() const { return ranks_ != nullptr; }
  // The KV partitions of the engine's block pool (Model::kv_partitions) and this rank's.
  int kv_partitions() const { return ranks_ != nullptr ? ranks_->size() : 1; }
  int kv_partition() const { return ranks_ != nullptr ? ranks_->rank() : 0; }
  // Rows whose attention this rank has run since load (data parallel; 0 otherwise).
  int64_t rows_run() const { return rows_run_; }

  // This step's rows on this rank; positions [batch rows] as fill_positions gives them. The view lives until
  // the next select().
  LocalRows select(const StepBatch& batch, std::span<const int64_t> positions);
  // The batch rows `rows` (ascending; all of them when all_rows) of the local stream x [select().n_rows,
  // n_embd], in batch order in a [n_tokens, n_embd] buffer, on rank `root` (-1: every rank); null on a rank
  // that receives nothing. Every row: x itself. Under data parallelism every rank must call it alike.
  const float* gather(const float* x, int64_t n_tokens, bool all_rows, std::span<const int64_t> rows, int root);

 private:
  dist::Communicator* ranks_ = nullptr;  // data parallel only
  int64_t n_embd_ = 0;
  int64_t rows_run_ = 0;
  // This step's sub-batch (data parallel).
  std::vector<SequenceRows> sequences_;
  std::vector<int64_t> token_ids_, positions_;  // [n_rows]
  std::vector<int32_t> row_owner_;              // [batch rows] the rank that runs the row's sequence
  std::vector<int64_t> local_row_;              // [batch rows] the row's index in the sub-batch on its owner
  std::vector<int64_t> rows_per_rank_;          // [ranks]
  // gather()'s buffers, reused.
  ScratchBuffer gathered_, send_, recv_;
  std::vector<int> send_counts_, recv_counts_;
  std::vector<char> want_;
  std::vector<int64_t> mine_;
};

}  // namespace aerie
