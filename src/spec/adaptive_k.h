// K that adapts (--num-speculative-tokens auto): how many tokens each sequence drafts in its next round,
// chosen to maximise expected tokens per second from what the engine has measured so far.
//
// The model. A round with K drafts costs one target forward over 1 + K rows per sequence (verification)
// plus K passes of the drafter, and yields
//   E[tokens | K] = 1 + sum_{i=1..K} prod_{j<=i} a_j
// where a_j = P(draft j accepted | drafts 1..j-1 accepted), the chain's conditional acceptance. For one
// sequence the best K maximises E[tokens | K] / (verify(K + 1 rows) + draft(K passes)); K = 0 is a plain
// decode step (no drafter pass at all: the engine defers the head's rows, spec/head_proposer.h).
//
// Acceptance (AcceptanceEstimate): per sequence and position, decayed counts of drafts tried and accepted
// (a round with n drafts of which m accepted tried positions 1..min(m + 1, n) and accepted 1..m), shrunk
// toward a prior with kPriorStrength pseudo-counts: position 1's prior is the engine-wide estimate of
// position 1 (itself shrunk toward kPriorAcceptance), position j's prior is the sequence's own estimate at
// j - 1, so that a position rarely reached borrows from the one before it (conditional acceptance is about
// flat along a chain in practice) instead of sitting at a fixed guess.
//
// Cost (StepCosts): seconds of a target forward by its total rows, and seconds of the drafter by its passes
// in the step (a curve too: a step's drafter time has a fixed part, so K passes cost less than K times
// one), measured by the engine with a steady clock on decode-only steps, each figure the least of its
// last few samples (RecentMinimum), the first dropped, trusted from its second (the first run of a shape is cold: a
// 2-row forward first timed at 3x its warm figure kept speculation off for good). Until the drafter is
// measured a pass is taken as kPriorDraftRatio of a one-row forward (an EAGLE head is one layer of a
// deeper target). The estimate at any count (CostCurve) is the lower convex hull of the trusted (count,
// seconds) points, extended flat below the first and with the last segment's slope past the last (flat
// with one point: the optimistic guess that makes the choice try a K, whose costs are then timed): a count
// measured rarely and slowly (a noisy step) lies above the hull and does not bend it, and costs grow about
// linearly in rows on a CPU, so the hull is the line they lie on.
//
// Plain against speculation: on a target small enough to live in the CPU caches, the drafter's passes
// evict it, so every forward in a speculating engine runs slower than in one that never drafts, plain
// steps between probes included (the shipped model at 4 requests: 0.85 ms for 4 rows there, 0.53 ms in
// a plain engine). Judged by those, speculation looked 1.5x faster and ran 0.84x. So the two are timed
// apart: StepCosts::plain from steps after a step with no drafter pass (the start, spells of K = 0), when
// the target has the caches to itself again, and StepCosts::forward from steps after a drafter pass only
// (mixed in, the eviction of a 2-row verification read as a per-row cost over a clean 1-row step and made
// K = 2 look 20% dearer than it ran).
//
// Batching: a step verifies every decoding sequence in one forward, so the cost is that of the step's
// total rows, and the drafter's passes run batched, as many as the deepest chain. choose_draft_tokens()
// maximises the step's expected tokens per second: every extra draft (sequence s, position i) adds
// prod_{j<=i} a_{s,j} expected tokens and one row; taking them in decreasing order of that gain (which
// keeps each sequence's positions in order, as the products only shrink) and keeping the best prefix
// gives each sequence its K. For one sequence this is exactly the formula above. Sequences decoding with
// speculation off share the step too: their rows are in its forward and their tokens in its yield, so a
// lone speculating sequence among three plain ones is weighed against a 4-row plain step, not a 1-row
// one (which made K = 4 look 2.5x faster where it ran 0.98x).
//
// Probing (AdaptiveKState): a sequence at K = 0 verifies nothing, so its acceptance would never be seen to
// rise. After `probe_interval` rounds at 0 it drafts one token (one extra row and one drafter pass); while
// it has seen fewer than kMinEvidence rounds with drafts it probes every round, then each
// probe that does not turn speculation back on doubles the interval up to kMaxProbeInterval (bounded
// overhead: at most one 2-row round per 64 once settled; the interval also keeps the head's deferred rows
// far below DraftRunner::kMaxDeferredRows). A probe's first head pass also catches up the rows deferred
// while off, so probing costs about one head row per plain step however rare the probes: where that is
// more than kMaxProbeOverhead of a plain step (a head nearly as dear per row as a small, cache-resident
// target), plain steps between probes are not plain at all, so K = 0 is either speculation off for good
// (Sequence::speculation_off, as past DraftRunner::kMaxDeferredRows) or a passing dip: off for good once
// the sequence has kMinEvidence rounds with drafts and the choice gives it 0 both from its own rates and
// from the engine-wide ones (longer memory, pooled over sequences: one unlucky run of rejections does not
// switch off a good head) once that has kMinEngineEvidence rounds (the first sequence's first rounds
// alone, a hard opening of 0.4 acceptance where the rest ran 0.85, switched the shipped head off for a
// whole run). New sequences start from the engine-wide acceptance, and off for good at once where it
// already says so (sparing the head its prompt rows). On a large target the head's rows are cheap and
// probing goes on.
//
// Plain decoding re-timed: while speculation stays on no step is plain, and the plain figure would be the
// few cold steps of the start (0.66 ms for 4 rows on the shipped model, against 0.50 ms warm), which made
// speculation look 1.3x better than it was. So after kPlainRefreshInterval speculating steps (kPlainRefreshEarly
// while the step's row count has no trusted plain figure) one step drafts nothing, and the plain step after
// it is timed clean: about 1.5% of the steps lose their drafts once settled.
//
// Prompts (AdaptiveK::judge_prompt): before the head runs a new sequence's prompt rows, their cost (the
// head's measured seconds per prompt row times the prompt) is set against what speculation can save over
// the sequence's max_tokens at the engine-wide acceptance and the measured step costs, with the step's
// sequences as the batch: saving per token = plain(n) / n - min over K of (forward(n (1 + K)) +
// draft(K)) / (n E[tokens | K]). Where the prompt costs more, the sequence decodes plainly from the start
// (its head never runs). Judged once, when the engine has kMinEngineEvidence rounds of acceptance and both
// costs measured (before that, optimistically on); one in kExplorePrompts prompts judged off drafts all the
// same, so that the engine-wide acceptance, which nothing else would update once every sequence is off,
// keeps being measured (at most one prompt in 16 pays a head pass it did not need).
//
// Exploring (AdaptiveKState): a row count the choice never visits keeps its old (maybe noisy) figure, and
// plain decoding is never re-timed while speculation is on; so one in kExploreInterval rounds
// at K > 0 runs K - 1 or K + 1 instead (alternately; K - 1 = 0 is a plain step). Near the optimum the
// rate is flat in K, so this costs little.
//
// Start (an engine with nothing timed): plain steps until one row count is trusted (two samples); from
// then on the choice, optimistic about what is not yet timed (flat costs past the last trusted count), so
// it tries the K it would like at the prior acceptance and times it, twice before trusting it.
//
// Trees (spec/adaptive_tree.h; --spec-tree-top-k with auto): a sequence that may draft a tree (greedy or
// sampled, no penalties or structured output: drafts_tree) drafts each round either a chain of K or the
// configured tree cut at a depth d <= its depth, whichever gives the step the most expected tokens per
// second. A tree of depth d verifies 1 + N(d) rows, N(d) = min(total_tokens, top_k + (d - 1) top_k^2), and
// yields E[tokens | tree d] = 1 + sum_{i<=d} prod_{j<=i} t_j, t_j = P(the walk reaches depth j | it
// reached j - 1). Measured:
//   - t_j per sequence (AdaptiveKState::tree_acceptance) from its tree rounds, as a chain's a_j (a round
//     of depth d whose walk accepted m tried depths 1..min(m + 1, d)), shrunk toward the engine-wide t_j
//     (AdaptiveKMemory::engine_wide_tree), itself toward the chain's engine-wide a_1 uplifted by half of
//     what it misses (tree_prior: optimistic, so that a tree is tried). Chain rounds say nothing of t_j.
//   - a_j from tree rounds too, where greedy: a tree's first child of each node is the head's argmax, the
//     chain's draft (DraftTreeBuilder keeps a node's children in rank order), so while the accepted path
//     follows first children the chain accepts too, where it leaves them the chain's draft was rejected,
//     and where it ends at a leaf the chain's next draft is unseen (chain_in_tree). So a sequence that
//     drafts trees keeps its chain's rates current; a sampled walk says nothing of the chain's own draws.
//   - the drafter's time of steps that draft trees (StepCosts::tree_draft) by the head's rows drafting
//     them (1 + top_k (d - 1) a tree: the root's row, then top_k frontier rows in each of d - 1 passes, so
//     the top_k-row passes cost what they cost), timed whole where chains beside them draft at most one
//     token (they share the first pass); chain passes beyond the first add draft(K) - draft(1). Until
//     timed, as draft(d) (optimistic). The forward over the tree's rows is forward(rows), as a chain's.
// The choice (choose_trees), jointly over the step as choose_draft_tokens: from the chains' K, start from
// the best of "every sequence that may at depth d" for each d (where it beats the chains by kMinTreeGain),
// then move one sequence at a time (to a tree of some depth, another depth, back to its chain) while a move
// raises the step's rate by kMinTreeGain, at most kMaxMoves moves; the chains keep the K chosen for them.
// Probing (TreeProbes, engine-wide and kept in AdaptiveKMemory): while chains are chosen, one drafting
// round in `interval` of a sequence that may draft a tree drafts the full tree instead, the interval
// doubling from 4 to 64 (at most one tree round in 64 drafting rounds once settled); a chain at K = 0 is
// probed by its own one-draft probes only. A chosen tree is explored at depth -/+ 1 as a chain at K -/+ 1.
// Worked example, top_k 2, depth 4, 8 tokens, one sequence; forward(4 rows) 0.56 ms, forward(9) 1.10 ms,
// 3 chain passes 0.33 ms, the tree's 7 head rows 0.61 ms; a_j = 0.85, t = 0.95 0.95 0.9 0.8:
//   chain K = 3: (1 + .85 + .72 + .61) / (0.56 + 0.33) = 3.19 / 0.89 = 3.58 tokens/ms
//   tree d = 4: (1 + .95 + .90 + .81 + .65) / (1.10 + 0.61) = 4.31 / 1.71 = 2.52: the chain (the shipped
//   model on a CPU: rows cost about linearly);
//   on a memory-bound target where forward(9) = 0.56 ms: 4.31 / 1.17 = 3.69, 3% more: the tree.
//
// Losslessness: K (and chain or tree) only sets what is proposed; it is chosen before the round from the past
// (measured acceptance and time), never from the round's own draws, so verification stays lossless and
// greedy output equals plain greedy output. The chooser reads no RNG. Seeded sampled output depends on
// the K chosen (the rejection sampler draws per draft), so with `auto` it is reproducible in distribution,
// not token for token across runs (K depends on measured time).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "spec/spec_options.h"

