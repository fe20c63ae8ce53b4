#include "sched/spec_stats.h"

namespace aerie {

void SpecStats::record(int64_t n_drafts, int64_t n_accepted) {
  if (n_drafts <= 0) return;
  if (int64_t(proposed_at.size()) < n_drafts) {
    proposed_at.resize(size_t(n_drafts), 0);
    accepted_at.resize(size_t(n_drafts), 0);
  }
  ++rounds;
  draft_tokens += n_drafts;
  accepted_tokens += n_accepted;
  for (int64_t i = 0; i < n_drafts; ++i) ++proposed_at[size_t(i)];
  for (int64_t i = 0; i < n_accepted; ++i) ++accepted_at[size_t(i)];
}

void SpecStats::add(const SpecStats& other) {
  rounds += other.rounds;
  draft_tokens += other.draft_tokens;
  accepted_tokens += other.accepted_tokens;
  relaxed_accepted += other.relaxed_accepted;
  plain_rounds += other.plain_rounds;
  if (proposed_at.size() < other.proposed_at.size()) {
    proposed_at.resize(other.proposed_at.size(), 0);
    accepted_at.resize(other.accepted_at.size(), 0);
  }
  for (size_t i = 0; i < other.proposed_at.size(); ++i) {
    proposed_at[i] += other.proposed_at[i];
    accepted_at[i] += other.accepted_at[i];
  }
  draft_seconds += other.draft_seconds;
  verify_seconds += other.verify_seconds;
}

double SpecStats::mean_acceptance_length() const {
  return rounds > 0 ? 1.0 + double(accepted_tokens) / double(rounds) : 0.0;
}

double SpecStats::acceptance_rate() const {
  return draft_tokens > 0 ? double(accepted_tokens) / double(draft_tokens) : 0.0;
}

std::vector<double> SpecStats::acceptance_per_position() const {
  std::vector<double> out(proposed_at.size(), 0.0);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = proposed_at[i] > 0 ? double(accepted_at[i]) / double(proposed_at[i]) : 0.0;
  return out;
}

double SpecStats::mean_draft_tokens() const {
  const int64_t steps = rounds + plain_rounds;
  return steps > 0 ? double(draft_tokens) / double(steps) : 0.0;
}

}  // namespace aerie
