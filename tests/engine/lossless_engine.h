// The losslessness test of speculative sampling through an Engine, shared by the Llama
// (tests/engine/engine_lossless_test.cpp) and DeepSeek (tests/spec/deepseek_lossless_test.cpp) targets.
//
// Every run serves one block of concurrent requests, one per sampling case, each with its own prompt (all
// starting with the same token x_0, as the oracle heads need; 2..5 tokens, so a batch holds rows at
// different positions) and its own seed, and records the first 3 tokens of each. Half the block arrives
// a step late, so prompts are prefilled in the same batches as other sequences' verifications. After kRuns runs, each
// case's counts are compared with the exact target-only joint distribution (lossless_support.h:
// exact_joint) by a chi-square test. With a constraint (ShiftingResidueConstraint) on every other
// request, constrained and unconstrained sequences share each batch, and the reference masks the
// target's logits before compute_probs as the engine does before it samples or verifies.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "lossless_support.h"

namespace aerie::testing {

// One request of the block an engine serves together in every run of a losslessness test.
struct LosslessRequest {
  std::vector<int64_t> prompt;
  SamplingParams sampling;                            // the seed is set per run
  Penalties penalties;
  std::shared_ptr<const TokenConstraint> constraint;  // null: unconstrained
};

// What the runs of one request of the block gave.
struct LosslessTally {
  std::map<std::vector<int64_t>, int64_t> counts;  // first 3 tokens -> runs
  SpecStats spec;                                  // every verification round, summed over runs
  int64_t second_verified = 0;  // first rounds (K = 2) whose first draft was accepted: the second was verified
  int64_t second_accepted = 0;  // ... and accepted
  int64_t bad_runs = 0;         // runs that did not give 4 tokens, or whose first round was not K = 2
  std::string first_bad;
};

// Each run submits every request of `block` (max_tokens 4, ignore_eos, its own seed; the first half one
// step before the second), runs the engine until idle and records the first 3 tokens of each.
// max_tokens 4 makes the first verification round carry K = 2 drafts (the engine drafts at most
// remaining - 1), so tokens 2 and 3 can both be accepted drafts of one round: the second draft position
// is verified within the 3 recorded tokens. The 4th token is generated but not recorded. Worked example,
// first round accepting one draft: events [t1] (prefill), [d1, y] (a = 1: d2 was verified and rejected,
// y is the correction), [t4] (K = 0 = remaining - 1); recorded: t1 d1 y. `before_run` may re-salt an oracle.
// A drafter that may propose fewer than K (the n-gram drafter: none without a match) passes
// `short_rounds`: its runs count whatever their first round's K, the second-draft tallies only K = 2 ones.
inline std::vector<LosslessTally> run_lossless(Engine& engine, const std::vector<LosslessRequest>& block, int runs,
                                               const std::function<void(int)>& before_run, bool short_rounds = false) {
  struct Record {
    std::vector<int64_t> tokens;
    std::vector<size_t> event_sizes;  // tokens per event: [1 (prefill), a + 1 (first round), ...]
    SpecStats spec;
  };
  std::vector<LosslessTally> tallies(block.size());
  std::vector<Record> records(block.size());
  for (int run = 0; run < runs; ++run) {
    if (before_run) before_run(run);
    for (size_t i = 0; i < block.size(); ++i) {
      // The second half arrives one step late: its prompts are prefilled in the batch that verifies the
      // first half's drafts.
      if (i == (block.size() + 1) / 2) engine.step();
      records[i] = Record{};
      RequestOptions options;
      options.sampling = block[i].sampling;
      options.sampling.seed = uint64_t(run) * 7919 + uint64_t(i) * 1000003 + 2000003;
      options.max_tokens = 4;
      options.ignore_eos = true;
      options.constraint = block[i].constraint;
      options.penalties = block[i].penalties;
      engine.submit(block[i].prompt, options, [&records, i](const TokenEvent& e) {
        Record& r = records[i];
        r.tokens.insert(r.tokens.end(), e.tokens.begin(), e.tokens.end());
        if (!e.tokens.empty()) r.event_sizes.push_back(e.tokens.size());
        if (e.finished && e.spec) r.spec = *e.spec;
      });
    }
    engine.run_until_idle();
    for (size_t i = 0; i < block.size(); ++i) {
      const Record& r = records[i];
      LosslessTally& tally = tallies[i];
      const bool k2 = r.spec.proposed_at.size() >= 2 && r.spec.proposed_at[1] == 1;
      if (r.tokens.size() != 4 || r.event_sizes.size() < 2 || r.event_sizes[0] != 1 || !(k2 || short_rounds)) {
        if (tally.bad_runs++ == 0)
          tally.first_bad = str_cat("run ", run, ": ", r.tokens.size(), " tokens in ", r.event_sizes.size(),
                                    " events, K = 2 rounds: ", k2 ? 1 : 0);
        continue;
      }
      ++tally.counts[std::vector<int64_t>(r.tokens.begin(), r.tokens.begin() + 3)];
      tally.spec.add(r.spec);
      if (!k2) continue;
      const size_t accepted_first_round = r.event_sizes[1] - 1;
      tally.second_verified += accepted_first_round >= 1 ? 1 : 0;
      tally.second_accepted += accepted_first_round >= 2 ? 1 : 0;
    }
  }
  return tallies;
}

// What a case must show besides the chi-square: which paths ran.
struct LosslessChecks {
  bool first_position = true;     // drafts at position 0 both accepted and rejected
  bool second_position = true;    // the first round's second draft both accepted and rejected
  double min_acceptance = 0.0;    // accepted / drafted over all rounds
};

// Prints one line per case and checks it: every run well formed, no impossible continuation, enough
// cells, chi-square under its limit, and the paths of `checks`.
inline void expect_lossless(const std::string& label, const std::map<std::vector<int64_t>, double>& exact,
                            const LosslessTally& tally, int64_t runs, const LosslessChecks& checks) {
  EXPECT_EQ(tally.bad_runs, 0) << label << ": " << tally.first_bad;
  const ChiSquare chi = chi_square(exact, tally.counts, runs - tally.bad_runs);
  const SpecStats& s = tally.spec;
  const int64_t proposed0 = s.proposed_at.empty() ? 0 : s.proposed_at[0];
  const int64_t accepted0 = s.accepted_at.empty() ? 0 : s.accepted_at[0];
  std::printf("%-40s %3d cells, chi2 %6.1f (limit %6.1f); acceptance %.3f: position 0 %.3f (%lld of %lld), "
              "second draft of the first round %.3f (%lld of %lld)\n",
              label.c_str(), chi.cells, chi.chi2, chi.limit, s.acceptance_rate(),
              double(accepted0) / double(std::max<int64_t>(proposed0, 1)), (long long)accepted0, (long long)proposed0,
              double(tally.second_accepted) / double(std::max<int64_t>(tally.second_verified, 1)),
              (long long)tally.second_accepted, (long long)tally.second_verified);
  EXPECT_EQ(chi.impossible, 0) << label << ": continuations of probability 0 were drawn";
  EXPECT_GE(chi.cells, 8) << label << ": the target is too peaked here to test anything";
  EXPECT_LT(chi.chi2, chi.limit) << label << ": " << chi.cells << " cells";
  if (checks.first_position) {
    EXPECT_GT(accepted0, 0) << label << ": no draft accepted at position 0";
    EXPECT_LT(accepted0, proposed0) << label << ": no draft rejected at position 0";
  }
  if (checks.second_position) {
    EXPECT_GT(tally.second_accepted, 0) << label << ": no second draft accepted";
    EXPECT_LT(tally.second_accepted, tally.second_verified) << label << ": no second draft rejected";
  }
  EXPECT_GE(s.acceptance_rate(), checks.min_acceptance) << label;
}

// The sampling cases of a block: temperature alone, with top-k / top-p, and with min-p. The prompt of
// each is x_0 followed by `prompt_tail`.
struct SamplingCase {
  const char* name;
  float temperature;
  int64_t top_k;
  float top_p;
  float min_p;
  std::vector<int64_t> prompt_tail;
  Penalties penalties = {};
};

inline const std::vector<SamplingCase>& sampling_cases() {
  static const std::vector<SamplingCase> cases = {
      {"T1.0", 1.0f, 0, 1.0f, 0.0f, {5, 9}},
      {"T0.7", 0.7f, 0, 1.0f, 0.0f, {7}},
      {"T0.7_k6_p0.9", 0.7f, 6, 0.9f, 0.0f, {12, 3, 8}},
      {"T1.0_k8_p0.8", 1.0f, 8, 0.8f, 0.0f, {4, 14}},
      {"T0.8_minp0.1", 0.8f, 0, 1.0f, 0.1f, {10, 6, 2, 11}},
  };
  return cases;
}

enum class Constrained { kNone, kEvenRequests, kOddRequests };  // which requests of the block carry it

// "_sampled" / "_argmax", then "_constrained_even" / "_constrained_odd" when constrained: the end of a case name.
inline std::string case_suffix(DraftProposal proposal, Constrained constrained) {
  std::string name = proposal == DraftProposal::kSampled ? "_sampled" : "_argmax";
  if (constrained == Constrained::kEvenRequests) name += "_constrained_even";
  if (constrained == Constrained::kOddRequests) name += "_constrained_odd";
  return name;
}

struct LosslessSetup {
  std::string label;
  int64_t first_token = 0;  // x_0 of every prompt
  DraftProposal proposal = DraftProposal::kSampled;  // engine-wide
  Constrained constrained = Constrained::kNone;
  int runs = 8000;
  LosslessChecks checks;
  std::function<void(int)> before_run;  // e.g. re-salts an oracle head
  bool short_rounds = false;  // the drafter may propose fewer than K drafts (run_lossless)
  // checks.first_position / second_position over the whole block instead of per case (a drafter whose
  // drafts the prompt fixes may never reach a path in a peaked case).
  bool paths_per_block = false;
  const std::vector<SamplingCase>* cases = nullptr;  // null: sampling_cases()
  DraftTreeShape tree;  // EAGLE-2 draft trees instead of chains when enabled()
  // The constraint of the constrained requests (null: ShiftingResidueConstraint over the target's vocabulary).
  std::shared_ptr<const TokenConstraint> constraint;
};

// A setup for one case; a steered drafter (an oracle) must also be accepted often.
inline LosslessSetup lossless_setup(std::string label, int64_t first_token, DraftProposal proposal,
                                    Constrained constrained, int runs, bool steered) {
  LosslessSetup setup;
  setup.label = std::move(label);
  setup.first_token = first_token;
  setup.proposal = proposal;
  setup.constrained = constrained;
  setup.runs = runs;
  if (steered) setup.checks.min_acceptance = proposal == DraftProposal::kSampled ? 0.25 : 0.15;
  return setup;
}

// The sanitizer build serves each block at most kSanitizerRuns times: ASan and UBSan check the paths that
// these draws take, every chi-square still holds at its limit, and full power is the Release run's (8000
// runs, ~5x the time). A low-acceptance case may then see no second draft accepted (min-p: 0 of 237 at 1500),
// so there the accept and reject paths are checked over the whole block (paths_per_block).
#ifdef __SANITIZE_ADDRESS__
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif
inline constexpr int kSanitizerRuns = 1500;

// One engine with `head`, the block of sampling_cases() served setup.runs times (at most kSanitizerRuns in
// the sanitizer build), every case checked.
inline void expect_engine_lossless(Model& target, Drafter& head, ThreadPool& pool, const LosslessSetup& setup) {
  const int runs = kSanitizerBuild ? std::min(setup.runs, kSanitizerRuns) : setup.runs;
  const bool paths_per_block = setup.paths_per_block || kSanitizerBuild;
  EngineConfig config;
  config.kv_cache_memory = uint64_t(1) << 20;
  config.max_length = 64;
  config.block_size = 4;          // sequences of 6..9 tokens cross block boundaries
  config.prefix_caching = false;  // the oracles keep histories per head cache and cannot see a reused prefix
  config.spec.num_speculative_tokens = 2;
  config.spec.proposal = setup.proposal;
  config.spec.tree = setup.tree;
  Engine engine(target, &head, config, pool);

  const std::shared_ptr<const TokenConstraint> constraint =
      setup.constraint ? setup.constraint : std::make_shared<ShiftingResidueConstraint>(target.n_vocab(), 3);
  std::vector<LosslessRequest> block;
  std::vector<std::map<std::vector<int64_t>, double>> exact;
  const std::vector<SamplingCase>& cases = setup.cases ? *setup.cases : sampling_cases();
  for (const SamplingCase& c : cases) {
    LosslessRequest r;
    r.prompt = {setup.first_token};
    r.prompt.insert(r.prompt.end(), c.prompt_tail.begin(), c.prompt_tail.end());
    r.sampling.temperature = c.temperature;
    r.sampling.top_k = c.top_k;
    r.sampling.top_p = c.top_p;
    r.sampling.min_p = c.min_p;
    r.penalties = c.penalties;
    const size_t i = block.size();
    if ((setup.constrained == Constrained::kEvenRequests && i % 2 == 0) ||
        (setup.constrained == Constrained::kOddRequests && i % 2 == 1))
      r.constraint = constraint;
    exact.push_back(exact_joint(target, r.prompt, r.sampling, 3, r.constraint.get(), r.penalties));
    block.push_back(std::move(r));
  }
  const std::vector<LosslessTally> tallies = run_lossless(engine, block, runs, setup.before_run, setup.short_rounds);
  LosslessChecks checks = setup.checks;
  if (paths_per_block) checks.first_position = checks.second_position = false;
  LosslessTally all;  // the block's rounds, for paths_per_block
  for (size_t i = 0; i < block.size(); ++i) {
    const std::string label =
        setup.label + " " + cases[i].name + (block[i].constraint ? " constrained" : "");
    expect_lossless(label, exact[i], tallies[i], runs, checks);
    all.spec.add(tallies[i].spec);
    all.second_verified += tallies[i].second_verified;
    all.second_accepted += tallies[i].second_accepted;
  }
  if (paths_per_block) {
    const int64_t proposed0 = all.spec.proposed_at.empty() ? 0 : all.spec.proposed_at[0];
    const int64_t accepted0 = all.spec.accepted_at.empty() ? 0 : all.spec.accepted_at[0];
    if (setup.checks.first_position) {
      EXPECT_GT(accepted0, 0) << setup.label << ": no draft accepted at position 0";
      EXPECT_LT(accepted0, proposed0) << setup.label << ": no draft rejected at position 0";
    }
    if (setup.checks.second_position) {
      EXPECT_GT(all.second_accepted, 0) << setup.label << ": no second draft accepted";
      EXPECT_LT(all.second_accepted, all.second_verified) << setup.label << ": no second draft rejected";
    }
  }
  EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0) << setup.label;
}

}  // namespace aerie::testing
