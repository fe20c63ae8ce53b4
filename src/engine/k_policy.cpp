#include "engine/k_policy.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "core/error.h"
#include "spec/adaptive_tree.h"

namespace aerie {

namespace {
constexpr double kEngineWideDecay = 0.98;  // per round of any sequence: ~50 rounds of memory

// AERIE_TRACE_ADAPTIVE_K=1: one stderr line per choice (the cost table up to the rows the step could use,
// the first sequence's rates, every K chosen) to see why auto picks what it picks.
bool tracing() {
  static const bool on = [] {
    const char* env = std::getenv("AERIE_TRACE_ADAPTIVE_K");
    return env != nullptr && *env != '\0' && *env != '0';
  }();
  return on;
}

void trace_choice(const StepCosts& costs, std::span<const std::span<const double>> rates,
                  std::span<const std::span<const double>> tree_rates, const DraftTreeShape& shape,
                  std::span<AdaptiveKState* const> states, std::span<const int64_t> chosen,
                  std::span<const int64_t> depth, int64_t plain_rows) {
  const int64_t n = int64_t(rates.size());
  int64_t most = n + plain_rows;
  for (const auto& r : rates) most += int64_t(r.size());
  std::fprintf(stderr, "adaptive-k: seqs %lld (+%lld plain) | forward ms by rows:", (long long)n, (long long)plain_rows);
  for (int64_t rows = 1; rows <= most; ++rows)
    std::fprintf(stderr, " %lld%s=%.3f", (long long)rows, costs.measured(rows) ? "" : "~", 1e3 * costs.forward(rows));
  std::fprintf(stderr, " | drafter ms by passes%s:", costs.draft_measured() ? "" : "~");
  for (int64_t passes = 1; passes < most - n - plain_rows + 1 && passes <= kMaxAdaptiveK; ++passes)
    std::fprintf(stderr, " %lld=%.3f", (long long)passes, 1e3 * costs.draft(passes));
  std::fprintf(stderr, " | plain %.3f ms | catch-up row %.3f ms | rates0", 1e3 * costs.plain(n + plain_rows),
               1e3 * costs.catch_up_row());
  if (n > 0)
    for (double a : rates[0]) std::fprintf(stderr, " %.2f", a);
  if (n > 0 && !tree_rates[0].empty()) {
    std::fprintf(stderr, " | tree rates0");
    for (double a : tree_rates[0]) std::fprintf(stderr, " %.2f", a);
    const int64_t d = int64_t(tree_rates[0].size());
    std::fprintf(stderr, " | tree drafter ms%s %.3f", costs.tree_draft_measured() ? "" : "~",
                 1e3 * costs.tree_draft(tree_head_rows(shape, d), d));
  }
  std::fprintf(stderr, " | chosen");
  for (size_t s = 0; s < states.size(); ++s)
    std::fprintf(stderr, depth[s] > 0 ? " %lldt" : " %lld", (long long)(depth[s] > 0 ? depth[s] : chosen[s]));
  std::fprintf(stderr, " -> K");
  for (const AdaptiveKState* st : states)
    std::fprintf(stderr, " %lld%s%s", (long long)st->k, st->tree ? "t" : "", st->probe || st->tree_probe ? "p" : "");
  std::fprintf(stderr, "\n");
}
}  // namespace

int64_t drafts_allowed(const Request& seq, int64_t k, int64_t max_length) {
  const int64_t remaining = seq.options.max_tokens - seq.n_generated();
  const int64_t room = max_length - seq.n_computed - 1;
  return std::max<int64_t>(0, std::min({k, remaining - 1, room}));
}

KPolicy::KPolicy(const SpecOptions& spec, const DraftTokensByBatchSize& by_batch_size, int64_t max_rows,
                 int64_t max_length)
    : spec_(spec),
      by_batch_size_(by_batch_size),
      adaptive_(spec.adaptive_k),
      max_k_(spec.num_speculative_tokens),
      max_length_(max_length),
      memory_(spec.adaptive_memory ? spec.adaptive_memory : std::make_shared<AdaptiveKMemory>(max_rows)),
      costs_(memory_->costs),
      engine_wide_(memory_->engine_wide),
      engine_wide_tree_(memory_->engine_wide_tree) {
  validate(spec);
  for (const auto& r : by_batch_size.ranges) max_k_ = std::max(max_k_, r.k);
  AERIE_CHECK(max_k_ <= kMaxDraftTokens, "draft tokens by batch size: K must be at most ", kMaxDraftTokens, ", got ",
              max_k_);
  AERIE_CHECK(!spec.adaptive_k || by_batch_size.ranges.empty(), "adaptive K (auto) and K by batch size exclude each other");
  AERIE_CHECK(!spec.tree.enabled() || by_batch_size.ranges.empty(),
              "draft trees and draft tokens by batch size exclude each other");
  k_max_ = std::min(max_k_, kMaxAdaptiveK);
}

void KPolicy::observe_round(uint64_t seq_id, SpecState& spec, int64_t n_drafts, int64_t n_accepted) {
  if (!adaptive_) return;
  spec.adaptive.acceptance.observe(n_drafts, n_accepted);
  if (tracing()) std::fprintf(stderr, "adaptive-k: seq %llu round %lld/%lld accepted\n", (unsigned long long)seq_id, (long long)n_accepted, (long long)n_drafts);
  engine_wide_.observe(n_drafts, n_accepted, kEngineWideDecay);
}

void KPolicy::observe_tree_round(uint64_t seq_id, SpecState& spec, std::span<const int32_t> row_parent,
                                 std::span<const int64_t> path, bool greedy) {
  if (!adaptive_ || path.empty()) return;
  AdaptiveKState& state = spec.adaptive;
  // The tree's acceptance by depth, as a chain's by position: the walk reached depth `accepted` of
  // the depth drafted (where it stops short, the tree had no node that matched at the next depth).
  const int64_t accepted = int64_t(path.size()) - 1;
  const int64_t depth = std::max(state.round_tree_depth, accepted);
  state.tree_acceptance.observe(depth, accepted);
  engine_wide_tree_.observe(depth, accepted, kEngineWideDecay);
  // A sampled walk's draws are not the chain's: only a greedy round says where its argmax chain stops.
  const ChainInTree chain = greedy ? chain_in_tree(row_parent, path) : ChainInTree{};
  if (chain.tried > 0) {
    state.acceptance.observe(chain.tried, chain.accepted);
    engine_wide_.observe(chain.tried, chain.accepted, kEngineWideDecay);
  }
  if (tracing())
    std::fprintf(stderr, "adaptive-k: seq %llu tree round depth %lld/%lld accepted, chain inside %lld/%lld\n",
                 (unsigned long long)seq_id, (long long)accepted, (long long)depth, (long long)chain.accepted,
                 (long long)chain.tried);
}

void KPolicy::observe_forward(int64_t rows, double seconds) {
  if (!adaptive_) return;
  // After a step without a drafter pass this step verified nothing either: a plain step, target-only caches.
  if (last_k_step_ == 0) costs_.observe_plain(rows, seconds);
  else costs_.observe_forward(rows, seconds);
}

void KPolicy::observe_draft(int64_t passes, double seconds, bool prompt_rows, int64_t deferred_rows,
                            int64_t head_prompt_rows) {
  if (!adaptive_) return;
  if (last_tree_rows_ > 0) {
    // Trees timed whole, where nothing but their passes (and chains of one draft) ran in the head.
    if (passes > 0 && !prompt_rows && deferred_rows == 0 && head_prompt_rows == 0 && last_chain_passes_ <= 1)
      costs_.observe_tree_draft(last_tree_rows_, seconds);
    return;
  }
  if (head_prompt_rows > 0 && deferred_rows == 0 && costs_.draft_measured())
    costs_.observe_prompt_rows(head_prompt_rows, seconds - costs_.draft(passes));
  if (passes == 0 || prompt_rows) return;
  if (deferred_rows > 0) costs_.observe_catch_up(deferred_rows, seconds);
  else costs_.observe_draft(passes, seconds);
}

void KPolicy::choose_engine_wide(int64_t plain_rows) {
  // Every sequence of the step at the engine-wide rates (as long as its own), into wide_k_.
  const size_t n = spans_.size();
  wide_rates_.resize(size_t(k_max_));
  engine_wide_.rates(AcceptanceEstimate::kPriorAcceptance, wide_rates_);
  wide_spans_.resize(n);
  for (size_t s = 0; s < n; ++s) wide_spans_[s] = std::span<const double>(wide_rates_).first(spans_[s].size());
  wide_k_.resize(n);
  choose_draft_tokens(wide_spans_, costs_, wide_k_, gains_, plain_rows);
}

void KPolicy::judge_prompt(const Request& seq, SpecState& spec, int64_t n_seqs) {
  AdaptiveKState& state = spec.adaptive;
  if (state.prompt_judged || spec.off) return;
  if (costs_.n_measured() < 1 || !costs_.draft_measured() || costs_.prompt_row() <= 0 ||
      engine_wide_.rounds < AdaptiveKState::kMinEngineEvidence)
    return;  // not yet known: optimistically on
  state.prompt_judged = true;
  const int64_t allowed = std::max<int64_t>(0, std::min(k_max_, seq.options.max_tokens - 1));
  wide_rates_.resize(size_t(allowed));
  engine_wide_.rates(AcceptanceEstimate::kPriorAcceptance, wide_rates_);
  const double saved = saving_per_token(wide_rates_, costs_, n_seqs) * double(seq.options.max_tokens);
  const double cost = costs_.prompt_row() * double(seq.n_prompt);
  if (tracing())
    std::fprintf(stderr, "adaptive-k: seq %llu prompt %lld: head pass %.3f ms, saves up to %.3f ms over %lld tokens -> %s\n",
                 (unsigned long long)seq.id, (long long)seq.n_prompt, 1e3 * cost, 1e3 * saved,
                 (long long)seq.options.max_tokens, saved > cost ? "on" : "off");
  // Its head never runs (plain from the start), but for one in kExplorePrompts of those judged off.
  if (saved > cost) return;
  if (++prompts_off_ % AdaptiveKState::kExplorePrompts != 0) spec.off = true;
  else state.explore = true;
}

int64_t KPolicy::choose(std::span<const ScheduledRows> plan, std::span<const StepResult> results,
                        std::span<SpecState* const> specs, std::span<char> tree, int64_t n_decoding,
                        std::span<int64_t> k) {
  own_.assign(plan.size(), -1);
  own_tree_.assign(plan.size(), 0);
  const int64_t step = adaptive_ ? choose_adaptive(plan, results, specs, tree)
                                 : by_batch_size_.k_for(n_decoding, spec_.num_speculative_tokens);
  last_tree_rows_ = last_chain_passes_ = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    k[i] = 0;
    const Request& seq = request_of(*plan[i].seq);
    const StepResult& r = results[i];
    if (specs[i] == nullptr || specs[i]->off || r.finish != FinishReason::kNone || r.n_new_positions == 0 ||
        seq.prefilling())
      continue;
    if (own_[i] >= 0) tree[i] = tree[i] && own_tree_[i];
    // A tree's depth bounds its accepted path as K bounds a chain's.
    int64_t want = tree[i] ? spec_.tree.depth : step;
    if (own_[i] >= 0) want = std::min(want, own_[i]);
    k[i] = drafts_allowed(seq, want, max_length_);
    if (tree[i]) last_tree_rows_ += tree_head_rows(spec_.tree, k[i]);
    else last_chain_passes_ = std::max(last_chain_passes_, k[i]);
    specs[i]->adaptive.round_tree_depth = tree[i] ? k[i] : 0;
  }
  return step;
}

