#include "spec/verify.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/ops.h"

namespace aerie {
namespace {

// The target's token for one row: argmax when greedy, else a draw from the processed distribution.
int64_t target_token(const float* logits, int64_t n_vocab, const SamplingParams& params, Rng& rng,
                     VerifyScratch& s) {
  if (params.greedy()) return ops::argmax(logits, n_vocab);
  compute_probs(logits, n_vocab, params, s.p.data(), s.sampler);
  return sample_from_probs(s.p.data(), n_vocab, rng);
}

int64_t to_target(const DraftDistributions& q, int64_t draft_id) {
  return q.draft_to_target.empty() ? draft_id : q.draft_to_target[size_t(draft_id)];
}

VerifyResult verify_rejection(const float* logits, int64_t n_vocab, std::span<const int64_t> drafts,
                              const SamplingParams& params, Rng& rng, VerifyScratch& s,
                              const DraftDistributions& q) {
  const int64_t k = int64_t(drafts.size());
  AERIE_CHECK(k == 0 || (q.probs != nullptr && int64_t(q.draft_ids.size()) == k && q.n_draft_vocab > 0),
              "rejection sampling needs the draft distributions of every draft");
  for (int64_t i = 0; i < k; ++i) {
    const float* row = logits + i * n_vocab;
    compute_probs(row, n_vocab, params, s.p.data(), s.sampler);
    const float* qi = q.probs + i * q.n_draft_vocab;
    const int64_t x = drafts[size_t(i)];
    const double px = s.p[size_t(x)];
    const double qx = qi[q.draft_ids[size_t(i)]];
    // Accept with probability min(1, p/q): u < p/q  <=>  u * q < p.
    if (qx > 0.0 && rng.next_unit_double() * qx < px) continue;
    // Rejected: draw from max(0, p - q) renormalised; p itself where nothing is left (p == q).
    const bool left = rejection_residual(s.p.data(), n_vocab, qi, 1.0, q, s.residual.data());
    return {i, sample_from_probs(left ? s.residual.data() : s.p.data(), n_vocab, rng)};
  }
  compute_probs(logits + k * n_vocab, n_vocab, params, s.p.data(), s.sampler);
  return {k, sample_from_probs(s.p.data(), n_vocab, rng)};
}

// Whether `draft` passes the relaxed test on one row of logits (see verify.h).
bool relaxed_accepts(const float* logits, int64_t n_vocab, int64_t draft, const RelaxedAcceptance& relaxed) {
  const float x = logits[draft];
  const float best = logits[ops::argmax(logits, n_vocab)];
  // log p(draft) - log p(best) = x - best (the normaliser cancels).
  if (!(double(best) - double(x) <= relaxed.delta)) return false;
  int64_t above = 0;  // tokens strictly more likely than the draft
  for (int64_t t = 0; t < n_vocab; ++t) above += logits[t] > x ? 1 : 0;
  return above < relaxed.top_k;
}

}  // namespace

bool rejection_residual(const float* p, int64_t n_vocab, const float* q_row, double q_mass, const DraftDistributions& q,
                        float* out) {
  std::copy(p, p + n_vocab, out);
  const float inv_q = q_mass > 0.0 ? float(1.0 / q_mass) : 0.0f;
  for (int64_t d = 0; d < q.n_draft_vocab; ++d) {
    if (!(q_row[d] > 0.0f)) continue;
    float& r = out[size_t(to_target(q, d))];
    r = std::max(0.0f, r - q_row[d] * inv_q);
  }
  double total = 0.0;
  for (int64_t t = 0; t < n_vocab; ++t) total += out[t];
  if (!(total > 1e-12)) return false;
  const float inv = float(1.0 / total);
  for (int64_t t = 0; t < n_vocab; ++t) out[t] *= inv;
  return true;
}

void validate(const RelaxedAcceptance& relaxed) {
  AERIE_CHECK(relaxed.top_k >= 1, "relaxed acceptance top_k must be >= 1, got ", relaxed.top_k);
  AERIE_CHECK(std::isfinite(relaxed.delta) && relaxed.delta >= 0.0, "relaxed acceptance delta must be a finite number >= 0, got ",
              relaxed.delta);
}

double SyntheticAcceptance::first_child(int64_t depth) const {
  return std::min(1.0, rate * std::pow(depth_decay, double(depth - 1)));
}

VerifyResult verify_drafts_relaxed(AcceptRule rule, const float* target_logits, int64_t n_vocab,
                                   std::span<const int64_t> drafts, const SamplingParams& params, Rng& rng,
                                   VerifyScratch& scratch, const DraftDistributions& q,
                                   const SyntheticAcceptance& synthetic, const RelaxedAcceptance& relaxed,
                                   int64_t n_relaxed_rows) {
  const int64_t k = int64_t(drafts.size());
  int64_t i = 0;
  while (i < k && i < n_relaxed_rows && relaxed_accepts(target_logits + i * n_vocab, n_vocab, drafts[size_t(i)], relaxed))
    ++i;
  // The rule verifies the rest from row i (the draft distributions and the synthetic depths shifted with them).
  SyntheticAcceptance deeper = synthetic;
  deeper.rate = synthetic.first_child(i + 1);
  DraftDistributions rest = q;
  if (q.probs != nullptr) {
    rest.probs = q.probs + i * q.n_draft_vocab;
    rest.draft_ids = q.draft_ids.subspan(size_t(std::min<int64_t>(i, int64_t(q.draft_ids.size()))));
  }
  VerifyResult out = verify_drafts(rule, target_logits + i * n_vocab, n_vocab, drafts.subspan(size_t(i)), params, rng,
                                   scratch, rest, deeper);
  out.n_accepted += i;
  out.n_relaxed = i;
  return out;
}

VerifyResult verify_drafts(AcceptRule rule, const float* target_logits, int64_t n_vocab,
                           std::span<const int64_t> drafts, const SamplingParams& params, Rng& rng,
                           VerifyScratch& scratch, const DraftDistributions& q, const SyntheticAcceptance& synthetic) {
  const int64_t k = int64_t(drafts.size());
  if (scratch.p.size() < size_t(n_vocab)) scratch.p.resize(size_t(n_vocab));
  if (scratch.residual.size() < size_t(n_vocab)) scratch.residual.resize(size_t(n_vocab));
  if (rule == AcceptRule::kGreedy) AERIE_CHECK(params.greedy(), "greedy acceptance needs temperature 0");
  if (rule == AcceptRule::kRejection && params.greedy()) rule = AcceptRule::kGreedy;  // q is one-hot too
  switch (rule) {
    case AcceptRule::kRejection:
      return verify_rejection(target_logits, n_vocab, drafts, params, rng, scratch, q);
    case AcceptRule::kGreedy:
    case AcceptRule::kTargetMatch:
      for (int64_t i = 0; i < k; ++i) {
        const int64_t y = target_token(target_logits + i * n_vocab, n_vocab, params, rng, scratch);
        if (y != drafts[size_t(i)]) return {i, y};
      }
      return {k, target_token(target_logits + k * n_vocab, n_vocab, params, rng, scratch)};
    case AcceptRule::kSynthetic:
      for (int64_t i = 0; i < k; ++i) {
        if (rng.next_unit_double() < synthetic.first_child(i + 1)) continue;
        return {i, target_token(target_logits + i * n_vocab, n_vocab, params, rng, scratch)};
      }
      return {k, target_token(target_logits + k * n_vocab, n_vocab, params, rng, scratch)};
  }
  return {0, 0};
}

}  // namespace aerie
