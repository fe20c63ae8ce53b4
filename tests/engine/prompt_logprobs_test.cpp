// Prompt log-probabilities (RequestOptions::prompt_logprobs) through the engine: every prompt token after
// the first gets exactly one entry, equal to the log-softmax of the model's own forward over the whole
// prompt (computed here, row by row), whatever the chunking (prompts longer than the per-step cap), the
// batch (other requests, a draft head), preemption and recomputation, or the prefix cache; the output is
// the one the request produces without them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"

namespace aerie {
namespace {

const std::filesystem::path kData(AERIE_TEST_DATA_DIR);
constexpr int64_t kTop = 4;

// One reference entry: log-softmax of row p of a single forward over the prompt, for token p + 1.
struct Expected {
  double logprob = 0.0;
  int64_t rank = 0;
  std::vector<std::pair<int64_t, double>> top;  // most likely first, ties to the lower id
  double gap = 0.0;  // smallest log-probability gap among the first kTop + 1 and around the token (ties)
};

std::vector<Expected> reference_entries(Model& target, const std::vector<int64_t>& prompt) {
  const int64_t n = int64_t(prompt.size());
  KvCache kv = target.make_kv_cache(n, EngineConfig{}.kv_cache_dtype);
  const SequenceRows s{0, n, &kv};
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  const ForwardOutput f = target.forward(StepBatch{prompt, std::span(&s, 1), rows, {}});
  const int64_t v = f.n_vocab;
  std::vector<Expected> out;
  for (int64_t p = 0; p + 1 < n; ++p) {
    const float* row = f.logits + p * v;
    double mx = row[0], sum = 0.0;
    for (int64_t t = 0; t < v; ++t) mx = std::max<double>(mx, row[t]);
    for (int64_t t = 0; t < v; ++t) sum += std::exp(double(row[t]) - mx);
    const double lse = mx + std::log(sum);
    std::vector<int64_t> order(static_cast<size_t>(v));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [row](int64_t a, int64_t b) { return row[a] > row[b]; });
    const int64_t token = prompt[size_t(p + 1)];
    Expected e;
    e.logprob = row[token] - lse;
    e.rank = 1 + (std::find(order.begin(), order.end(), token) - order.begin());
    for (int64_t i = 0; i < kTop; ++i) e.top.emplace_back(order[size_t(i)], row[order[size_t(i)]] - lse);
    e.gap = 1e9;
    auto gap_at = [&](int64_t i) {  // between order[i] and order[i + 1]
      if (i >= 0 && i + 1 < v) e.gap = std::min<double>(e.gap, row[order[size_t(i)]] - row[order[size_t(i + 1)]]);
    };
    for (int64_t i = 0; i < kTop; ++i) gap_at(i);
    gap_at(e.rank - 2);
    gap_at(e.rank - 1);
    out.push_back(e);
  }
  return out;
}

// Entries against the reference: values to float rounding (the engine's forward runs in chunks over the
// cache); ids and ranks where no near-tie could reorder them.
void expect_entries(const std::vector<PromptTokenLogprob>& got, const std::vector<int64_t>& prompt,
                    const std::vector<Expected>& expected, const std::string& what) {
  ASSERT_EQ(got.size(), prompt.size() - 1) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const PromptTokenLogprob& g = got[i];
    const Expected& e = expected[i];
    EXPECT_EQ(g.token, prompt[i + 1]) << what << " entry " << i;
    EXPECT_NEAR(g.logprobs.logprob, e.logprob, 2e-3) << what << " entry " << i;
    ASSERT_EQ(g.logprobs.top.size(), size_t(kTop)) << what;
    for (size_t k = 0; k < size_t(kTop); ++k) {
      EXPECT_NEAR(g.logprobs.top[k].second, e.top[k].second, 2e-3) << what << " entry " << i << " top " << k;
      if (e.gap > 1e-2) {
        EXPECT_EQ(g.logprobs.top[k].first, e.top[k].first) << what << " entry " << i << " top " << k;
      }
    }
    if (e.gap > 1e-2) {
      EXPECT_EQ(g.rank, e.rank) << what << " entry " << i;
    }
    EXPECT_GE(g.rank, 1);
  }
}

