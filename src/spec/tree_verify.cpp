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

TreeVerdict verify_tree_sampled(const float* logits, int64_t n_vocab, std::span<const int64_t> tokens,
                                std::span<const int32_t> row_parent, const SamplingParams& params, Rng& rng,
                                VerifyScratch& s, std::vector<int64_t>& path_rows) {
  const int64_t n_rows = int64_t(row_parent.size());
  AERIE_CHECK(n_rows == int64_t(tokens.size()) + 1, "tree verification: ", row_parent.size(), " rows for ",
              tokens.size(), " nodes");
  AERIE_CHECK(!params.greedy(), "sampled tree verification needs temperature > 0");
  if (s.p.size() < size_t(n_vocab)) s.p.resize(size_t(n_vocab));
  path_rows.clear();
  int64_t row = 0;
  while (true) {
    float* p = s.p.data();
    compute_probs(logits + row * n_vocab, n_vocab, params, p, s.sampler);
    double mass = 0.0;  // of p still in play: siblings rejected so far are removed
    for (int64_t t = 0; t < n_vocab; ++t) mass += p[t];
    int64_t child = -1;
    for (int64_t r = row + 1; r < n_rows && child < 0; ++r) {
      if (row_parent[size_t(r)] != row) continue;
      const int64_t x = tokens[size_t(r - 1)];
      AERIE_CHECK(x >= 0 && x < n_vocab, "tree verification: node token ", x, " outside the vocabulary");
      const double px = p[x];
      // Accept with probability p(x) / mass: u * mass < p(x).
      if (px > 0.0 && rng.next_unit_double() * mass < px) {
        child = r;
      } else {
        mass -= px;
        p[x] = 0.0f;
      }
    }
    if (child < 0) {
      // Every child rejected (or none): the next token from what is left of p.
      if (mass > 1e-12) {
        const float inv = float(1.0 / mass);
        for (int64_t t = 0; t < n_vocab; ++t) p[t] *= inv;
      } else {  // rounding left nothing: the row's own distribution
        compute_probs(logits + row * n_vocab, n_vocab, params, p, s.sampler);
      }
      return TreeVerdict{sample_from_probs(p, n_vocab, rng)};
    }
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
