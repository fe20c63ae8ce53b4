// Proposer: every drafter as the engine drives it. Fed plain data — each sequence's tokens, the target
// features of the rows it kept this step, its K for this step — it returns a proposal per sequence (a
// chain of drafts, or an EAGLE-2 tree) as values. It never sees the engine's Sequence: the engine hands
// the proposal to Scheduler::update, the only writer of a sequence's drafts.
//
// One step, from the engine's side (engine/engine.h):
//   K policy (engine/k_policy.h)   this step's K for each sequence, and the step's K (0: no head pass)
//   Proposer::propose              per ProposalRow, a SequenceProposal
//   Scheduler::update(seq, ...)    the drafts land in the sequence; the head's full blocks are registered
//
// Per-sequence drafter state (a head's deferred features, an n-gram index, the structured-output state
// walked along the drafts) lives in one ProposerState made by start(): the engine keeps it with the
// sequence and forgets it by destroying it.
//
// Implementations: HeadProposer (spec/head_proposer.h: EAGLE-1/3 heads MHA or MLA, the MTP layer, a
// draft model; chains or trees), TokenProposer (spec/token_proposer.h: the n-gram and suffix drafters) and
// SuffixHeadProposer (spec/suffix_head.h: the suffix index first, a HeadProposer where it has no long match).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "models/model.h"
#include "sample/sampling.h"
#include "sample/token_constraint.h"
#include "spec/spec_options.h"

namespace aerie {

// One sequence's drafter state, opaque to the engine.
struct ProposerState {
  virtual ~ProposerState() = default;
};

// A sequence that ran this step and goes on to the drafter (its rows stay; speculation is on for it).
struct ProposalRow {
  ProposerState* state = nullptr;     // from Proposer::start
  std::span<const int64_t> tokens;    // its prompt and output so far, this step's tokens included
  int64_t n_computed = 0;             // target positions in its cache; the last n_new of them are this step's
  int64_t n_new = 0;                  // this step's rows that stay (> 0)
  // Where their target features are in the forward's output (ForwardOutput::hidden): rows feature_row +
  // feature_path[r] for a verified tree (the accepted path), else the n_new rows from feature_row.
  int64_t feature_row = 0;
  std::span<const int64_t> feature_path;
  KvCache* head_cache = nullptr;      // the head's cache of this sequence (null for a token drafter)
  int64_t k = 0;                      // drafts to propose (a tree's depth when `tree`); 0: none this step
  bool tree = false;                  // an EAGLE-2 tree instead of a chain
  bool sampled = false;               // drafts drawn from the head's distribution with `rng`, q returned
  const SamplingParams* sampling = nullptr;     // the request's (for q)
  Rng* rng = nullptr;                           // the request's generator (with `sampled`)
  const TokenConstraint* constraint = nullptr;  // structured output at the sequence's state, or null
};

struct ProposalInput {
  std::span<const ProposalRow> rows;
  const ForwardOutput* target = nullptr;  // this step's target forward (its captured features)
  // The step's K: 0 runs no head pass at all (the rows' features are kept in each state and go into the
  // head's next pass: ProposerState catches up in one pass when drafting resumes).
  int64_t step_k = 0;
};

// What a proposer returns for one ProposalRow; the buffers are reused step to step.
struct SequenceProposal {
  std::vector<int64_t> drafts;        // target ids, in order (a tree's nodes in verification-row order)
  std::vector<int64_t> draft_ids;     // the same as draft-vocabulary ids
  std::vector<float> q;               // the draft distributions drawn from (sampled): a chain's [drafts,
                                      // n_draft_vocab]; a tree's one row per row with children, in row order
  std::vector<int32_t> tree_parent;   // a tree: [1 + drafts] the parent row of each verification row (row 0,
                                      // the last token: -1); empty for a chain
  bool gave_up = false;               // its deferred rows passed the limit: it decodes plainly from now on

  void clear() {
    drafts.clear();
    draft_ids.clear();
    q.clear();
    tree_parent.clear();
    gave_up = false;
  }
};

struct ProposerConfig {
  SpecOptions spec;
  int64_t target_vocab = 0;
  // The target's hidden width (Model::n_embd): each captured feature part's, which a head's state reserves
  // for the rows it holds back at step K = 0 when the request starts; 0 where K is never 0 (then reserved
  // at the first such step, if one comes).
  int64_t target_n_embd = 0;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string describe() const = 0;

  // A state for a sequence that holds up to `capacity` tokens.
  virtual std::unique_ptr<ProposerState> start(int64_t capacity) const = 0;
  // The sequence's head cache was dropped (preemption): what the state kept for it goes.
  virtual void restart(ProposerState& state) const { (void)state; }
  // Rows of target features the state holds back for the head's next pass (0 without a head).
  virtual int64_t deferred_rows(const ProposerState& state) const { (void)state; return 0; }

  // out[i] for in.rows[i] (out.size() == in.rows.size()). A row with k = 0 gets no drafts (its rows may
  // still go into the head). Throws aerie::Error when a forward fails; the states and caches of the rows
  // are then as before the call up to the head rows this call wrote (see Engine::run_draft).
  virtual void propose(const ProposalInput& in, std::span<SequenceProposal> out) = 0;

  // The head's own KV cache (none for a proposer without one).
  virtual std::optional<KvCache> make_kv_cache(int64_t capacity, KvDType dtype) const = 0;
  // The target layers whose captured hidden states the head reads (empty: none).
  virtual const std::vector<int>& target_layers() const = 0;
  // The draft vocabulary and its map to target ids ([n_draft_vocab], empty when the vocabularies agree).
  virtual int64_t n_draft_vocab() const = 0;
  virtual std::span<const int64_t> draft_to_target() const = 0;
  // Whether it drafts EAGLE-2 trees (ProposalRow::tree).
  virtual bool drafts_trees() const = 0;
  // Whether q is one-hot on each draft (a deterministic proposal: verified by target match).
  virtual bool one_hot() const = 0;
};

}  // namespace aerie
