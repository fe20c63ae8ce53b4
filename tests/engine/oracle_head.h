// OracleHead: a test-only DraftHead that agrees with its target as often as the test wants. It keeps each
// sequence's token history (EAGLE alignment: head row at position t carries token x_{t+1}) and, for each
// logit row, runs a second copy of the target over x_0..x_{t+1} from scratch; its logits are the target's
// plus a deterministic disturbance that, at a chosen fraction of positions, makes another token the
// favourite. Features are ignored, so it exercises the engine's bookkeeping, not the EAGLE math.
//
// Several sequences may share a batch (the engine's continuous batching): histories are kept per head cache
// (one per sequence), and every sequence must start with the same token x_0 (a real head never needs it:
// row 0 carries x_1 with x_0's feature). A salt per cache-less run (set_salt) makes repeated runs differ.
#pragma once

#include <cstring>
#include <unordered_map>
#include <vector>

#include "lossless_support.h"
#include "models/model.h"
#include "spec/draft_head.h"

namespace aerie::testing {

class OracleHead final : public DraftHead {
 public:
  OracleHead(Model& target_copy, int64_t x0, double disagree_fraction, float noise = 0.0f)
      : target_(target_copy), x0_(x0), disagree_(disagree_fraction), noise_(noise), layers_{kFinalNormLayer} {}

  DraftOutput forward(const DraftBatch& batch) override {
    const int64_t v = target_.n_vocab();
    const int64_t n = int64_t(batch.token_ids.size());
    logits_.resize(batch.logit_rows.size() * size_t(v));
    size_t next_logit = 0;
    for (const SequenceRows& seq : batch.sequences) {
      const int64_t start = seq.kv->length();
      std::vector<int64_t>& history = histories_[seq.kv];
      history.resize(size_t(start + 1));
      history[0] = x0_;
      for (int64_t r = 0; r < seq.n_rows; ++r) history.push_back(batch.token_ids[size_t(seq.row_begin + r)]);
      seq.kv->check_room(seq.n_rows);
      seq.kv->advance(seq.n_rows);
      for (; next_logit < batch.logit_rows.size() && batch.logit_rows[next_logit] < seq.row_begin + seq.n_rows;
           ++next_logit) {
        const int64_t pos = start + batch.logit_rows[next_logit] - seq.row_begin;  // history x_0..x_{pos+1}
        float* dst = logits_.data() + next_logit * size_t(v);
        const uint64_t h = mix64(uint64_t(pos) * 0x9E3779B97F4A7C15ull ^ uint64_t(history[size_t(pos + 1)]) ^ salt_);
        noisy_target_logits(target_, std::span(history).first(size_t(pos + 2)), noise_, h, dst);
        if (double(mix64(h ^ 0xABCDEFull) >> 11) / 9007199254740992.0 < disagree_)
          dst[mix64(h + 7) % uint64_t(v)] += 50.0f;
      }
    }
    features_.assign(size_t(n * target_.n_embd()), 0.0f);
    return DraftOutput{logits_.data(), int64_t(batch.logit_rows.size()), v, features_.data(), target_.n_embd()};
  }

  KvCache make_kv_cache(int64_t capacity, KvDType dtype) const override { return KvCache(1, 1, 1, capacity, dtype); }
  const std::vector<int>& target_layers() const override { return layers_; }
  int64_t n_embd() const override { return target_.n_embd(); }
  int64_t n_vocab() const override { return target_.n_vocab(); }
  int64_t to_target(int64_t draft_id) const override { return draft_id; }
  bool reduced_vocab() const override { return false; }
  uint64_t weight_bytes() const override { return 0; }
  std::string describe() const override { return "oracle test head"; }
  void set_salt(uint64_t salt) { salt_ = salt; }

 private:
  Model& target_;
  int64_t x0_;
  double disagree_;
  float noise_;
  uint64_t salt_ = 0;
  std::vector<int> layers_;
  std::unordered_map<const KvCache*, std::vector<int64_t>> histories_;
  std::vector<float> logits_, features_;
};

}  // namespace aerie::testing
