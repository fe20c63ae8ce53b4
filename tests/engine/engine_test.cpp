// The continuous-batching engine: many requests at once must each produce exactly what they produce
// alone (greedy, and seeded sampling), with and without a draft head, with prefix caching on and off,
// and under a block budget so small that sequences are preempted and recomputed. Nothing may leak.
// Request priorities order admission and preemption.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"

namespace aerie {
namespace {

const std::filesystem::path kData(AERIE_TEST_DATA_DIR);

struct Job {
  std::vector<int64_t> prompt;
  RequestOptions options;
};

std::vector<Job> make_jobs(int n, uint64_t seed, int64_t vocab, float temperature) {
  std::mt19937_64 rng(seed);
  std::vector<Job> jobs;
  for (int i = 0; i < n; ++i) {
    Job j;
    const int64_t len = 1 + int64_t(rng() % 70);
    for (int64_t t = 0; t < len; ++t) j.prompt.push_back(3 + int64_t(rng() % uint64_t(vocab - 3)));
    j.options.max_tokens = 4 + int64_t(rng() % 28);
    j.options.sampling.temperature = temperature;
    j.options.sampling.seed = 1000 + uint64_t(i);
    j.options.ignore_eos = true;
    jobs.push_back(j);
  }
  return jobs;
}

struct Outcome {
  std::vector<int64_t> tokens;
  FinishReason reason = FinishReason::kNone;
  int events = 0;
  int64_t cached = 0;
};

std::vector<Outcome> run_engine(Engine& engine, const std::vector<Job>& jobs) {
  std::vector<Outcome> out(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    engine.submit(jobs[i].prompt, jobs[i].options, [&out, i](const TokenEvent& e) {
      Outcome& o = out[i];
      EXPECT_EQ(o.reason, FinishReason::kNone) << "event after the final one";
      o.tokens.insert(o.tokens.end(), e.tokens.begin(), e.tokens.end());
      ++o.events;
      if (e.finished) {
        o.reason = e.finish_reason;
        o.cached = e.cached_prompt_tokens;
      }
    });
  }
  engine.run_until_idle();
  return out;
}

// KV bytes a position of the target below takes in the default (bf16) cache: 2 layers x 2 kv heads x 16 x
// (K, V) x 2 bytes.
constexpr uint64_t kPositionBytes = 256;

EngineConfig small_config(uint64_t kv_bytes, bool prefix_caching) {
  EngineConfig c;
  c.kv_cache_memory = kv_bytes;
  c.max_batch_tokens = 48;  // prompts longer than this are prefilled in chunks
  c.max_num_seqs = 5;
  c.block_size = 8;
  c.prefix_caching = prefix_caching;
  c.max_length = 256;
  return c;
}

class EngineTest : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  std::unique_ptr<Model> target = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);
};

TEST_F(EngineTest, BatchedGreedyEqualsEachRequestAlone) {
  const std::vector<Job> jobs = make_jobs(11, 1, target->n_vocab(), 0.0f);
  std::vector<std::vector<int64_t>> alone;
  for (const Job& j : jobs) {
    GenerateOptions g;
    g.max_tokens = j.options.max_tokens;
    alone.push_back(generate(*target, j.prompt, g).tokens);
  }
  std::unique_ptr<DraftHead> head = load_drafter(kData / "eagle/eagle3_midlayer_d2t", *target, pool);
  // KV for 2048 positions, and for 96: the second forces preemption (and recomputation).
  for (uint64_t kv_bytes : {uint64_t(1) << 20, uint64_t(96) * kPositionBytes * 2}) {
    for (bool prefix : {true, false}) {
      for (DraftHead* draft : {static_cast<DraftHead*>(nullptr), head.get()}) {
        EngineConfig c = small_config(kv_bytes, prefix);
        c.spec.num_speculative_tokens = 3;
        Engine engine(*target, draft, c, pool);
        const std::vector<Outcome> out = run_engine(engine, jobs);
        for (size_t i = 0; i < jobs.size(); ++i) {
          EXPECT_EQ(out[i].tokens, alone[i]) << "request " << i << " kv " << kv_bytes << " prefix " << prefix
                                             << " draft " << (draft != nullptr);
          EXPECT_EQ(out[i].reason, FinishReason::kLength);
        }
        const EngineMetrics m = engine.metrics();
        EXPECT_EQ(m.kv_blocks_in_use, 0) << "blocks leaked";
        if (kv_bytes < (1u << 20)) {
          EXPECT_GT(m.preemptions, 0) << "the small budget did not preempt";
        }
        if (draft) {
          EXPECT_GT(m.spec.draft_tokens, 0);
        }
      }
    }
  }
}