std::vector<int64_t> random_prompt(std::mt19937_64& rng, int64_t length, int64_t vocab) {
  std::vector<int64_t> prompt;
  for (int64_t t = 0; t < length; ++t) prompt.push_back(3 + int64_t(rng() % uint64_t(vocab - 3)));
  return prompt;
}

struct Outcome {
  std::vector<int64_t> tokens;
  std::vector<PromptTokenLogprob> entries;
  FinishReason reason = FinishReason::kNone;
  int64_t cached = 0;
  int64_t largest_event = 0;  // most entries in one event
  int events_with_entries = 0;
};

struct Job {
  std::vector<int64_t> prompt;
  RequestOptions options;
};

// Runs the jobs together, step by step; `most_per_step` gets the most prompt entries any step reported.
std::vector<Outcome> run_jobs(Engine& engine, const std::vector<Job>& jobs, int64_t* most_per_step = nullptr) {
  std::vector<Outcome> runs(jobs.size());
  int64_t this_step = 0;
  for (size_t i = 0; i < jobs.size(); ++i)
    engine.submit(jobs[i].prompt, jobs[i].options, [&runs, &this_step, i](const TokenEvent& e) {
      Outcome& r = runs[i];
      EXPECT_EQ(r.reason, FinishReason::kNone) << "event after the final one";
      r.tokens.insert(r.tokens.end(), e.tokens.begin(), e.tokens.end());
      r.entries.insert(r.entries.end(), e.prompt_logprobs.begin(), e.prompt_logprobs.end());
      r.largest_event = std::max(r.largest_event, int64_t(e.prompt_logprobs.size()));
      r.events_with_entries += e.prompt_logprobs.empty() ? 0 : 1;
      this_step += int64_t(e.prompt_logprobs.size());
      if (e.finished) {
        r.reason = e.finish_reason;
        r.cached = e.cached_prompt_tokens;
      }
    });
  int64_t most = 0;
  do {
    this_step = 0;
    engine.step();
    most = std::max(most, this_step);
  } while (!engine.idle());
  if (most_per_step) *most_per_step = most;
  return runs;
}

std::vector<int64_t> greedy_alone(Model& target, const Job& job) {
  GenerateOptions g;
  g.max_tokens = job.options.max_tokens;
  return generate(target, job.prompt, g).tokens;
}

class PromptLogprobs : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  std::unique_ptr<Model> target = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);
  std::unique_ptr<DraftHead> head = load_drafter(kData / "eagle/eagle3_midlayer_d2t", *target, pool);

  Job job(std::mt19937_64& rng, int64_t length, int64_t max_tokens, int64_t prompt_logprobs) {
    Job j;
    j.prompt = random_prompt(rng, length, target->n_vocab());
    j.options.max_tokens = max_tokens;
    j.options.ignore_eos = true;
    j.options.sampling.temperature = 0.0f;
    j.options.prompt_logprobs = prompt_logprobs;
    return j;
  }
};

TEST_F(PromptLogprobs, EntriesAreTheLogSoftmaxOfTheWholePromptInChunksBesideOtherRequests) {
  std::mt19937_64 rng(11);
  // Two prompt-logprobs requests longer than the per-step cap, between two plain ones.
  const std::vector<Job> jobs = {job(rng, 20, 12, -1), job(rng, 150, 10, kTop), job(rng, 40, 16, -1),
                                 job(rng, 90, 8, kTop)};
  for (DraftHead* draft : {static_cast<DraftHead*>(nullptr), head.get()}) {
    EngineConfig c;
    c.kv_cache_memory = 1 << 20;
    c.max_batch_tokens = 256;  // the cap, not the budget, splits the prompts
    c.max_num_seqs = 4;
    c.block_size = 8;
    c.max_length = 256;
    c.spec.num_speculative_tokens = 3;
    Engine engine(*target, draft, c, pool);
    int64_t most_per_step = 0;
    const std::vector<Outcome> runs = run_jobs(engine, jobs, &most_per_step);
    const std::string what = draft ? "with a draft head" : "plain";
    EXPECT_LE(most_per_step, kPromptLogprobRowsPerStep) << what;
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_EQ(runs[i].tokens, greedy_alone(*target, jobs[i])) << what << " request " << i;
      EXPECT_EQ(runs[i].reason, FinishReason::kLength);
      if (jobs[i].options.prompt_logprobs < 0) {
        EXPECT_TRUE(runs[i].entries.empty());
        continue;
      }
      expect_entries(runs[i].entries, jobs[i].prompt, reference_entries(*target, jobs[i].prompt),
                     what + " request " + std::to_string(i));
      EXPECT_LE(runs[i].largest_event, kPromptLogprobRowsPerStep);
    }
    EXPECT_GE(runs[1].events_with_entries, 3) << "149 entries in chunks of at most 64";
    EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0);
    if (draft) {
      EXPECT_GT(engine.metrics().spec.draft_tokens, 0);
    }
  }
}