namespace aerie {

inline constexpr int64_t kMaxAdaptiveK = kMaxDraftTokens;

// Conditional acceptance per chain position, decayed counts ([kMaxAdaptiveK] each; position 0 is draft 1).
struct AcceptanceEstimate {
  static constexpr double kPriorAcceptance = 0.5;  // before anything is measured
  static constexpr double kPriorStrength = 2.0;    // pseudo-counts of the prior
  static constexpr double kDecay = 0.9;            // per round observed: ~10 rounds of memory

  std::array<double, kMaxAdaptiveK> tried{}, accepted{};
  int64_t rounds = 0;  // rounds observed, not decayed: how much evidence there is

  // A round that verified n_drafts drafts and accepted the first n_accepted.
  void observe(int64_t n_drafts, int64_t n_accepted, double decay = kDecay);
  // rates[j] for j < rates.size(): position 0 shrunk toward prior0, position j toward rates[j - 1].
  void rates(double prior0, std::span<double> out) const;
  // rates[j] shrunk toward priors[j] (a tree's, toward the engine-wide tree's by depth: not flat).
  void rates_toward(std::span<const double> priors, std::span<double> out) const;
};

// E[tokens | K] = 1 + sum_{i<=K} prod_{j<=i} rates[j - 1].
double expected_tokens(std::span<const double> rates, int64_t k);

// The least of a figure's last kWindow samples: timing noise on a shared machine only ever adds time, so
// the least recent sample is the figure; the window lets it rise again when the work really grows (a
// longer context). skip_first: the first sample is dropped, as a shape's first run is cold (up to 3x its
// warm time) and a cold first figure of plain decoding went on deciding until it left the window.
class RecentMinimum {
 public:
  static constexpr int64_t kWindow = 8;
  explicit RecentMinimum(bool skip_first = false) : skip_first_(skip_first) {}
  void add(double seconds);
  int64_t count() const { return count_; }  // samples kept, ever
  double value() const;                     // 0 before any sample

