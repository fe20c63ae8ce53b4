#include "spec/tree_verify.h"

#include "core/error.h"
#include "ops/ops.h"

namespace aerie {

TreeVerdict verify_tree_greedy(const float* logits, int64_t n_vocab, std::span<const int64_t> tokens,
                               std::span<const int32_t> row_parent, std::vector<int64_t>& path_rows) {
  const int64_t n_rows = int64_t(row_parent.size());
  AERIE_CHECK(n_rows == int64_t(tokens.size()) + 1, "tree verification: ", row_parent.size(), " rows for ",
              tokens.size(), " nodes");
  path_rows.clear();
  int64_t row = 0;
  while (true) {
    const int64_t y = ops::argmax(logits + row * n_vocab, n_vocab);
    int64_t child = -1;
    // Children of `row` come after it (a parent precedes its children).
    for (int64_t r = row + 1; r < n_rows && child < 0; ++r)
      if (row_parent[size_t(r)] == row && tokens[size_t(r - 1)] == y) child = r;
    if (child < 0) return TreeVerdict{y};
    path_rows.push_back(child);
    row = child;
  }
}

namespace {

// Whether row `row` has a child (children come after their parent).
bool has_children(std::span<const int32_t> row_parent, int64_t row) {
  for (size_t r = size_t(row) + 1; r < row_parent.size(); ++r)
    if (row_parent[r] == row) return true;
  return false;
}

// The q row of `row`: the rows before it that have children.
int64_t q_index(std::span<const int32_t> row_parent, int64_t row) {
  int64_t n = 0;
  for (int64_t r = 0; r < row; ++r) n += has_children(row_parent, r) ? 1 : 0;
  return n;
}

// Divides p [n] by its sum (kept as it is when the sum is ~0: see the caller).
bool renormalise(float* p, int64_t n) {
  double total = 0.0;
  for (int64_t t = 0; t < n; ++t) total += p[t];
  if (!(total > 1e-12)) return false;
  const float inv = float(1.0 / total);
  for (int64_t t = 0; t < n; ++t) p[t] *= inv;
  return true;
}

}  // namespace

TreeVerdict verify_tree_sampled(const float* logits, int64_t n_vocab, std::span<const int64_t> tokens,
                                std::span<const int32_t> row_parent, const SamplingParams& params, Rng& rng,
                                VerifyScratch& s, std::vector<int64_t>& path_rows, const DraftDistributions& q) {
  const int64_t n_rows = int64_t(row_parent.size());
  AERIE_CHECK(n_rows == int64_t(tokens.size()) + 1, "tree verification: ", row_parent.size(), " rows for ",
              tokens.size(), " nodes");
  AERIE_CHECK(!params.greedy(), "sampled tree verification needs temperature > 0");
  const bool drawn = q.probs != nullptr;
  AERIE_CHECK(!drawn || (q.n_draft_vocab > 0 && q.draft_ids.size() == tokens.size()),
              "tree verification: the draws' distributions need every node's draft id");
  if (s.p.size() < size_t(n_vocab)) s.p.resize(size_t(n_vocab));
  if (s.residual.size() < size_t(n_vocab)) s.residual.resize(size_t(n_vocab));
  if (drawn && s.q.size() < size_t(q.n_draft_vocab)) s.q.resize(size_t(q.n_draft_vocab));
  float* p = s.p.data();
  float* qw = s.q.data();  // the current row's q as the tries go on (draft vocabulary, not renormalised)
  path_rows.clear();
  int64_t row = 0;
  while (true) {
    compute_probs(logits + row * n_vocab, n_vocab, params, p, s.sampler);
    double q_mass = 1.0;
    if (drawn && has_children(row_parent, row)) {
      const float* qr = q.probs + q_index(row_parent, row) * q.n_draft_vocab;
      std::copy(qr, qr + q.n_draft_vocab, qw);
      q_mass = 0.0;
      for (int64_t d = 0; d < q.n_draft_vocab; ++d) q_mass += qw[d];
    }
    int64_t child = -1;
    for (int64_t r = row + 1; r < n_rows && child < 0; ++r) {
      if (row_parent[size_t(r)] != row) continue;
      const int64_t x = tokens[size_t(r - 1)];
      AERIE_CHECK(x >= 0 && x < n_vocab, "tree verification: node token ", x, " outside the vocabulary");
      const double px = p[x];
      if (!drawn) {  // a point mass on x: accept with p(x), else p without x
        if (px > 0.0 && rng.next_unit_double() < px) {
          child = r;
        } else {
          p[x] = 0.0f;
          if (!renormalise(p, n_vocab)) compute_probs(logits + row * n_vocab, n_vocab, params, p, s.sampler);
        }
        continue;
      }
      const int64_t xd = q.draft_ids[size_t(r - 1)];
      AERIE_CHECK(xd >= 0 && xd < q.n_draft_vocab, "tree verification: node draft id ", xd, " outside the draft vocabulary");
      const double qx = q_mass > 0.0 ? double(qw[xd]) / q_mass : 0.0;
      // Accept with probability min(1, p(x) / q(x)): u * q(x) < p(x).
      if (qx > 0.0 && rng.next_unit_double() * qx < px) {
        child = r;
        continue;
      }
      // Rejected: p <- max(0, p - q) renormalised; q loses x. Should nothing be left (p == q: no rejection
      // but by rounding) p stays as it was.
      if (rejection_residual(p, n_vocab, qw, q_mass, q, s.residual.data()))
        std::copy(s.residual.data(), s.residual.data() + n_vocab, p);
      q_mass -= qw[xd];
      qw[xd] = 0.0f;
    }
    if (child < 0) return TreeVerdict{sample_from_probs(p, n_vocab, rng)};  // what is left of p
    path_rows.push_back(child);
    row = child;
  }
}

TreeVerdict verify_tree_synthetic(const float* logits, int64_t n_vocab, std::span<const int32_t> row_parent,
                                  const SyntheticAcceptance& synthetic, const SamplingParams& params, Rng& rng,
                                  VerifyScratch& s, std::vector<int64_t>& path_rows) {
  const int64_t n_rows = int64_t(row_parent.size());
  AERIE_CHECK(n_rows >= 1 && row_parent[0] == -1, "tree verification: row 0 must be the root");
  path_rows.clear();
  int64_t row = 0;
  while (true) {
    const double first = synthetic.first_child(int64_t(path_rows.size()) + 1);
    int64_t child = -1;
    bool tried = false;  // whether an earlier sibling was tried (and rejected)
    for (int64_t r = row + 1; r < n_rows && child < 0; ++r) {
      if (row_parent[size_t(r)] != row) continue;
      if (rng.next_unit_double() < (tried ? synthetic.sibling_rate : first)) child = r;
      tried = true;
    }
    if (child < 0) {
      const float* at = logits + row * n_vocab;
      if (params.greedy()) return TreeVerdict{ops::argmax(at, n_vocab)};
      if (s.p.size() < size_t(n_vocab)) s.p.resize(size_t(n_vocab));
      compute_probs(at, n_vocab, params, s.p.data(), s.sampler);
      return TreeVerdict{sample_from_probs(s.p.data(), n_vocab, rng)};
    }
    path_rows.push_back(child);
    row = child;
  }
}

}  // namespace aerie