TEST_F(EngineTest, SeededSamplingDoesNotDependOnTheBatch) {
  const std::vector<Job> jobs = make_jobs(6, 2, target->n_vocab(), 0.9f);
  Engine together(*target, nullptr, small_config(1 << 20, true), pool);
  const std::vector<Outcome> batched = run_engine(together, jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    Engine solo(*target, nullptr, small_config(1 << 20, true), pool);
    EXPECT_EQ(run_engine(solo, {jobs[i]})[0].tokens, batched[i].tokens) << "request " << i;
  }
}

TEST_F(EngineTest, CancellationAtRandomPointsLeaksNothing) {
  std::unique_ptr<DraftHead> head = load_drafter(kData / "eagle/eagle3_midlayer_d2t", *target, pool);
  Engine engine(*target, head.get(), small_config(uint64_t(200) * kPositionBytes * 2, true), pool);
  const std::vector<Job> jobs = make_jobs(16, 3, target->n_vocab(), 0.7f);
  std::vector<Outcome> out(jobs.size());
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < jobs.size(); ++i)
    ids.push_back(engine.submit(jobs[i].prompt, jobs[i].options, [&out, i](const TokenEvent& e) {
      out[i].tokens.insert(out[i].tokens.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished) out[i].reason = e.finish_reason;
    }));
  std::mt19937 rng(5);
  int steps = 0;
  while (engine.step().worked || !engine.idle()) {
    if (++steps % 3 == 0) engine.cancel(ids[rng() % ids.size()]);  // some are already finished: no-op
  }
  int cancelled = 0;
  for (const Outcome& o : out) {
    EXPECT_NE(o.reason, FinishReason::kNone) << "a request never finished";
    cancelled += o.reason == FinishReason::kCancelled;
  }
  EXPECT_GT(cancelled, 0);
  EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0);
}

TEST_F(EngineTest, PrefixCacheSkipsTheSharedPrefill) {
  Engine engine(*target, nullptr, small_config(1 << 20, true), pool);
  std::vector<Job> jobs = make_jobs(1, 4, target->n_vocab(), 0.0f);
  jobs[0].prompt.resize(60, 7);
  const std::vector<Outcome> first = run_engine(engine, jobs);
  const int64_t prefilled_before = engine.metrics().prefilled_tokens;
  Job second = jobs[0];
  second.prompt.resize(50);  // the same first 50 tokens
  second.prompt.push_back(9);
  const std::vector<Outcome> out = run_engine(engine, {second});
  EXPECT_EQ(out[0].cached, 48);  // six whole blocks of 8
  EXPECT_EQ(engine.metrics().prefilled_tokens - prefilled_before, 51 - 48);
  Engine cold(*target, nullptr, small_config(1 << 20, false), pool);
  EXPECT_EQ(run_engine(cold, {second})[0].tokens, out[0].tokens);
}

TEST_F(EngineTest, MemoryPlanLowersTheMaxLengthOrRefuses) {
  ASSERT_EQ(target->make_kv_cache(1, EngineConfig{}.kv_cache_dtype).bytes_per_position(), kPositionBytes);
  EngineConfig c = small_config(uint64_t(100) * kPositionBytes, true);  // 100 positions
  c.max_length = 1000;
  Engine engine(*target, nullptr, c, pool);
  EXPECT_TRUE(engine.memory_plan().lowered);
  EXPECT_EQ(engine.max_length(), 96);  // 12 blocks of 8
  EXPECT_THROW(engine.submit(std::vector<int64_t>(96, 5), {}, nullptr), Error);
  c.kv_cache_memory = kPositionBytes * 10;  // 10 positions: nothing useful
  EXPECT_THROW(Engine(*target, nullptr, c, pool), Error);
}

