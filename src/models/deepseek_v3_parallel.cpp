// DeepSeek-V3 over several ranks (issue 22): which shards a rank keeps, and the expert load it reports.
// The layouts are described in models/deepseek_v3.h.
#include <algorithm>

#include "core/error.h"
#include "kv/block_pool.h"
#include "models/deepseek_v3.h"

namespace aerie {
namespace {

// Rank `rank`'s part of a dimension n of w: balanced, in whole 128-row/column tiles when w is FP8.
dist::Range split_dim(const LinearWeight& w, int64_t n, int n_ranks, int rank) {
  if (!w.is_fp8()) return dist::balanced_split(n, n_ranks, rank);
  const dist::Range tiles = dist::balanced_split((n + kFp8Tile - 1) / kFp8Tile, n_ranks, rank);
  return {std::min(tiles.begin * kFp8Tile, n), std::min(tiles.end * kFp8Tile, n)};
}

bool ffn_splits(const FfnWeights& w, dist::Range ff) {
  const int64_t n_ff = w.gate.n_out();
  return ff.size() > 0 && splittable(w.gate, ff, n_ff) && splittable(w.up, ff, n_ff) && splittable(w.down, ff, n_ff);
}

// Whether every rank's part of the FFN's n_ff splits (not when the FFN is int8, or FP8 with fewer tiles than
// ranks).
bool ffn_splits_everywhere(const FfnWeights& w, int n_ranks) {
  for (int r = 0; r < n_ranks; ++r)
    if (!ffn_splits(w, split_dim(w.gate, w.gate.n_out(), n_ranks, r))) return false;
  return true;
}

}  // namespace

void DeepseekV3Model::shard_weights(ParallelLayout layout) {
  const DeepseekV3Config& c = config_;
  const int n_ranks = communicator_->size(), rank = communicator_->rank();
  const bool split = layout == ParallelLayout::kTensor;
  const dist::Range heads = dist::balanced_split(c.n_head, n_ranks, rank);
  AERIE_CHECK(!split || c.n_head >= n_ranks, store_.source(), ": tensor parallel ", n_ranks, " needs at least ",
              n_ranks, " attention heads to split; this model has ", c.n_head,
              " (--expert-parallel keeps attention whole on every rank)");
  const int64_t qk = c.qk_head_dim(), kv_b_head = c.qk_nope_head_dim + c.v_head_dim;
  const dist::Range experts = dist::balanced_split(c.n_expert, n_ranks, rank);
  AERIE_CHECK(c.n_expert >= n_ranks, store_.source(), ": ", n_ranks, " ranks cannot share ", c.n_expert,
              " routed experts: every rank needs one");
  for (int64_t il = 0; il < c.n_layer; ++il) {
    DeepseekLayerWeights& layer = weights_.layers[size_t(il)];
    const std::string p = "model.layers." + std::to_string(il) + ".";
    try {
      if (split) {  // this rank's heads: their q (or q_b) and kv_b rows, their o_proj columns
        MlaWeights& a = layer.attn;
        LinearWeight& q = a.q_b.weight != nullptr ? a.q_b : a.q;
        const LinearWeight whole_o = a.o;
        q = column_shard(q, {heads.begin * qk, heads.end * qk}, shards_);
        a.kv_b = column_shard(a.kv_b, {heads.begin * kv_b_head, heads.end * kv_b_head}, shards_);
        a.o = row_shard(a.o, {heads.begin * c.v_head_dim, heads.end * c.v_head_dim}, shards_);
        release_unsharded_pages(whole_o);  // copied out and never read again here
        if (!layer.is_moe) {
          const FfnWeights whole = layer.dense;
          const dist::Range ff = split_dim(whole.gate, c.n_ff, n_ranks, rank);
          AERIE_CHECK(ffn_splits(whole, ff), "intermediate_size ", c.n_ff, " has no part for rank ", rank,
                      whole.gate.is_fp8() ? " in whole 128-wide FP8 tiles" : "");
          layer.dense = shard_ffn(whole, ff, shards_);
          release_unsharded_pages(whole.down);
        }
      }
      if (layer.is_moe) {
        MoeWeights& moe = layer.moe;
        moe.owned = experts;
        if (moe.has_shared && ffn_splits_everywhere(moe.shared, n_ranks)) {
          const FfnWeights whole = moe.shared;
          moe.shared = shard_ffn(whole, split_dim(whole.gate, whole.gate.n_out(), n_ranks, rank), shards_);
          release_unsharded_pages(whole.down);
        } else {
          moe.shared_here = rank == 0;  // whole on rank 0, added once by the sum
        }
      }
    } catch (const Error& e) {
      throw Error(str_cat(store_.source(), ": ", n_ranks, " ranks cannot split ", p, "*: ", e.what(),
                          split ? " (--expert-parallel keeps attention and dense layers whole on every rank)" : ""));
    }
  }
  vocab_ = dist::balanced_split(c.n_vocab, n_ranks, rank);
  whole_output_ = weights_.output;  // what a draft head on rank 0 borrows (output_head())
  weights_.output = column_shard(weights_.output, vocab_, shards_);
  if (split) context_.mla.n_head = heads.size();
  data_parallel_ = layout == ParallelLayout::kData;
  if (data_parallel_) context_.owned = &owned_;
  context_.ranks = communicator_;
  context_.attention_split = split;
  context_.dense_split = split;
}

void DeepseekV3Model::gather_owned(const StepBatch& batch) {
  const int n_ranks = communicator_->size(), rank = communicator_->rank();
  owned_.sequences.clear();
  owned_.source_rows.clear();
  owned_.positions.clear();
  owned_.n_rows = 0;
  owned_.owner.clear();
  owned_.rows_per_rank.assign(size_t(n_ranks), 0);
  for (const SequenceRows& s : batch.sequences) {
    // The partition of its first block (kv/block_pool.h); an unpaged cache (one sequence run on every rank,
    // as `logits` does) is rank 0's.
    const std::span<const int32_t> blocks = s.kv->block_ids();
    const int64_t owner =
        s.kv->paged() && !blocks.empty() ? BlockPool::partition_of(blocks[0], s.kv->store().n_blocks(), n_ranks) : 0;
    owned_.owner.push_back(int32_t(owner));
    owned_.rows_per_rank[size_t(owner)] += s.n_rows;
    if (owner != rank) continue;
    SequenceRows mine = s;
    mine.row_begin = owned_.n_rows;
    owned_.sequences.push_back(mine);
    owned_.source_rows.push_back(s.row_begin);
    owned_.positions.insert(owned_.positions.end(), positions_.begin() + s.row_begin,
                            positions_.begin() + s.row_begin + s.n_rows);
    owned_.n_rows += s.n_rows;
  }
  owned_rows_run_ += owned_.n_rows;
}

std::vector<int64_t> DeepseekV3Model::expert_load() const {
  const int n_ranks = communicator_ != nullptr ? communicator_->size() : 1;
  std::vector<int64_t> load(size_t(n_ranks), 0);
  const std::vector<int64_t>& rows = layer_scratch_.moe.routed_rows;
  for (int r = 0; r < n_ranks; ++r) {
    const dist::Range owned = dist::balanced_split(config_.n_expert, n_ranks, r);
    for (int64_t e = owned.begin; e < owned.end && e < int64_t(rows.size()); ++e) load[size_t(r)] += rows[size_t(e)];
  }
  return load;
}

}  // namespace aerie
