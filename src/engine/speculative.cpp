#include "engine/speculative.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "ops/ops.h"

namespace aerie {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

SpeculativeDecoder::SpeculativeDecoder(Model& target, DraftHead& head, const SpecOptions& spec,
                                       const GenerateOptions& options)
    : target_(target), head_(head), spec_(spec), options_(options), k_(spec.num_speculative_tokens),
      capacity_(0), rng_(options.sampling.seed) {
  AERIE_CHECK(k_ >= 1 && k_ <= 32, "num_speculative_tokens must be in [1, 32], got ", k_);
  AERIE_CHECK(options.max_tokens >= 0, "generate: max_tokens must be >= 0");
  AERIE_CHECK(spec.synthetic_acceptance <= 1.0, "synthetic acceptance must be in [0, 1], got ",
              spec.synthetic_acceptance);
  validate(options.sampling);
  const int64_t n_draft_vocab = head.n_vocab();
  if (head.reduced_vocab()) {
    draft_to_target_.resize(size_t(n_draft_vocab));
    for (int64_t d = 0; d < n_draft_vocab; ++d) {
      const int64_t t = head.to_target(d);
      AERIE_CHECK(t >= 0 && t < target.n_vocab(), "draft head maps draft id ", d, " to target id ", t,
                  " outside the target vocabulary [0, ", target.n_vocab(), ")");
      draft_to_target_[size_t(d)] = t;
    }
  } else {
    AERIE_CHECK(n_draft_vocab == target.n_vocab(), "draft head vocabulary ", n_draft_vocab,
                " differs from the target's ", target.n_vocab(), " and the head has no draft-to-target map");
  }
  capture_layers_ = head.target_layers();
  verify_ids_.resize(size_t(k_ + 1));
  verify_rows_.resize(size_t(k_ + 1));
  for (int64_t i = 0; i <= k_; ++i) verify_rows_[size_t(i)] = i;
  drafts_.resize(size_t(k_));
  draft_ids_.resize(size_t(k_));
  if (rule() == AcceptRule::kRejection) q_.resize(size_t(k_ * n_draft_vocab));
  feature_.resize(size_t(head.n_embd()));
  target_probs_.resize(size_t(target.n_vocab()));
  parts_.resize(capture_layers_.size());
}

AcceptRule SpeculativeDecoder::rule() const {
  if (spec_.synthetic_acceptance >= 0.0) return AcceptRule::kSynthetic;
  if (options_.sampling.greedy()) return AcceptRule::kGreedy;
  return spec_.proposal == DraftProposal::kSampled ? AcceptRule::kRejection : AcceptRule::kTargetMatch;
}

int64_t SpeculativeDecoder::next_k() const {
  const int64_t remaining = options_.max_tokens - int64_t(result_.tokens.size());
  const int64_t room = capacity_ - target_kv_->length() - 1;
  return std::max<int64_t>(0, std::min({k_, remaining - 1, room}));
}

bool SpeculativeDecoder::emit(int64_t token) {
  result_.tokens.push_back(token);
  const bool keep_going = (on_token_ && *on_token_) ? (*on_token_)(token) : true;
  const auto& stops = options_.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end() || !keep_going) {
    result_.finish_reason = "stop";
    return false;
  }
  if (int64_t(result_.tokens.size()) >= options_.max_tokens) {
    result_.finish_reason = "length";
    return false;
  }
  return true;
}

void SpeculativeDecoder::pick_draft(const float* logits, int64_t i) {
  const int64_t n_draft_vocab = head_.n_vocab();
  int64_t d;
  if (rule() == AcceptRule::kRejection) {
    float* q = q_.data() + i * n_draft_vocab;
    compute_probs(logits, n_draft_vocab, options_.sampling, q, sampler_scratch_);
    d = sample_from_probs(q, n_draft_vocab, rng_);
  } else {
    d = ops::argmax(logits, n_draft_vocab);
  }
  draft_ids_[size_t(i)] = d;
  drafts_[size_t(i)] = draft_to_target_.empty() ? d : draft_to_target_[size_t(d)];
}

void SpeculativeDecoder::propose(std::span<const int64_t> tokens, std::span<const float* const> target_parts,
                                 int64_t k) {
  const auto start = Clock::now();
  const int64_t m = int64_t(tokens.size());
  const int64_t n_embd = head_.n_embd();
  {
    const SequenceRows seq{0, m, &*head_kv_};
    const int64_t last = m - 1;
    const DraftBatch batch{tokens, FeatureSource::kTarget, target_parts, std::span(&seq, 1), std::span(&last, 1)};
    const DraftOutput out = head_.forward(batch);
    pick_draft(out.logits, 0);
    std::memcpy(feature_.data(), out.features + last * n_embd, size_t(n_embd) * sizeof(float));
  }
  for (int64_t i = 1; i < k; ++i) {
    const SequenceRows seq{0, 1, &*head_kv_};
    const int64_t row = 0;
    const float* part = feature_.data();
    const DraftBatch batch{std::span(&drafts_[size_t(i - 1)], 1), FeatureSource::kSelf, std::span(&part, 1),
                           std::span(&seq, 1), std::span(&row, 1)};
    const DraftOutput out = head_.forward(batch);
    pick_draft(out.logits, i);
    std::memcpy(feature_.data(), out.features, size_t(n_embd) * sizeof(float));
  }
  n_drafts_ = k;
  stats_.draft_seconds += seconds_since(start);
}