TEST_F(EngineTest, LogprobsAreTheModelsLogSoftmax) {
  std::unique_ptr<DraftHead> head = load_drafter(kData / "eagle/eagle3_midlayer_d2t", *target, pool);
  for (DraftHead* draft : {static_cast<DraftHead*>(nullptr), head.get()}) {
    Engine engine(*target, draft, small_config(1 << 20, true), pool);
    Job job = make_jobs(1, 6, target->n_vocab(), 0.0f)[0];
    job.options.logprobs = 3;
    std::vector<int64_t> tokens;
    std::vector<TokenLogprobs> logprobs;
    engine.submit(job.prompt, job.options, [&](const TokenEvent& e) {
      ASSERT_EQ(e.logprobs.size(), e.tokens.size());
      tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
      logprobs.insert(logprobs.end(), e.logprobs.begin(), e.logprobs.end());
    });
    engine.run_until_idle();
    ASSERT_EQ(int64_t(tokens.size()), job.options.max_tokens);
    for (size_t i = 0; i < tokens.size(); ++i) {
      // Reference: a fresh prefill of the prompt and the tokens before this one.
      std::vector<int64_t> prefix = job.prompt;
      prefix.insert(prefix.end(), tokens.begin(), tokens.begin() + int64_t(i));
      KvCache kv = target->make_kv_cache(int64_t(prefix.size()), EngineConfig{}.kv_cache_dtype);
      const SequenceRows s{0, int64_t(prefix.size()), &kv};
      const int64_t last = int64_t(prefix.size()) - 1;
      const ForwardOutput f = target->forward(StepBatch{prefix, std::span(&s, 1), std::span(&last, 1), {}});
      double mx = f.logits[0], sum = 0;
      for (int64_t t = 0; t < f.n_vocab; ++t) mx = std::max<double>(mx, f.logits[t]);
      for (int64_t t = 0; t < f.n_vocab; ++t) sum += std::exp(f.logits[t] - mx);
      const double expected = f.logits[tokens[i]] - mx - std::log(sum);
      EXPECT_NEAR(logprobs[i].logprob, expected, 1e-3) << "token " << i << " draft " << (draft != nullptr);
      ASSERT_EQ(logprobs[i].top.size(), 3u);
      EXPECT_EQ(logprobs[i].top[0].first, tokens[i]);  // greedy: the chosen token is the most likely
      EXPECT_FLOAT_EQ(logprobs[i].top[0].second, logprobs[i].logprob);
      EXPECT_GE(logprobs[i].top[1].second, logprobs[i].top[2].second);
    }
  }
}

// Request priorities (RequestOptions::priority, lower first): one sequence slot, a long priority-5 request
// running, then two more of priority 5 and one of priority 0. The urgent one preempts the running one and
// finishes first; the others finish in arrival order; each output is what the request gives alone.
TEST_F(EngineTest, PrioritiesOrderAdmissionAndPreemption) {
  EngineConfig c = small_config(1 << 20, true);
  c.max_num_seqs = 1;
  Engine engine(*target, nullptr, c, pool);
  std::vector<Job> jobs = make_jobs(4, 5, target->n_vocab(), 0.0f);
  const int64_t priorities[] = {5, 5, 5, 0};
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].options.priority = priorities[i];
  jobs[0].options.max_tokens = 40;
  std::vector<Outcome> out(jobs.size());
  std::vector<size_t> finished;
  auto submit = [&](size_t i) {
    engine.submit(jobs[i].prompt, jobs[i].options, [&, i](const TokenEvent& e) {
      out[i].tokens.insert(out[i].tokens.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished) finished.push_back(i);
    });
  };
  submit(0);
  for (int s = 0; s < 4; ++s) engine.step();  // job 0 prefilled and decoding
  ASSERT_GT(out[0].tokens.size(), 0u);
  submit(1);
  submit(2);
  submit(3);
  engine.run_until_idle();
  EXPECT_EQ(finished, (std::vector<size_t>{3, 0, 1, 2}));
  EXPECT_EQ(engine.metrics().preemptions, 1);
  EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0);
  for (size_t i = 0; i < jobs.size(); ++i) {
    GenerateOptions g;
    g.max_tokens = jobs[i].options.max_tokens;
    EXPECT_EQ(out[i].tokens, generate(*target, jobs[i].prompt, g).tokens) << "request " << i;
  }
}

TEST(DraftTokensByBatchSize, ParsesRanges) {
  const DraftTokensByBatchSize k = DraftTokensByBatchSize::parse("1-4:3,5-16:2,17-:0");
  EXPECT_EQ(k.k_for(1, 9), 3);
  EXPECT_EQ(k.k_for(5, 9), 2);
  EXPECT_EQ(k.k_for(100, 9), 0);
  EXPECT_EQ(k.k_for(0, 9), 9);
  EXPECT_THROW(DraftTokensByBatchSize::parse("1-4"), Error);
  EXPECT_THROW(DraftTokensByBatchSize::parse("4-1:2"), Error);
}

}  // namespace
}  // namespace aerie
