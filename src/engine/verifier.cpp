#include "engine/verifier.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "sample/finite_logits.h"

namespace aerie {

Verifier::Verifier(VerifierConfig config, int64_t n_vocab)
    : config_(std::move(config)), n_vocab_(n_vocab), probs_(size_t(n_vocab)) {}

bool Verifier::emit(Request& seq, int64_t token, const float* row, StepResult& out) {
  out.tokens.push_back(token);
  if (token == config_.spec.think_end_token) seq.thinking = false;
  else if (token == config_.spec.think_begin_token) seq.thinking = true;
  if (seq.options.logprobs >= 0) {
    out.logprobs.emplace_back();
    token_logprobs(row, n_vocab_, token, seq.options.logprobs, out.logprobs.back(), logprob_scratch_);
  }
  const auto& stops = seq.options.stop_token_ids;
  const auto& eos = config_.eos;
  const bool is_eos = !seq.options.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end();
  if (is_eos || std::find(stops.begin(), stops.end(), token) != stops.end()) {
    out.finish = FinishReason::kStop;
  } else if (seq.constraint && (!seq.constraint->accept(token) || seq.constraint->finished())) {
    // The structured output is complete (or, in synthetic-acceptance benchmarks, a draft broke it).
    out.finish = seq.constraint->finished() ? FinishReason::kStop : FinishReason::kLength;
  } else {
    const int64_t n_tokens = int64_t(seq.tokens.size() + out.tokens.size());
    if (n_tokens - seq.n_prompt >= seq.options.max_tokens || n_tokens >= config_.max_length)
      out.finish = FinishReason::kLength;
  }
  return out.finish == FinishReason::kNone;
}

void Verifier::prompt_entries(const Request& seq, int64_t position, int64_t n, const float* logits, StepResult& out) {
  check_finite_logits(logits, n, n_vocab_);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits + i * n_vocab_;  // [n_vocab] raw, at position + i
    const int64_t token = seq.tokens[size_t(position + i + 1)];
    PromptTokenLogprob& entry = out.prompt_logprobs.emplace_back();
    entry.token = token;
    token_logprobs(row, n_vocab_, token, seq.options.prompt_logprobs, entry.logprobs, logprob_scratch_);
    // Rank: 1 + the tokens before it in the order of `top` (more likely, or as likely with a lower id).
    const float x = row[token];
    int64_t before = 0;
    for (int64_t t = 0; t < n_vocab_; ++t) before += row[t] > x || (row[t] == x && t < token);
    entry.rank = 1 + before;
  }
}

const float* Verifier::target_rows(const Request& seq, const float* logits, int64_t n_rows,
                                   std::span<const int64_t> drafts) {
  const float* rows = logits;
  if (!seq.options.logit_bias.empty()) rows = add_logit_bias(seq.options.logit_bias, rows, n_rows, n_vocab_, biased_);
  if (seq.options.penalties.active()) {
    if (rows != biased_.data()) rows = add_logit_bias({}, rows, n_rows, n_vocab_, biased_);  // a copy to change
    const auto n_prompt = std::min(size_t(seq.n_prompt), seq.tokens.size());
    penalty_counts_.reset(n_vocab_, std::span(seq.tokens.data(), n_prompt),
                          std::span(seq.tokens.data() + n_prompt, seq.tokens.size() - n_prompt));
    for (int64_t j = 0; j < n_rows; ++j) {
      if (j > 0) penalty_counts_.add_output(drafts[size_t(j - 1)]);
      penalty_counts_.apply(seq.options.penalties, biased_.data() + j * n_vocab_);
    }
  }
  if (seq.constraint)
    rows = mask_verification_rows(*seq.constraint, rows, n_rows, n_vocab_, drafts, config_.eos, constraint_scratch_);
  return rows;
}