 private:
  std::array<double, kWindow> samples_{};
  int64_t count_ = 0;
  bool skip_first_;
};

// Seconds of a step by a count (a forward's total rows, a drafter's passes): per count the recent figure,
// trusted from kMinSamples samples and lowered to the least figure at or above its count (more work never
// costs less); between and beyond, the lower convex hull of those points, flat below the first and with
// the last segment's slope past the last (flat with one point).
class CostCurve {
 public:
  // A count's figure is trusted from its second sample on, its first run (cold) not counted: one cold
  // figure must not make a K look too dear to be tried again.
  static constexpr int64_t kMinSamples = 2;

  explicit CostCurve(int64_t max_count);
  void observe(int64_t count, double seconds);
  int64_t samples(int64_t count) const { return count >= 1 && count < int64_t(points_.size()) ? points_[size_t(count)].count() : 0; }
  bool measured(int64_t count) const { return samples(count) >= kMinSamples; }
  int64_t n_measured() const { return n_measured_; }  // counts with a trusted figure
  double at(int64_t count) const;                     // 0 before any count is trusted

 private:
  void rebuild();
  std::vector<RecentMinimum> points_;  // [max_count + 1]
  std::vector<double> lowered_;        // [max_count + 1] trusted figures lowered to the least at or above
  std::vector<double> estimate_;       // [max_count + 1] on the lower hull of the trusted points
  std::vector<int64_t> hull_;          // counts on the hull, ascending (scratch of rebuild)
  double slope_hi_ = 0;                // seconds per count past the last entry
  int64_t n_measured_ = 0;
};

// Measured costs in seconds: the target forward by total rows, and the drafter by passes.
class StepCosts {
 public:
  static constexpr double kPriorDraftRatio = 0.25;  // a drafter pass / a one-row forward, before measured

