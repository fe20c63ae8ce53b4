// DeepSeek-V3 over several ranks (issue 22): which shards a rank keeps, and the expert load it reports.
// The layouts are described in models/deepseek_v3.h.
#include <algorithm>

#include "core/error.h"
#include "models/deepseek_v3.h"
#include "ops/ops.h"

namespace aerie {
namespace {

// The granule an FFN's n_ff splits in: whole FP8 tiles or GGUF blocks of each projection (powers of two, so
// the largest is a multiple of the others).
int64_t ffn_unit(const FfnWeights& w) { return std::max({split_unit(w.gate), split_unit(w.up), split_unit(w.down)}); }

// Rank `rank`'s part of n_ff: balanced, in whole units of ffn_unit.
dist::Range split_ff(const FfnWeights& w, int64_t n, int n_ranks, int rank) {
  const int64_t unit = ffn_unit(w);
  const dist::Range units = dist::balanced_split((n + unit - 1) / unit, n_ranks, rank);
  return {std::min(units.begin * unit, n), std::min(units.end * unit, n)};
}

bool ffn_splits(const FfnWeights& w, dist::Range ff) {
  const int64_t n_ff = w.gate.n_out();
  return ff.size() > 0 && splittable(w.gate, ff, n_ff) && splittable(w.up, ff, n_ff) && splittable(w.down, ff, n_ff);
}

// Whether every rank's part of the FFN's n_ff splits (not when the FFN is int8, or FP8 with fewer tiles than
// ranks).
bool ffn_splits_everywhere(const FfnWeights& w, int n_ranks) {
  for (int r = 0; r < n_ranks; ++r)
    if (!ffn_splits(w, split_ff(w, w.gate.n_out(), n_ranks, r))) return false;
  return true;
}

}  // namespace

void DeepseekV3Model::shard_weights() {
  const DeepseekV3Config& c = config_;
  const int n_ranks = communicator_->size(), rank = communicator_->rank();
  const ParallelLayout layout = layout_;
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
      if (split) {  // this rank's heads: their q (or q_b) and kv_b rows, their o_proj columns (summed over ranks)
        MlaWeights& a = layer.attn;
        LinearWeight& q = a.q_b.weight != nullptr ? a.q_b : a.q;
        const LinearWeight whole_o = a.o;
        q = column_shard(q, {heads.begin * qk, heads.end * qk}, shards_);
        if (a.has_split_kv_b()) {  // the heads' rows of the stacked k_b / v_b: views
          a.k_b = column_shard(a.k_b, {heads.begin * c.kv_lora_rank, heads.end * c.kv_lora_rank}, shards_);
          a.v_b = column_shard(a.v_b, {heads.begin * c.v_head_dim, heads.end * c.v_head_dim}, shards_);
        } else {
          a.kv_b = column_shard(a.kv_b, {heads.begin * kv_b_head, heads.end * kv_b_head}, shards_);
        }
        a.o = row_shard(a.o, {heads.begin * c.v_head_dim, heads.end * c.v_head_dim}, shards_, communicator_);
        release_unsharded_pages(whole_o);  // copied out and never read again here
        if (!layer.is_moe) {
          const FfnWeights whole = layer.dense;
          const dist::Range ff = split_ff(whole, c.n_ff, n_ranks, rank);
          AERIE_CHECK(ffn_splits(whole, ff), "intermediate_size ", c.n_ff, " has no part for rank ", rank,
                      ffn_unit(whole) > 1 ? str_cat(" in whole ", ffn_unit(whole), "-wide ",
                                                    whole.gate.is_fp8() ? "FP8 tiles" : "blocks")
                                          : std::string());
          layer.dense = shard_ffn(whole, ff, shards_, communicator_);  // down_proj summed over ranks
          release_unsharded_pages(whole.down);
        }
      }
      if (layer.is_moe) {
        MoeWeights& moe = layer.moe;
        moe.owned = experts;
        if (layout == ParallelLayout::kData) {
          // Each rank's rows meet the shared experts on that rank: whole everywhere.
        } else if (moe.has_shared && ffn_splits_everywhere(moe.shared, n_ranks)) {
          // A partial sum, added up with the routed experts' by the block's one all-reduce (parallel_moe.h).
          const FfnWeights whole = moe.shared;
          moe.shared = shard_ffn(whole, split_ff(whole, whole.gate.n_out(), n_ranks, rank), shards_);
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
  const bool data_parallel = layout == ParallelLayout::kData;
  context_.experts = ExpertRanks{communicator_,
                                 data_parallel ? ExpertExchange::kDispatchRows : ExpertExchange::kSumOutputs};
  if (data_parallel) rows_ = RankRows(*communicator_, c.n_embd);
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
