// Speculative decoding statistics for one sequence (summed over requests by the engine later).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace aerie {

struct SpecStats {
  int64_t rounds = 0;           // verification forwards that carried at least one draft
  int64_t draft_tokens = 0;     // drafts proposed (and verified)
  int64_t accepted_tokens = 0;  // drafts accepted
  int64_t relaxed_accepted = 0;  // of them, taken by relaxed thinking acceptance (lossy; 0 when off)
  int64_t plain_rounds = 0;     // decode steps that carried no draft (K = 0, or a token drafter's miss)
  std::vector<int64_t> proposed_at;  // [K] drafts verified at position i of a chain
  std::vector<int64_t> accepted_at;  // [K] drafts accepted at position i
  double draft_seconds = 0;     // time in the head (all draft steps)
  double verify_seconds = 0;    // time in the target's verification forwards and acceptance

  void record(int64_t n_drafts, int64_t n_accepted);
  // Adds another sequence's statistics (totals over several requests).
  void add(const SpecStats& other);
  // 1 + accepted / rounds: tokens produced per target forward.
  double mean_acceptance_length() const;
  double acceptance_rate() const;                       // accepted / drafted
  double mean_draft_tokens() const;                     // drafted / all decode steps (rounds + plain_rounds)
  std::vector<double> acceptance_per_position() const;  // accepted_at[i] / proposed_at[i]
};

}  // namespace aerie
