#include "spec/head_proposer.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "ops/ops.h"
#include "sample/finite_logits.h"

namespace aerie {

struct HeadProposer::State : ProposerState {
  // Steps at K = 0 run no head pass: the target features of their new rows wait here, [rows, n_parts *
  // n_embd] (the head's cache ends `deferred_rows` positions before the target's).
  std::vector<float> deferred_features;
  int64_t deferred_rows = 0;
  std::unique_ptr<TokenConstraint> draft_constraint;  // the request's constraint walked along the drafts
  std::vector<int32_t> learned_tree;  // the last learned-score tree's row parents, until its verification is seen
  // Its sampled trees' alpha_j (spec/draft_tree.h). The sequence's own, not the engine's: a seeded request's
  // trees, and so its output, must not depend on what else ran beside it.
  DrawAcceptance draw_acceptance;
};

HeadProposer::State& HeadProposer::state_of(const ProposalRow& row) { return *static_cast<State*>(row.state); }

namespace {

// The target feature (part j) of row r of this step's new rows.
const float* target_feature(const ProposalRow& row, const ForwardOutput& target, size_t j, int64_t r) {
  const int64_t at = row.feature_row + (row.feature_path.empty() ? r : row.feature_path[size_t(r)]);
  return target.hidden[j].data + at * target.n_embd;
}

}  // namespace

std::unique_ptr<Proposer> DraftHead::make_proposer(const ProposerConfig& config) {
  return std::make_unique<HeadProposer>(*this, config);
}

HeadProposer::HeadProposer(DraftHead& head, const ProposerConfig& config)
    : head_(head), spec_(config.spec), deferred_row_floats_(int64_t(head.target_layers().size()) * config.target_n_embd) {
  if (head.reduced_vocab()) {
    draft_to_target_.resize(size_t(head.n_vocab()));
    for (int64_t d = 0; d < head.n_vocab(); ++d) {
      const int64_t t = head.to_target(d);
      AERIE_CHECK(t >= 0 && t < config.target_vocab, "draft head maps draft id ", d, " to target id ", t,
                  " outside the target vocabulary [0, ", config.target_vocab, ")");
      draft_to_target_[size_t(d)] = t;
    }
  } else {
    AERIE_CHECK(head.n_vocab() == config.target_vocab, "draft head vocabulary ", head.n_vocab(),
                " differs from the target's ", config.target_vocab, " and the head has no draft-to-target map");
  }
}

std::unique_ptr<ProposerState> HeadProposer::start(int64_t capacity) const {
  auto state = std::make_unique<State>();
  // Reserved now, when the request starts, not at its first step at K = 0, which adaptive K takes by the
  // clock (a steady step must not allocate). Pages the rows never reach are never touched.
  const int64_t rows = std::min(std::max<int64_t>(capacity, 0), kMaxDeferredRows);
  state->deferred_features.reserve(size_t(rows * deferred_row_floats_));
  if (head_.takes_tree_rows() && spec_.tree.enabled()) state->learned_tree.reserve(size_t(spec_.tree.total_tokens) + 1);
  return state;
}

void HeadProposer::restart(ProposerState& state) const {
  State& s = static_cast<State&>(state);
  s.deferred_features.clear();
  s.deferred_rows = 0;
  s.learned_tree.clear();
}

int64_t HeadProposer::deferred_rows(const ProposerState& state) const {
  return static_cast<const State&>(state).deferred_rows;
}

void HeadProposer::pick(const ProposalRow& row, State& state, SequenceProposal& out, const float* logits, int64_t i) {
  const int64_t vd = head_.n_vocab();
  // A broken head's NaN would reach the output through the rejection rule's residual max(0, p - q).
  check_finite_logits(logits, 1, vd);
  if (row.constraint) {
    // Structured output: the head proposes only what the constraint allows after the previous drafts.
    if (i == 0 || !state.draft_constraint) state.draft_constraint = row.constraint->clone();
    logits = mask_draft_logits(*state.draft_constraint, logits, vd, draft_to_target_, constraint_scratch_);
  }
  int64_t d;
  if (row.sampled) {
    float* q = out.q.data() + i * vd;
    compute_probs(logits, vd, *row.sampling, q, sampler_scratch_);
    d = sample_from_probs(q, vd, *row.rng);
  } else {
    d = ops::argmax(logits, vd);
  }
  out.draft_ids[size_t(i)] = d;
  out.drafts[size_t(i)] = to_target(d);
  if (row.constraint && state.draft_constraint) state.draft_constraint->accept(out.drafts[size_t(i)]);
}

void HeadProposer::defer(const ProposalInput& in, std::span<SequenceProposal> out) {
  const ForwardOutput& target = *in.target;
  const size_t n_parts = target.hidden.size();
  const int64_t width = target.n_embd;
  const size_t row_floats = n_parts * size_t(width);
  for (size_t i = 0; i < in.rows.size(); ++i) {
    const ProposalRow& row = in.rows[i];
    State& st = state_of(row);
    out[i].clear();
    if (!st.learned_tree.empty()) observe_tree(st, row.feature_path);
    if (st.deferred_rows + row.n_new > kMaxDeferredRows) {
      // Too far behind to catch up cheaply: this sequence decodes plainly from now on.
      out[i].gave_up = true;
      st.deferred_rows = 0;
      st.deferred_features.clear();
      continue;
    }
    if (st.deferred_features.capacity() == 0) st.deferred_features.reserve(size_t(kMaxDeferredRows) * row_floats);
    st.deferred_features.resize(size_t(st.deferred_rows + row.n_new) * row_floats);
    for (int64_t r = 0; r < row.n_new; ++r)
      for (size_t j = 0; j < n_parts; ++j)
        std::memcpy(st.deferred_features.data() + size_t(st.deferred_rows + r) * row_floats + j * size_t(width),
                    target_feature(row, target, j, r), size_t(width) * sizeof(float));
    st.deferred_rows += row.n_new;
  }
}

void HeadProposer::propose(const ProposalInput& in, std::span<SequenceProposal> out) {
  AERIE_CHECK(out.size() == in.rows.size(), "head proposer: ", out.size(), " outputs for ", in.rows.size(), " rows");
  if (in.step_k == 0) return defer(in, out);
  const ForwardOutput& target = *in.target;
  const size_t n_parts = target.hidden.size();
  const int64_t width = target.n_embd;
  const size_t row_floats = n_parts * size_t(width);
  int64_t m = 0;
  for (const ProposalRow& row : in.rows) m += state_of(row).deferred_rows + row.n_new;
  for (SequenceProposal& o : out) o.clear();
  if (m == 0) return;
  gathered_.resize(size_t(m) * row_floats);
  parts_.resize(n_parts);
  for (size_t j = 0; j < n_parts; ++j) parts_[j] = gathered_.data() + j * size_t(m * width);
  ids_.clear();
  prev_ids_.clear();
  rows_.clear();
  logit_rows_.clear();
  drafting_.clear();
  drafting_k_.clear();
  trees_now_ = 0;
  for (size_t i = 0; i < in.rows.size(); ++i) {
    const ProposalRow& row = in.rows[i];
    State& st = state_of(row);
    if (!st.learned_tree.empty()) observe_tree(st, row.feature_path);
    // Rows: the deferred ones (steps at K = 0), then this step's.
    const int64_t deferred = st.deferred_rows, rows = deferred + row.n_new;
    const int64_t hb = int64_t(ids_.size());
    const int64_t start = row.n_computed - rows;  // target position of the first row
    AERIE_CHECK(row.feature_path.empty() || int64_t(row.feature_path.size()) >= row.n_new, "head proposer: ",
                row.n_new, " new positions after a tree verification that kept ", row.feature_path.size(), " rows");
    for (int64_t r = 0; r < rows; ++r) ids_.push_back(row.tokens[size_t(start + r + 1)]);
    for (size_t j = 0; j < n_parts; ++j) {
      float* dst = gathered_.data() + j * size_t(m * width) + size_t(hb * width);
      for (int64_t r = 0; r < deferred; ++r)
        std::memcpy(dst + r * width, st.deferred_features.data() + size_t(r) * row_floats + j * size_t(width),
                    size_t(width) * sizeof(float));
      if (row.feature_path.empty()) {
        std::memcpy(dst + deferred * width, target_feature(row, target, j, 0), size_t(row.n_new * width) * sizeof(float));
        continue;
      }
      // A verified tree: the accepted path's rows, not consecutive in the target's batch.
      for (int64_t r = 0; r < row.n_new; ++r)
        std::memcpy(dst + (deferred + r) * width, target_feature(row, target, j, r), size_t(width) * sizeof(float));
    }
    rows_.push_back(SequenceRows{hb, rows, row.head_cache});
    prev_ids_.push_back(row.tokens[size_t(start)]);
    if (row.k > 0) {
      logit_rows_.push_back(hb + rows - 1);
      drafting_.push_back(i);
      drafting_k_.push_back(row.k);
      if (row.tree) continue;
      out[i].drafts.resize(size_t(row.k));
      out[i].draft_ids.resize(size_t(row.k));
      if (row.sampled) out[i].q.resize(size_t(row.k * head_.n_vocab()));
    }
  }
  const DraftOutput first = head_.forward(DraftBatch{ids_, FeatureSource::kTarget, parts_, rows_, logit_rows_, prev_ids_});
  for (const ProposalRow& row : in.rows) state_of(row).deferred_rows = 0;  // in the head's cache now
  const int64_t hd = first.n_embd, vd = first.n_vocab;
  self_features_.resize(drafting_.size() * size_t(hd));
  for (size_t d = 0; d < drafting_.size(); ++d) {
    const ProposalRow& row = in.rows[drafting_[d]];
    if (row.tree) {  // the root's children; the tree's passes follow the chains'
      if (tree_work_.size() == trees_now_) tree_work_.emplace_back();
      TreeWork& t = tree_work_[trees_now_++];
      t.row = drafting_[d];
      t.depth = drafting_k_[d];
      t.cache = row.head_cache;
      t.head_length = row.head_cache->length();
      t.last_token = row.tokens.back();
      t.row_in = &row;
      t.builder.reset(spec_.tree.top_k);
      t.qs.clear();
      t.q_slot.clear();
      if (learned(t)) {  // the sequence's rates do not change within a round: its values and floor once
        state_of(row).draw_acceptance.log_values(spec_.tree.top_k, t.values);
        t.floor = learned_floor(t.values, t.depth, spec_.tree.total_tokens);
      }
      check_finite_logits(first.logits + int64_t(d) * vd, 1, vd);
      expand(t, -1, first.logits + int64_t(d) * vd, vd);
      t.root_feature.assign(first.features + logit_rows_[d] * hd, first.features + (logit_rows_[d] + 1) * hd);
      drafting_k_[d] = 0;  // no chain passes
      continue;
    }
    pick(row, state_of(row), out[drafting_[d]], first.logits + int64_t(d) * vd, 0);
    std::memcpy(self_features_.data() + d * size_t(hd), first.features + logit_rows_[d] * hd,
                size_t(hd) * sizeof(float));
  }
  // Further draft steps: one row per sequence still drafting, on the head's own features.
  const int64_t max_k = drafting_k_.empty() ? 0 : *std::max_element(drafting_k_.begin(), drafting_k_.end());
  for (int64_t step = 1; step < max_k; ++step) {
    ids_.clear();
    prev_ids_.clear();
    rows_.clear();
    logit_rows_.clear();
    active_.clear();
    gathered_.resize(drafting_.size() * size_t(hd));
    for (size_t d = 0; d < drafting_.size(); ++d) {
      if (drafting_k_[d] <= step) continue;
      const int64_t r = int64_t(ids_.size());
      const ProposalRow& row = in.rows[drafting_[d]];
      const SequenceProposal& o = out[drafting_[d]];
      ids_.push_back(o.drafts[size_t(step - 1)]);
      prev_ids_.push_back(step == 1 ? row.tokens[size_t(row.n_computed)] : o.drafts[size_t(step - 2)]);
      std::memcpy(gathered_.data() + size_t(r * hd), self_features_.data() + d * size_t(hd), size_t(hd) * sizeof(float));
      rows_.push_back(SequenceRows{r, 1, row.head_cache});
      logit_rows_.push_back(r);
      active_.push_back(d);
    }
    const float* part = gathered_.data();
    const DraftOutput pass = head_.forward(DraftBatch{ids_, FeatureSource::kSelf, std::span(&part, 1), rows_, logit_rows_, prev_ids_});
    for (size_t r = 0; r < active_.size(); ++r) {
      const size_t d = active_[r];
      const ProposalRow& row = in.rows[drafting_[d]];
      pick(row, state_of(row), out[drafting_[d]], pass.logits + int64_t(r) * vd, step);
      std::memcpy(self_features_.data() + d * size_t(hd), pass.features + int64_t(r) * hd, size_t(hd) * sizeof(float));
    }
  }
  if (trees_now_ > 0) propose_trees(out);
}

void HeadProposer::propose_trees(std::span<SequenceProposal> out) {
  const int64_t hd = head_.n_embd();
  int64_t max_depth = 0;
  for (size_t t = 0; t < trees_now_; ++t) {
    TreeWork& w = tree_work_[t];
    max_depth = std::max(max_depth, w.depth);
    w.run_nodes.clear();
    w.features.clear();
  }
  for (int64_t level = 1; level < max_depth; ++level) {
    ids_.clear();
    prev_ids_.clear();
    rows_.clear();
    logit_rows_.clear();
    active_.clear();
    for (size_t t = 0; t < trees_now_; ++t) {
      TreeWork& w = tree_work_[t];
      if (w.depth <= level) continue;
      // Nodes whose children could not make the selection are not run (learned scores: their first rank's
      // value is the most a child adds).
      const bool by_rank = learned(w);
      const std::span<const int32_t> frontier = w.builder.next_frontier(
          spec_.tree.total_tokens, by_rank ? w.values[0] : 0.0, by_rank ? w.floor : -1e300);
      if (frontier.empty()) {  // nothing deeper can be kept: this tree is complete
        w.depth = level;
        continue;
      }
      // The nodes run so far stay in the head's cache (rows after the root, in run order): this pass runs
      // only the frontier as new tree rows on top of them.
      const int64_t n_cached = int64_t(w.run_nodes.size());
      if (n_cached == 0) w.cache->truncate(w.head_length, /*keep_blocks=*/true);  // a retried step's rows
      w.run_nodes.insert(w.run_nodes.end(), frontier.begin(), frontier.end());
      const auto& nodes = w.builder.nodes();
      if (n_cached == 0) w.row_of_node.clear();  // nodes only grow within a round
      w.row_of_node.resize(nodes.size(), -1);
      for (size_t r = size_t(n_cached); r < w.run_nodes.size(); ++r) w.row_of_node[size_t(w.run_nodes[r])] = int32_t(r);
      // The frontier's rows: each one's parent row (over every run node), token and input feature (its
      // parent's output feature, the root's for the root's children).
      const int64_t hb = int64_t(ids_.size()), n = int64_t(w.run_nodes.size()), n_new = n - n_cached;
      w.tree_parent.resize(size_t(n));
      gathered_.resize(size_t((hb + n_new) * hd));
      for (int64_t r = n_cached; r < n; ++r) {
        const DraftTreeBuilder::Node& node = nodes[size_t(w.run_nodes[size_t(r)])];
        const int32_t parent_row = node.parent < 0 ? -1 : w.row_of_node[size_t(node.parent)];
        w.tree_parent[size_t(r)] = parent_row;
        ids_.push_back(to_target(node.token));
        const float* feature = parent_row < 0 ? w.root_feature.data() : w.features.data() + parent_row * hd;
        std::memcpy(gathered_.data() + (hb + r - n_cached) * hd, feature, size_t(hd) * sizeof(float));
        logit_rows_.push_back(hb + r - n_cached);
      }
      prev_ids_.push_back(w.last_token);
      rows_.push_back(SequenceRows{hb, n_new, w.cache, w.tree_parent.data(), n_cached});
      active_.push_back(t);
    }
    if (active_.empty()) break;  // every tree is complete: no pass
    const float* part = gathered_.data();
    const DraftOutput pass =
        head_.forward(DraftBatch{ids_, FeatureSource::kSelf, std::span(&part, 1), rows_, logit_rows_, prev_ids_});
    check_finite_logits(pass.logits, pass.n_logit_rows, pass.n_vocab);
    int64_t logit_row = 0;
    for (size_t a = 0; a < active_.size(); ++a) {
      TreeWork& w = tree_work_[active_[a]];
      const int64_t n_new = rows_[a].n_rows, n = int64_t(w.run_nodes.size());
      w.features.insert(w.features.end(), pass.features + rows_[a].row_begin * hd,
                        pass.features + (rows_[a].row_begin + n_new) * hd);
      for (int64_t r = n - n_new; r < n; ++r, ++logit_row)
        expand(w, w.run_nodes[size_t(r)], pass.logits + logit_row * pass.n_vocab, pass.n_vocab);
    }
  }
  for (size_t t = 0; t < trees_now_; ++t) finish_tree(tree_work_[t], out[tree_work_[t].row]);
}

void HeadProposer::expand(TreeWork& w, int32_t node, const float* logits, int64_t n_vocab) {
  if (!learned(w)) return w.builder.expand(node, logits, n_vocab);
  if (!w.row_in->sampled) return w.builder.expand_ranked(node, logits, n_vocab, w.values);
  const size_t slot = w.qs.size() / size_t(n_vocab);
  w.qs.resize((slot + 1) * size_t(n_vocab));
  float* q = w.qs.data() + slot * size_t(n_vocab);
  compute_probs(logits, n_vocab, *w.row_in->sampling, q, sampler_scratch_);
  if (w.q_slot.size() < size_t(node + 2)) w.q_slot.resize(size_t(node + 2), -1);
  w.q_slot[size_t(node + 1)] = int32_t(slot);
  w.builder.expand_sampled(node, q, n_vocab, *w.row_in->rng, w.values);
}

bool HeadProposer::learned(const TreeWork& w) const {
  return w.row_in->sampled || spec_.tree.score == TreeScore::kLearned;
}

void HeadProposer::finish_tree(TreeWork& w, SequenceProposal& o) {
  w.builder.select(spec_.tree.total_tokens, tree_tokens_, tree_parents_, &tree_kept_);
  o.draft_ids.assign(tree_tokens_.begin(), tree_tokens_.end());
  o.drafts.resize(tree_tokens_.size());
  for (size_t i = 0; i < tree_tokens_.size(); ++i) o.drafts[i] = to_target(tree_tokens_[i]);
  o.tree_parent.resize(tree_parents_.size() + 1);
  o.tree_parent[0] = -1;  // the root: the last token
  for (size_t i = 0; i < tree_parents_.size(); ++i) o.tree_parent[i + 1] = tree_parents_[i] + 1;
  if (learned(w)) state_of(*w.row_in).learned_tree = o.tree_parent;  // to learn from its verification
  if (!w.row_in->sampled) return;
  // q of each verification row with children, in row order (row 0: the root, row 1 + i: kept node i).
  const int64_t vd = head_.n_vocab();
  o.q.clear();
  for (size_t row = 0; row < o.tree_parent.size(); ++row) {
    if (std::find(o.tree_parent.begin() + std::ptrdiff_t(row) + 1, o.tree_parent.end(), int32_t(row)) ==
        o.tree_parent.end())
      continue;
    const int32_t node = row == 0 ? -1 : tree_kept_[row - 1];
    const int32_t slot = w.q_slot[size_t(node + 1)];
    AERIE_CHECK(slot >= 0, "draft tree: node ", node, " has children but was not expanded");
    const float* q = w.qs.data() + size_t(slot) * size_t(vd);
    o.q.insert(o.q.end(), q, q + vd);
  }
}

void HeadProposer::observe_tree(State& state, std::span<const int64_t> path) {
  const std::vector<int32_t>& parent = state.learned_tree;
  // The kept children of a row are its first draws, in row order: the j-th child is draw j. At each row of
  // the path, the draws before the accepted child were tried and rejected; at its last row, all of them.
  for (size_t i = 0; i < path.size(); ++i) {
    const int64_t row = path[i], next = i + 1 < path.size() ? path[i + 1] : -1;
    AERIE_CHECK(row >= 0 && row < int64_t(parent.size()), "head proposer: verified row ", row, " outside a tree of ",
                parent.size(), " rows");
    int64_t draw = 0;
    for (int64_t r = row + 1; r < int64_t(parent.size()); ++r) {
      if (parent[size_t(r)] != row) continue;
      ++draw;
      state.draw_acceptance.observe(draw, r == next);
      if (r == next) break;
    }
  }
  state.learned_tree.clear();
}

}  // namespace aerie