GenerateResult SpeculativeDecoder::run(std::span<const int64_t> prompt, const TokenCallback& on_token) {
  AERIE_CHECK(!prompt.empty(), "generate: the prompt is empty");
  const int64_t n_prompt = int64_t(prompt.size());
  capacity_ = options_.max_length > 0 ? options_.max_length : n_prompt + options_.max_tokens + k_;
  AERIE_CHECK(n_prompt < capacity_, "generate: prompt of ", n_prompt, " tokens does not fit max length ", capacity_);
  target_kv_.emplace(target_.make_kv_cache(capacity_));
  head_kv_.emplace(head_.make_kv_cache(capacity_));
  result_ = GenerateResult{};
  result_.n_prompt = n_prompt;
  result_.finish_reason = "length";
  result_.tokens.reserve(size_t(options_.max_tokens));
  stats_ = SpecStats{};
  on_token_ = &on_token;
  n_drafts_ = 0;
  if (options_.max_tokens == 0) return result_;
  head_ids_.assign(prompt.begin() + 1, prompt.end());
  head_ids_.reserve(size_t(std::max<int64_t>(n_prompt, k_ + 1)));

  // Prefill: the target over the prompt, features captured for the head.
  const auto start = Clock::now();
  int64_t last_token;
  bool going;
  {
    const SequenceRows seq{0, n_prompt, &*target_kv_};
    const int64_t last_row = n_prompt - 1;
    const StepBatch batch{prompt, std::span(&seq, 1), std::span(&last_row, 1), capture_layers_};
    const ForwardOutput out = target_.forward(batch);
    last_token = sample_token(out.logits, out.n_vocab, options_.sampling, rng_, target_probs_.data(), sampler_scratch_);
    result_.prefill_seconds = seconds_since(start);
    going = emit(last_token);
    const int64_t k = going ? next_k() : 0;
    if (k > 0) {
      for (size_t j = 0; j < parts_.size(); ++j) parts_[j] = out.hidden[j].data;
      head_ids_.push_back(last_token);
      propose(head_ids_, parts_, k);
    }
  }
  const auto decode_start = Clock::now();

  // Rounds: verify the drafts, accept, roll back, propose again.
  while (going) {
    const int64_t p = target_kv_->length();
    if (p + 1 > capacity_) break;  // no room for even one more token
    const int64_t k = n_drafts_;
    const auto verify_start = Clock::now();
    verify_ids_[0] = last_token;
    std::copy(drafts_.begin(), drafts_.begin() + k, verify_ids_.begin() + 1);
    const SequenceRows seq{0, k + 1, &*target_kv_};
    const std::span<const int> capture = k > 0 ? std::span<const int>(capture_layers_) : std::span<const int>();
    const StepBatch batch{std::span(verify_ids_.data(), size_t(k + 1)), std::span(&seq, 1),
                          std::span(verify_rows_.data(), size_t(k + 1)), capture};
    const ForwardOutput out = target_.forward(batch);
    const DraftDistributions q{q_.empty() ? nullptr : q_.data(), head_.n_vocab(),
                               std::span(draft_ids_.data(), size_t(k)), draft_to_target_};
    const VerifyResult verdict = verify_drafts(rule(), out.logits, out.n_vocab, std::span(drafts_.data(), size_t(k)),
                                               options_.sampling, rng_, verify_scratch_, q, spec_.synthetic_acceptance);
    stats_.record(k, verdict.n_accepted);
    const int64_t a = verdict.n_accepted;
    target_kv_->truncate(p + 1 + a);
    if (head_kv_->length() > p) head_kv_->truncate(p);
    stats_.verify_seconds += seconds_since(verify_start);

    for (int64_t i = 0; i < a && going; ++i) going = emit(drafts_[size_t(i)]);
    if (going) going = emit(verdict.next_token);
    if (!going) break;
    last_token = verdict.next_token;

    const int64_t k_next = next_k();
    n_drafts_ = 0;
    if (k_next > 0) {
      head_ids_.assign(drafts_.begin(), drafts_.begin() + a);
      head_ids_.push_back(last_token);
      for (size_t j = 0; j < parts_.size(); ++j) parts_[j] = out.hidden[j].data;
      propose(head_ids_, parts_, k_next);
    }
  }
  result_.decode_seconds = seconds_since(decode_start);
  on_token_ = nullptr;
  return result_;
}

GenerateResult generate_speculative(Model& target, DraftHead& head, std::span<const int64_t> prompt,
                                    const GenerateOptions& options, const SpecOptions& spec,
                                    const TokenCallback& on_token, SpecStats* stats) {
  SpeculativeDecoder decoder(target, head, spec, options);
  GenerateResult result = decoder.run(prompt, on_token);
  if (stats) *stats = decoder.stats();
  return result;
}

}  // namespace aerie
