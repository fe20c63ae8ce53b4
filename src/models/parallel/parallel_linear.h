// The parallel projections of tensor parallelism (issue 22; the split itself is dist/shard.h), as
// Megatron-LM and vLLM cut a layer's matrices:
//   column-parallel (q, k, v, q_b, kv_b, gate, up, the vocabulary-split head): a rank keeps a contiguous range
//     of the [out, in] weight's rows and computes that slice of the output; nothing is exchanged. The rows
//     are a view into the mmapped checkpoint, nothing copied;
//   row-parallel (o, down): a rank keeps a range of the columns and its output is a partial sum. Given the
//     ranks, the projection sums it over them itself (LinearWeight::sum_over_ranks, one all-reduce inside
//     linear()), so a block built of these projections reads the same at any rank count; without, the partial
//     sum is left to the block that owns it (the MoE's shared experts, summed once with the routed ones:
//     models/parallel/parallel_moe.h). The matmul kernels read whole contiguous rows (ops::matmul takes no
//     row stride), so the column range is copied once at load into memory the ShardStore owns (1/T of the
//     matrix per rank); its bias stays on rank 0 only so the sum adds it once.
// F32/BF16/F16 weights split anywhere; FP8 weights split on their 128x128 scale tiles (the shard keeps whole
// tiles and views or copies their scales alike); GGUF block types (Q8_0 ... Q6_K) rows anywhere and columns
// on their blocks; int8 and int4 are refused.
#pragma once

#include <deque>

#include "core/aligned_buffer.h"
#include "core/tensor.h"
#include "dist/communicator.h"
#include "dist/shard.h"
#include "models/blocks.h"
#include "models/ffn.h"
#include "models/linear.h"

namespace aerie {

// What the shards own beyond views: the copied column ranges and every sliced Tensor header (LinearWeight
// holds pointers to Tensors). Non-copyable; addresses stay fixed as it grows (deques).
class ShardStore {
 public:
  ShardStore() = default;
  ShardStore(const ShardStore&) = delete;
  ShardStore& operator=(const ShardStore&) = delete;

  const Tensor* keep(const Tensor& t);  // a stable copy of the header
  AlignedBuffer& new_buffer(size_t bytes);
  uint64_t owned_bytes() const;

 private:
  std::deque<Tensor> tensors_;
  std::deque<AlignedBuffer> buffers_;
};

constexpr int64_t kFp8Tile = 128;  // FP8 checkpoints scale 128x128 tiles (models/linear.h)

// The granule a split of w keeps whole: 128 for FP8 (its scale tiles), a GGUF block type's block (32 or 256
// values along a row; rows split anywhere, but splittable does not tell rows from columns), 1 for floats.
int64_t split_unit(const LinearWeight& w);
// Whether w can be split at rows_or_columns (of n): on split_unit edges; never int8 / int4.
bool splittable(const LinearWeight& w, dist::Range rows_or_columns, int64_t n);
// Column-parallel: rows `rows` of w ([n_out, n_in] -> [rows.size(), n_in]), a view.
LinearWeight column_shard(const LinearWeight& w, dist::Range rows, ShardStore& store);
// Row-parallel: columns `columns` of w ([n_out, n_in] -> [n_out, columns.size()]), copied into store; its
// output summed over `ranks` by linear() (null: a partial sum the caller adds up).
LinearWeight row_shard(const LinearWeight& w, dist::Range columns, ShardStore& store,
                       dist::Communicator* ranks = nullptr);
// bias [n] -> bias[range], a view; null stays null.
const Tensor* bias_shard(const Tensor* bias, dist::Range range, ShardStore& store);

// Drops this process's mapping of the whole pages inside w's matrix (madvise MADV_DONTNEED) once its row
// shard has been copied out, so a rank's resident memory holds its shards and not every matrix it copied
// from: a file-mapped page is read again from the page cache if touched, but an owned (heap) copy would read
// as zeros, so call it only for a matrix this process never reads again.
void release_unsharded_pages(const LinearWeight& w);

// gate and up rows `ff`, down columns `ff` (ff = dist::balanced_split(n_ff, T, rank)); down summed over
// `ranks` (null: the FFN's output is this rank's partial sum).
FfnWeights shard_ffn(const FfnWeights& w, dist::Range ff, ShardStore& store, dist::Communicator* ranks = nullptr);
// q rows and o columns shard.q_rows, k and v rows shard.kv_rows, their biases alike; o_bias kept on rank 0;
// o summed over `ranks` (null: the block's output is this rank's partial sum).
AttentionWeights shard_attention(const AttentionWeights& w, const dist::AttentionShard& shard, int rank,
                                 ShardStore& store, dist::Communicator* ranks = nullptr);

}  // namespace aerie