  explicit StepCosts(int64_t max_rows = 512)
      : forward_(max_rows), plain_(max_rows), draft_(kMaxAdaptiveK), tree_draft_(max_rows) {}
  // A forward after a step with a drafter pass: what verification (or a plain step between speculating
  // ones) costs with the drafter sharing the caches.
  void observe_forward(int64_t rows, double seconds) { forward_.observe(rows, seconds); }
  // A forward after a step without a drafter pass: what plain decoding costs with the target alone in the
  // caches.
  void observe_plain(int64_t rows, double seconds) { plain_.observe(rows, seconds); }
  // Estimated seconds of a plain step over `rows` sequences: the figure of plain steps after plain steps
  // (forward(rows) until one is trusted).
  double plain(int64_t rows) const;
  // A step's drafter time over its `passes` passes (as many as its deepest chain).
  void observe_draft(int64_t passes, double seconds) { draft_.observe(passes, seconds); }
  // A step's drafter time where it drafted trees, by the head's rows drafting them (spec/adaptive_tree.h,
  // tree_head_rows; chains of one draft beside them share its first pass).
  void observe_tree_draft(int64_t head_rows, double seconds) { tree_draft_.observe(head_rows, seconds); }
  void observe_catch_up(int64_t rows, double seconds);  // a head pass that caught up deferred rows
  // A step whose head pass also ran `rows` prompt rows, `seconds` the head's time beyond its chains' passes.
  void observe_prompt_rows(int64_t rows, double seconds);
  int64_t plain_samples(int64_t rows) const { return plain_.samples(rows); }
  int64_t samples(int64_t rows) const { return forward_.samples(rows); }
  bool measured(int64_t rows) const { return forward_.measured(rows); }
  // Row counts with a trusted figure, either kind.
  int64_t n_measured() const { return forward_.n_measured() + plain_.n_measured(); }
  // Estimated seconds of a speculating step's forward over `rows` rows: the plain figure until one is
  // trusted (optimistic, so that K is tried and timed); 0 before anything is measured.
  double forward(int64_t rows) const;
  // Estimated seconds of `passes` drafter passes (kPriorDraftRatio of a one-row forward each, before measured).
  double draft(int64_t passes) const;
  bool draft_measured() const { return draft_.n_measured() > 0; }
  // Estimated drafter seconds of a step drafting trees over `head_rows` head rows in `passes` passes (as
  // many chain passes, draft(passes), until a tree step is measured: optimistic, so that a tree is tried).
  double tree_draft(int64_t head_rows, int64_t passes) const;
  bool tree_draft_measured() const { return tree_draft_.n_measured() > 0; }
  double catch_up_row() const { return catch_up_row_.value(); }  // seconds per caught-up row; 0 before measured
  double prompt_row() const { return prompt_row_.value(); }  // seconds per prompt row in the head; 0 before