int64_t KPolicy::choose_adaptive(std::span<const ScheduledRows> plan, std::span<const StepResult> results,
                                 std::span<SpecState* const> specs, std::span<const char> tree) {
  seqs_.clear();
  seq_states_.clear();
  seq_specs_.clear();
  seq_plan_.clear();
  // A prompt the head has not run yet: weighed before this step's head pass would run it.
  for (size_t i = 0; i < plan.size(); ++i)
    if (specs[i] && plan[i].seq->draft_kv && !specs[i]->head_fed) judge_prompt(request_of(*plan[i].seq), *specs[i], int64_t(plan.size()));
  int64_t plain_rows = 0;  // decoding sequences with speculation off: one row each in the next step
  for (size_t i = 0; i < plan.size(); ++i) {
    const Request& seq = request_of(*plan[i].seq);
    const StepResult& r = results[i];
    if (specs[i] == nullptr || r.finish != FinishReason::kNone || r.n_new_positions == 0 || seq.prefilling()) continue;
    if (specs[i]->off) {
      ++plain_rows;
      continue;
    }
    seqs_.push_back(&seq);
    seq_states_.push_back(&specs[i]->adaptive);
    seq_specs_.push_back(specs[i]);
    seq_plan_.push_back(i);
  }
  const size_t n = seqs_.size();
  rates_.resize(n * size_t(k_max_));
  spans_.resize(n);
  k_.resize(n);
  double prior0 = AcceptanceEstimate::kPriorAcceptance;
  engine_wide_.rates(prior0, std::span(&prior0, 1));
  // A sequence's tree shrinks toward the engine-wide tree's by depth, itself toward the chain's position 1
  // uplifted (spec/adaptive_tree.h, tree_prior).
  const size_t max_depth = size_t(spec_.tree.depth);
  wide_tree_rates_.resize(max_depth);
  engine_wide_tree_.rates(tree_prior(prior0), wide_tree_rates_);
  tree_rates_.resize(n * max_depth);
  tree_spans_.resize(n);
  depth_.assign(n, 0);
  bool trees = false;
  for (size_t s = 0; s < n; ++s) {
    const int64_t allowed = drafts_allowed(*seqs_[s], k_max_, max_length_);
    const std::span<double> out(rates_.data() + s * size_t(k_max_), size_t(allowed));
    seq_states_[s]->acceptance.rates(prior0, out);
    spans_[s] = out;
    const int64_t deepest = tree[seq_plan_[s]] ? drafts_allowed(*seqs_[s], spec_.tree.depth, max_length_) : 0;
    const std::span<double> tree_out(tree_rates_.data() + s * max_depth, size_t(deepest));
    seq_states_[s]->tree_acceptance.rates_toward(wide_tree_rates_, tree_out);
    tree_spans_[s] = tree_out;
    trees = trees || deepest > 0;
  }
  // Uncalibrated: plain until a row count is trusted; from then on the choice, optimistic about the row
  // counts not yet timed (StepCosts::forward), so that it tries the K it would like and so times them.
  const bool calibrated = costs_.n_measured() >= 1;
  const int64_t step_rows = int64_t(n) + plain_rows;
  // Plain decoding due for re-timing: no drafts this step, so that the next one is timed plain and clean.
  const int64_t refresh = costs_.plain_samples(step_rows) < CostCurve::kMinSamples ? kPlainRefreshEarly
                                                                                    : kPlainRefreshInterval;
  if (calibrated && n > 0 && spec_steps_ >= refresh) {
    for (size_t s = 0; s < n; ++s)
      seq_states_[s]->k = 0, seq_states_[s]->probe = seq_states_[s]->tree = false, own_[seq_plan_[s]] = 0;
    if (tracing()) std::fprintf(stderr, "adaptive-k: plain step to re-time plain decoding at %lld rows\n", (long long)step_rows);
    spec_steps_ = 0;
    last_k_step_ = 0;
    return 0;
  }
  if (calibrated) choose_draft_tokens(spans_, costs_, k_, gains_, plain_rows);
  else std::fill(k_.begin(), k_.end(), 0);
  if (calibrated && trees) choose_trees(spans_, k_, tree_spans_, spec_.tree, costs_, depth_, plain_rows);
  // Probing's price per plain step: one caught-up head row, against a plain step's share of the forward.
  const double probe_overhead = n > 0 && costs_.catch_up_row() > 0
                                    ? costs_.catch_up_row() / (costs_.forward(step_rows) / double(step_rows))
                                    : 0.0;
  // Where probing is dear, K = 0 is off for good when the engine-wide acceptance agrees (spec/adaptive_k.h).
  const bool dear_probes = calibrated && probe_overhead > AdaptiveKState::kMaxProbeOverhead;
  if (dear_probes) choose_engine_wide(plain_rows);
  int64_t k_step = 0;
  for (size_t s = 0; s < n; ++s) {
    AdaptiveKState& state = *seq_states_[s];
    // A sequence with evidence of its own, or a new one (whose head has not yet caught up its prompt) where
    // the engine has evidence from others.
    // A sequence let on to explore goes by its own rounds only.
    const int64_t evidence =
        state.acceptance.rounds == 0 && !state.explore ? engine_wide_.rounds : state.acceptance.rounds;
    if (dear_probes && k_[s] == 0 && depth_[s] == 0 && wide_k_[s] == 0 && evidence >= AdaptiveKState::kMinEvidence &&
        engine_wide_.rounds >= AdaptiveKState::kMinEngineEvidence) {
      seq_specs_[s]->off = true;  // probing costs more than it could find: plain from now on
      state.k = 0, state.probe = false, state.tree = false;
    } else if (calibrated) {
      apply_probes(state, k_[s], int64_t(spans_[s].size()), depth_[s], int64_t(tree_spans_[s].size()),
                   memory_->tree_probes);
    } else {
      state.k = 0, state.tree = false;
    }
    own_[seq_plan_[s]] = state.k;
    own_tree_[seq_plan_[s]] = state.tree;
    k_step = std::max(k_step, state.k);
  }
  if (tracing()) trace_choice(costs_, spans_, tree_spans_, spec_.tree, seq_states_, k_, depth_, plain_rows);
  last_k_step_ = k_step;
  spec_steps_ = k_step > 0 ? spec_steps_ + 1 : 0;
  return k_step;
}

}  // namespace aerie