void Verifier::run(Request& seq, int64_t n_rows, const float* logits, StepResult& out) {
  out.clear();
  if (seq.prefilling()) {
    out.n_new_positions = n_rows;
    const Sequence::RowSpan entries = seq.prompt_logprob_rows(n_rows);
    if (entries.count > 0) prompt_entries(seq, seq.n_computed + entries.first, entries.count, logits, out);
    if (seq.n_computed + n_rows < int64_t(seq.tokens.size())) return;  // more prompt to come
    logits += entries.count * n_vocab_;  // the last row's
    if (seq.options.max_tokens == 0) {  // prompt log-probabilities only
      out.finish = FinishReason::kLength;
      return;
    }
    check_finite_logits(logits, 1, n_vocab_);
    const float* row = target_rows(seq, logits, 1, {});
    const int64_t y = sample_token(row, n_vocab_, seq.options.sampling, seq.rng, probs_.data(), sampler_scratch_);
    emit(seq, y, logits, out);
    return;
  }
  const int64_t k = int64_t(seq.drafts.size());
  check_finite_logits(logits, k + 1, n_vocab_);
  const float* rows = target_rows(seq, logits, k + 1, seq.drafts);
  const DraftDistributions q{seq.q.empty() ? nullptr : seq.q.data(), config_.n_draft_vocab, seq.draft_ids,
                             config_.draft_to_target};
  AcceptRule rule = accept_rule(seq.options.sampling, config_.spec, config_.has_draft);
  // Drafts without q are deterministic (a token drafter's, e.g. the suffix index beside a head: q one-hot):
  // target match draws the same outputs as rejection sampling against a one-hot q (and is lossless for
  // drafts made any way at all).
  if (rule == AcceptRule::kRejection && seq.q.empty()) rule = AcceptRule::kTargetMatch;
  VerifyResult verdict;
  if (config_.spec.relaxed_thinking && seq.thinking) {
    // Row j is inside the thinking phase unless one of drafts[0..j) ends it.
    const auto end = std::find(seq.drafts.begin(), seq.drafts.end(), config_.spec.think_end_token);
    const int64_t n_relaxed_rows = int64_t(end - seq.drafts.begin()) + 1;
    verdict = verify_drafts_relaxed(rule, rows, n_vocab_, seq.drafts, seq.options.sampling, seq.rng, verify_scratch_, q,
                                    synthetic_model(config_.spec), *config_.spec.relaxed_thinking, n_relaxed_rows);
  } else {
    verdict = verify_drafts(rule, rows, n_vocab_, seq.drafts, seq.options.sampling, seq.rng, verify_scratch_, q,
                            synthetic_model(config_.spec));
  }
  out.n_drafts = k;
  out.n_accepted = verdict.n_accepted;
  out.n_relaxed = verdict.n_relaxed;
  // Token j of the round comes from row j: the accepted drafts, then the target's token. A stop among the
  // accepted drafts ends the round there.
  bool going = true;
  for (int64_t j = 0; j < verdict.n_accepted && going; ++j)
    going = emit(seq, seq.drafts[size_t(j)], logits + j * n_vocab_, out);
  if (going) emit(seq, verdict.next_token, logits + verdict.n_accepted * n_vocab_, out);
  // Cached after the round: x_P and the emitted drafts, i.e. every emitted token but the last.
  out.n_new_positions = int64_t(out.tokens.size());
}

void Verifier::run_tree(Request& seq, const float* logits, StepResult& out) {
  out.clear();
  const std::span<const int32_t> row_parent = seq.draft_parents;
  AERIE_CHECK(!seq.constraint && !seq.options.penalties.active(),
              "draft trees are verified without penalties or structured output");
  const int64_t n_rows = int64_t(row_parent.size());
  check_finite_logits(logits, n_rows, n_vocab_);
  const float* rows = target_rows(seq, logits, n_rows, seq.drafts);  // logit_bias only (no penalties or mask)
  TreeVerdict verdict;
  if (accept_rule(seq.options.sampling, config_.spec, config_.has_draft) == AcceptRule::kSynthetic)
    verdict = verify_tree_synthetic(rows, n_vocab_, row_parent, synthetic_model(config_.spec), seq.options.sampling,
                                    seq.rng, verify_scratch_, path_);
  else if (seq.options.sampling.greedy())
    verdict = verify_tree_greedy(rows, n_vocab_, seq.drafts, row_parent, path_);
  else
    verdict = verify_tree_sampled(rows, n_vocab_, seq.drafts, row_parent, seq.options.sampling, seq.rng,
                                  verify_scratch_, path_,
                                  DraftDistributions{seq.q.empty() ? nullptr : seq.q.data(), config_.n_draft_vocab,
                                                     seq.draft_ids, config_.draft_to_target});
  out.n_drafts = int64_t(seq.drafts.size());
  out.n_accepted = int64_t(path_.size());
  out.tree_path.assign(1, 0);
  out.tree_path.insert(out.tree_path.end(), path_.begin(), path_.end());
  // Each accepted token comes from its parent's row, the next token from the last accepted row.
  bool going = true;
  int64_t row = 0;
  for (size_t j = 0; j < path_.size() && going; ++j) {
    going = emit(seq, seq.drafts[size_t(path_[j] - 1)], logits + row * n_vocab_, out);
    row = path_[j];
  }
  if (going) emit(seq, verdict.next_token, logits + row * n_vocab_, out);
  out.n_new_positions = int64_t(out.tokens.size());
}

}  // namespace aerie