 private:
  CostCurve forward_, plain_, draft_, tree_draft_;
  RecentMinimum catch_up_row_, prompt_row_;
};

// When a drafting chain drafts the tree instead (spec/adaptive_tree.h, apply_probes): engine-wide, one
// drafting round in `interval` of the sequences that may draft a tree, the interval doubling with each
// probe up to kMaxInterval; a tree round of any sequence (chosen or probed) starts the count over.
struct TreeProbes {
  static constexpr int64_t kFirstInterval = 4, kMaxInterval = 64;
  int64_t rounds = 0;  // drafting chain rounds where a tree was allowed, since the last tree round
  int64_t interval = kFirstInterval;
};

// What auto learns that outlives one engine: the step costs and the engine-wide acceptance. Engines given
// the same memory (SpecOptions::adaptive_memory; one engine at a time, on the same target, drafter and
// thread count) go on from where the last one stopped instead of relearning: bench-accept and bench-spec
// build one engine per prompt, and a cold start is plain steps until a row count is timed twice, then
// K tried at the prior acceptance until the costs of K are timed.
struct AdaptiveKMemory {
  explicit AdaptiveKMemory(int64_t max_rows = 512) : costs(max_rows) {}
  StepCosts costs;
  AcceptanceEstimate engine_wide;  // the chain's (from chain rounds, and greedy tree rounds: Trees)
  AcceptanceEstimate engine_wide_tree;  // the tree's, by depth (from tree rounds)
  TreeProbes tree_probes;
};

// A sequence's adaptive-K state (kept by the engine per sequence: engine/k_policy.h).
struct AdaptiveKState {
  static constexpr int64_t kFirstProbeInterval = 1, kMaxProbeInterval = 64, kExploreInterval = 8;
  // Rounds with drafts before probes space out or speculation stops for good: a few unlucky first rounds
  // (a prior of 0.5, a cold head) must not settle it.
  static constexpr int64_t kMinEvidence = 8;
  // Engine-wide rounds before the engine-wide acceptance may switch a sequence off (for good or from its
  // prompt), and one in kExplorePrompts prompts judged off that goes on to refresh it.
  static constexpr int64_t kMinEngineEvidence = 32, kExplorePrompts = 16;
  static constexpr double kMaxProbeOverhead = 0.05;

  AcceptanceEstimate acceptance;
  int64_t k = -1;              // K chosen for the next round; -1: not chosen (fixed K)
  int64_t rounds_off = 0;      // consecutive rounds chosen at K = 0
  int64_t rounds_on = 0;       // rounds chosen at K > 0 (every kExploreInterval-th explores)
  int64_t probe_interval = kFirstProbeInterval;
  bool probe = false;          // k is a probe: its round (catch-up pass, cold head) times nothing steady
  int64_t probes = 0;          // probes made
  bool prompt_judged = false;  // whether its prompt's head pass was weighed (AdaptiveK::judge_prompt)
  bool explore = false;        // judged off but let on to refresh the engine-wide acceptance
  // Trees (a tree shape configured and the request may draft one; spec/adaptive_tree.h).
  AcceptanceEstimate tree_acceptance;  // per tree depth: the walk reaching depth j given j - 1
  bool tree = false;                   // k is the depth of a tree
  bool tree_probe = false;             // the tree was not chosen: it is a probe of the tree (TreeProbes)
  int64_t round_tree_depth = 0;        // the depth of the tree drafted for the round being verified; 0: a chain
};

// Seconds speculation saves per generated token at `n` sequences a step and acceptance `rates` (the best K
// up to rates.size(); 0 where no K beats a plain step).
double saving_per_token(std::span<const double> rates, const StepCosts& costs, int64_t n);

// One step's choice. rates[s] are sequence s's conditional acceptance rates, of length its most drafts
// allowed (max_tokens, max length, K_max); writes k[s]. other_rows: the step's decoding sequences outside
// the choice (speculation off: one row and one token each), which share its forward. Uses `costs` for the
// forward over other_rows + sum(1 + k[s]) rows and max(k[s]) drafter passes. `gains` is scratch.
struct DraftGain {
  double gain;
  int32_t seq, position;
};
void choose_draft_tokens(std::span<const std::span<const double>> rates, const StepCosts& costs,
                         std::span<int64_t> k, std::vector<DraftGain>& gains, int64_t other_rows = 0);

// After the choice: counts rounds at 0 and turns one in `probe_interval` into a one-draft probe, and one
// in kExploreInterval at K > 0 into K -/+ 1 (when the sequence may draft at all: allowed > 0). `chosen`
// is what choose_draft_tokens gave; returns the K to use.
int64_t apply_probe(AdaptiveKState& state, int64_t chosen, int64_t allowed);

}  // namespace aerie
