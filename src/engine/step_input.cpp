#include "engine/step_input.h"

namespace aerie {

void StepInput::build(std::span<const ScheduledRows> plan, std::span<const int32_t* const> tree_parent) {
  ids.clear();
  rows.clear();
  logit_rows.clear();
  row_begin.clear();
  logit_begin.clear();
  for (size_t i = 0; i < plan.size(); ++i) {
    const ScheduledRows& planned = plan[i];
    Sequence& seq = *planned.seq;
    const int64_t n = planned.n_rows;
    const int64_t begin = int64_t(ids.size());
    row_begin.push_back(begin);
    logit_begin.push_back(int64_t(logit_rows.size()));
    if (seq.prefilling()) {
      ids.insert(ids.end(), seq.tokens.begin() + seq.n_computed, seq.tokens.begin() + seq.n_computed + n);
      const Sequence::RowSpan entries = seq.prompt_logprob_rows(n);  // below the last row: still ascending
      for (int64_t r = entries.first; r < entries.first + entries.count; ++r) logit_rows.push_back(begin + r);
      if (seq.n_computed + n == int64_t(seq.tokens.size())) logit_rows.push_back(begin + n - 1);
    } else {
      ids.push_back(seq.tokens.back());
      ids.insert(ids.end(), seq.drafts.begin(), seq.drafts.end());
      for (int64_t r = 0; r < n; ++r) logit_rows.push_back(begin + r);
    }
    rows.push_back(SequenceRows{begin, n, &*seq.kv, tree_parent.empty() || seq.prefilling() ? nullptr : tree_parent[i]});
    rows.back().adapter = seq.adapter;
  }
}

}  // namespace aerie