TEST_F(PromptLogprobs, PreemptedRequestsReportEachEntryOnce) {
  std::mt19937_64 rng(12);
  std::vector<Job> jobs;
  for (int i = 0; i < 4; ++i) jobs.push_back(job(rng, 60 + 10 * i, 30, i < 3 ? kTop : -1));
  for (DraftHead* draft : {static_cast<DraftHead*>(nullptr), head.get()}) {
    EngineConfig c;
    c.kv_cache_memory = uint64_t(160) * 256 * 2;  // 160 positions (256 bytes each) per cache: preempts
    c.max_batch_tokens = 48;
    c.max_num_seqs = 4;
    c.block_size = 8;
    c.max_length = 256;
    c.spec.num_speculative_tokens = 3;
    Engine engine(*target, draft, c, pool);
    const std::vector<Outcome> runs = run_jobs(engine, jobs);
    const std::string what = draft ? "with a draft head" : "plain";
    EXPECT_GT(engine.metrics().preemptions, 0) << what << ": the small budget did not preempt";
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_EQ(runs[i].tokens, greedy_alone(*target, jobs[i])) << what << " request " << i;
      if (jobs[i].options.prompt_logprobs >= 0)
        expect_entries(runs[i].entries, jobs[i].prompt, reference_entries(*target, jobs[i].prompt),
                       what + " request " + std::to_string(i));
    }
    EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0);
  }
}

TEST_F(PromptLogprobs, SkipTheirPrefixCacheLookupAndMayGenerateNothing) {
  std::mt19937_64 rng(13);
  Job plain = job(rng, 70, 4, -1);
  EngineConfig c;
  c.kv_cache_memory = 1 << 20;
  c.block_size = 8;
  c.max_length = 256;
  Engine engine(*target, nullptr, c, pool);
  run_jobs(engine, {plain});  // fills the prefix cache
  Job scored = plain;
  scored.options.prompt_logprobs = kTop;
  scored.options.max_tokens = 0;  // the prompt's entries only (echo-only scoring)
  const std::vector<Outcome> runs = run_jobs(engine, {scored});
  EXPECT_EQ(runs[0].cached, 0) << "a prompt-logprobs request took positions from the prefix cache";
  EXPECT_TRUE(runs[0].tokens.empty());
  EXPECT_EQ(runs[0].reason, FinishReason::kLength);
  expect_entries(runs[0].entries, scored.prompt, reference_entries(*target, scored.prompt), "max_tokens 0");
  // Its blocks (and the first request's) still serve the others.
  EXPECT_EQ(run_jobs(engine, {plain})[0].cached, 64);
  // One prompt token: no entries, and still one answer.
  Job single = scored;
  single.prompt.resize(1);
  const Outcome one = run_jobs(engine, {single})[0];
  EXPECT_TRUE(one.entries.empty());
  EXPECT_EQ(one.reason, FinishReason::kLength);
  EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0);
  RequestOptions bad;
  bad.prompt_logprobs = -2;
  EXPECT_THROW(engine.submit({5, 6}, bad, nullptr), Error);
}

}  // namespace
}  // namespace aerie
