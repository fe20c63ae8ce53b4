// DeepSeek-V3 over several ranks (issue 22): which shards a rank keeps, and the expert load it reports.
// The layouts are described in models/deepseek_v3.h.
#include <algorithm>

#include "core/error.h"
#include "kv/block_pool.h"
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
        if (a.has_split_kv_b()) {  // the heads' rows of the stacked k_b / v_b: views
          a.k_b = column_shard(a.k_b, {heads.begin * c.kv_lora_rank, heads.end * c.kv_lora_rank}, shards_);
          a.v_b = column_shard(a.v_b, {heads.begin * c.v_head_dim, heads.end * c.v_head_dim}, shards_);
        } else {
          a.kv_b = column_shard(a.kv_b, {heads.begin * kv_b_head, heads.end * kv_b_head}, shards_);
        }
        a.o = row_shard(a.o, {heads.begin * c.v_head_dim, heads.end * c.v_head_dim}, shards_);
        release_unsharded_pages(whole_o);  // copied out and never read again here
        if (!layer.is_moe) {
          const FfnWeights whole = layer.dense;
          const dist::Range ff = split_ff(whole, c.n_ff, n_ranks, rank);
          AERIE_CHECK(ffn_splits(whole, ff), "intermediate_size ", c.n_ff, " has no part for rank ", rank,
                      ffn_unit(whole) > 1 ? str_cat(" in whole ", ffn_unit(whole), "-wide ",
                                                    whole.gate.is_fp8() ? "FP8 tiles" : "blocks")
                                          : std::string());
          layer.dense = shard_ffn(whole, ff, shards_);
          release_unsharded_pages(whole.down);
        }
      }
      if (layer.is_moe) {
        MoeWeights& moe = layer.moe;
        moe.owned = experts;
        if (layout == ParallelLayout::kData) {
          // Each rank's rows meet the shared experts on that rank: whole everywhere.
        } else if (moe.has_shared && ffn_splits_everywhere(moe.shared, n_ranks)) {
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
  data_parallel_ = layout == ParallelLayout::kData;
  context_.rows_local = data_parallel_;
  context_.ranks = communicator_;
  context_.attention_split = split;
  context_.dense_split = split;
}

void DeepseekV3Model::gather_owned(const StepBatch& batch) {
  const int n_ranks = communicator_->size(), rank = communicator_->rank();
  const int64_t n_tokens = int64_t(batch.token_ids.size());
  owned_.sequences.clear();
  owned_.token_ids.clear();
  owned_.positions.clear();
  owned_.n_rows = 0;
  owned_.row_owner.resize(size_t(n_tokens));
  owned_.local_row.resize(size_t(n_tokens));
  std::vector<int64_t>& rows_of = owned_.rows_per_rank;  // rows each rank holds so far
  rows_of.assign(size_t(n_ranks), 0);
  for (const SequenceRows& s : batch.sequences) {
    // The partition of its first block (kv/block_pool.h); an unpaged cache (one sequence run on every rank,
    // as `logits` does) is rank 0's.
    const std::span<const int32_t> blocks = s.kv->block_ids();
    const int64_t owner =
        s.kv->paged() && !blocks.empty() ? BlockPool::partition_of(blocks[0], s.kv->store().n_blocks(), n_ranks) : 0;
    for (int64_t r = 0; r < s.n_rows; ++r) {
      owned_.row_owner[size_t(s.row_begin + r)] = int32_t(owner);
      owned_.local_row[size_t(s.row_begin + r)] = rows_of[size_t(owner)] + r;
    }
    rows_of[size_t(owner)] += s.n_rows;
    if (owner != rank) continue;
    SequenceRows mine = s;
    mine.row_begin = owned_.n_rows;
    owned_.sequences.push_back(mine);
    owned_.token_ids.insert(owned_.token_ids.end(), batch.token_ids.begin() + s.row_begin,
                            batch.token_ids.begin() + s.row_begin + s.n_rows);
    owned_.positions.insert(owned_.positions.end(), positions_.begin() + s.row_begin,
                            positions_.begin() + s.row_begin + s.n_rows);
    owned_.n_rows += s.n_rows;
  }
  owned_rows_run_ += owned_.n_rows;
}

const float* DeepseekV3Model::gather_rows(const float* x, int64_t n_tokens, bool all_rows,
                                          std::span<const int64_t> rows, int root) {
  const int n_ranks = communicator_->size(), rank = communicator_->rank();
  const int64_t n_embd = config_.n_embd;
  gather_want_.assign(size_t(n_tokens), all_rows ? 1 : 0);
  for (int64_t r : rows) gather_want_[size_t(r)] = 1;
  // This rank's wanted rows, ascending, sent once to each receiving rank.
  gather_rows_.clear();
  for (int64_t r = 0; r < n_tokens; ++r)
    if (gather_want_[size_t(r)] != 0 && owned_.row_owner[size_t(r)] == rank) gather_rows_.push_back(r);
  const int64_t mine = int64_t(gather_rows_.size());
  const int n_to = root < 0 ? n_ranks : 1;
  float* send = gather_send_.reserve(std::max<int64_t>(mine * n_to, 1) * n_embd);
  for (int64_t i = 0; i < mine; ++i)
    std::copy_n(x + owned_.local_row[size_t(gather_rows_[size_t(i)])] * n_embd, n_embd, send + i * n_embd);
  for (int d = 1; d < n_to; ++d) std::copy_n(send, mine * n_embd, send + d * mine * n_embd);
  gather_send_counts_.assign(size_t(n_ranks), 0);
  gather_recv_counts_.assign(size_t(n_ranks), 0);
  int64_t n_recv = 0;
  for (int d = 0; d < n_ranks; ++d)
    if (root < 0 || d == root) gather_send_counts_[size_t(d)] = int(mine * n_embd);
  if (root < 0 || rank == root)
    for (int64_t r = 0; r < n_tokens; ++r)
      if (gather_want_[size_t(r)] != 0) gather_recv_counts_[size_t(owned_.row_owner[size_t(r)])] += int(n_embd), ++n_recv;
  float* recv = gather_recv_.reserve(std::max<int64_t>(n_recv, 1) * n_embd);
  communicator_->all_to_all_v(std::span<const float>(send, size_t(mine * n_to * n_embd)), gather_send_counts_,
                              std::span<float>(recv, size_t(n_recv * n_embd)), gather_recv_counts_);
  // The pieces arrive in rank order, each rank's rows ascending.
  float* out = gathered_.reserve(std::max<int64_t>(n_tokens, 1) * n_embd);
  if (n_recv == 0) return out;
  const float* from = recv;
  for (int src = 0; src < n_ranks; ++src)
    for (int64_t r = 0; r < n_tokens; ++r)
      if (gather_want_[size_t(r)] != 0 && owned_.row_owner[size_t(r)] == src) {
        std::copy_n(from, n_embd, out + r * n_embd);
        from += n_embd;
      }
  return out;
}

ForwardOutput DeepseekV3Model::forward_rows_local(const StepBatch& batch) {
  const DeepseekV3Config& c = config_;
  const int64_t n_tokens = int64_t(batch.token_ids.size());
  gather_owned(batch);
  const int64_t n_rows = owned_.n_rows;
  float* x = x_.reserve(std::max<int64_t>(n_rows, 1) * c.n_embd);  // [n_rows, n_embd] this rank's stream
  if (n_rows > 0) ops::embedding(*weights_.embed, owned_.token_ids.data(), n_rows, x);
  const std::span<const int> captures = batch.capture_layers;
  auto captured = [&](int layer) { return std::find(captures.begin(), captures.end(), layer) != captures.end(); };
  for (int64_t il = 0; il < c.n_layer; ++il) {
    if (captured(int(il))) {  // for the draft head, on rank 0
      const float* all = gather_rows(x, n_tokens, true, {}, 0);
      if (communicator_->rank() == 0) capture_.capture(batch, int(il), all, n_tokens, c.n_embd);
    }
    deepseek_decoder_layer(x, n_rows, owned_.sequences, owned_.positions.data(), il, weights_.layers[size_t(il)],
                           context_, layer_scratch_, pool_);
  }
  // The head is split by vocabulary: every rank needs the logit rows (and every row where the last layer's
  // output or its final norm is captured).
  const bool all_rows = captured(int(c.n_layer)) || captured(kFinalNormLayer);
  const float* rows = gather_rows(x, n_tokens, all_rows, batch.logit_rows, -1);
  return end_.finish_target(batch, rows, c.n_embd, c.n_layer,
                            OutputHead{weights_.norm, float(c.rms_norm_eps), weights_.output, "head", communicator_,
                                       vocab_.begin, c.n_vocab},
                            capture_, pool_);
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
