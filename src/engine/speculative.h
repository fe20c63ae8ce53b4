// Speculative generation of one sequence with an EAGLE draft head: chain drafting of K tokens, one
// target forward to verify them, acceptance (spec/verify.h), rollback of both KV caches, and the head's
// next proposals — the whole round in one step() with buffers allocated once.
//
// Invariant between rounds: the target's and the head's caches both hold positions 0..P-1, the last
// emitted token x_P is in neither, and drafts d_1..d_K for the positions after it are ready.
// A round: target forward over [x_P, d_1..d_K] (K+1 rows, features captured) -> accept a drafts and one
// target token y -> target cache kept to P+1+a, head cache to P -> head forward over the accepted rows with
// the target's features [(f_P, d_1) .. (f_{P+a}, y)] gives d'_1, then K-1 one-row steps on the head's own
// features give d'_2..d'_K.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/generator.h"
#include "models/model.h"
#include "spec/draft_head.h"
#include "spec/spec_stats.h"
#include "spec/verify.h"

namespace aerie {

enum class DraftProposal {
  kSampled,  // T > 0: drafts drawn from the head's processed distribution, verified by rejection sampling
  kArgmax,   // drafts are the head's argmax, verified by drawing from the target and comparing
};

struct SpecOptions {
  int64_t num_speculative_tokens = 3;  // K
  DraftProposal proposal = DraftProposal::kSampled;
  // In [0, 1]: synthetic acceptance for performance tests (output is not the target's). Negative: off.
  double synthetic_acceptance = -1.0;
};

class SpeculativeDecoder {
 public:
  SpeculativeDecoder(Model& target, DraftHead& head, const SpecOptions& spec, const GenerateOptions& options);

  // Prefills the prompt (target and head), emits the first token and proposes the first drafts.
  GenerateResult run(std::span<const int64_t> prompt, const TokenCallback& on_token = nullptr);

  const SpecStats& stats() const { return stats_; }
  const KvCache& target_cache() const { return *target_kv_; }
  const KvCache& head_cache() const { return *head_kv_; }

 private:
  // Emits one token; returns false when generation ends (stop token, max tokens, or the callback).
  bool emit(int64_t token);
  // Head forward over rows with target features, then k-1 self steps: fills drafts_ (k of them).
  void propose(std::span<const int64_t> tokens, std::span<const float* const> target_parts, int64_t k);
  void pick_draft(const float* logits, int64_t i);
  // Drafts the next round may carry: K, fewer near max_tokens or the cache's end.
  int64_t next_k() const;
  AcceptRule rule() const;

  Model& target_;
  DraftHead& head_;
  SpecOptions spec_;
  GenerateOptions options_;
  int64_t k_;
  int64_t capacity_;
  std::optional<KvCache> target_kv_, head_kv_;
  Rng rng_;
  SpecStats stats_;
  VerifyScratch verify_scratch_;
  SamplerScratch sampler_scratch_;

  // Buffers allocated once.
  std::vector<int> capture_layers_;
  std::vector<int64_t> verify_ids_;     // [K+1] x_P, d_1..d_K
  std::vector<int64_t> verify_rows_;    // [K+1] 0..K
  std::vector<int64_t> drafts_;         // [K] target ids
  std::vector<int64_t> draft_ids_;      // [K] draft-vocabulary ids
  std::vector<int64_t> draft_to_target_;  // [n_draft_vocab] (empty for a full-vocabulary head)
  std::vector<float> q_;                // [K, n_draft_vocab] draft distributions (sampled proposals)
  std::vector<float> feature_;          // [n_embd_head] the head's last feature
  std::vector<float> target_probs_;     // [n_vocab] for the first token
  std::vector<int64_t> head_ids_;       // [max(K+1, prompt)] tokens of the head's kTarget rows
  std::vector<const float*> parts_;     // [n target layers]

  GenerateResult result_;
  const TokenCallback* on_token_ = nullptr;
  int64_t n_drafts_ = 0;  // drafts ready for the next verification
};

// Convenience: one call, like generate(), that also returns the speculation statistics.
GenerateResult generate_speculative(Model& target, DraftHead& head, std::span<const int64_t> prompt,
                                    const GenerateOptions& options, const SpecOptions& spec,
                                    const TokenCallback& on_token = nullptr, SpecStats* stats = nullptr);

}  // namespace aerie
