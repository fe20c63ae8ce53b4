// Deterministic mode (EngineConfig::deterministic, RequestOptions::deterministic): a greedy request gives
// the same ids and the same log-probabilities, bit for bit, alone in an engine; among 15 others whose
// prompts are prefilled in the steps it decodes in (past the GEMM threshold), with a KV budget that preempts
// (its prompt and output recomputed as a prompt); with a draft head whose drafts it verifies; and as the one
// deterministic request of an engine that is not, after a twin of its prompt filled the prefix cache. On
// Llama and DeepSeek (MLA) targets. The last test shows the check has teeth: without the mode, the same
// crowd changes the request's log-probabilities.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "engine/engine.h"
#include "models/registry.h"
#include "oracle_head.h"

namespace aerie {
namespace {

// The shipped trained Llama (hidden 256: dot products long enough for the GEMM's sums to round otherwise)
// and a random DeepSeek-V3 test checkpoint.
const std::filesystem::path kLlama = std::filesystem::path(AERIE_SOURCE_DIR) / "models/aerie-tiny-llama";
const std::filesystem::path kDeepseek = std::filesystem::path(AERIE_TEST_DATA_DIR) / "deepseek/bf16_qlora_yarn";

struct Output {
  std::vector<int64_t> tokens;
  std::vector<float> logprobs;  // of each token (the model's own distribution)
  std::string error;
  bool operator==(const Output& o) const {
    return tokens == o.tokens && logprobs.size() == o.logprobs.size() &&
           std::memcmp(logprobs.data(), o.logprobs.data(), logprobs.size() * sizeof(float)) == 0;
  }
};

// Prompts starting with token 1 (the oracle head's x_0), `length` tokens drawn by `seed`.
std::vector<int64_t> prompt(int64_t length, uint64_t seed, int64_t vocab) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> p{1};
  while (int64_t(p.size()) < length) p.push_back(3 + int64_t(rng() % uint64_t(vocab - 3)));
  return p;
}

RequestOptions greedy(int64_t max_tokens, bool deterministic) {
  RequestOptions o;
  o.max_tokens = max_tokens;
  o.ignore_eos = true;
  o.logprobs = 0;
  o.deterministic = deterministic;
  return o;
}

struct Batch {
  std::vector<Output> outputs;
  int64_t preemptions = 0, accepted = 0;
};

// Submits every (prompt, options) pair in order, runs the engine dry.
Batch run(Engine& engine, const std::vector<std::pair<std::vector<int64_t>, RequestOptions>>& jobs) {
  Batch r;
  r.outputs.resize(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i)
    engine.submit(jobs[i].first, jobs[i].second, [&r, i](const TokenEvent& e) {
      Output& o = r.outputs[i];
      o.tokens.insert(o.tokens.end(), e.tokens.begin(), e.tokens.end());
      for (const TokenLogprobs& l : e.logprobs) o.logprobs.push_back(l.logprob);
      if (e.finished && e.finish_reason == FinishReason::kError) o.error = e.error;
    });
  engine.run_until_idle();
  const EngineMetrics m = engine.metrics();
  r.preemptions = m.preemptions;
  r.accepted = m.spec.accepted_tokens;
  return r;
}

class DeterministicTest : public ::testing::TestWithParam<int> {
 protected:
  ThreadPool pool{2};
  const std::filesystem::path dir = GetParam() == 0 ? kLlama : kDeepseek;
  std::unique_ptr<Model> target = load_model(dir, pool);
  const int64_t vocab = target->n_vocab();
  // The request under test: a 60-token prompt (one prefill chunk past the GEMM threshold), 40 tokens.
  const std::vector<int64_t> subject = prompt(60, 7, vocab);
  static constexpr int64_t kTokens = 40;

  EngineConfig config(bool deterministic, uint64_t kv_bytes) const {
    EngineConfig c;
    c.kv_cache_memory = kv_bytes;
    c.block_size = 8;
    c.max_length = 256;
    c.max_num_seqs = 16;
    c.max_batch_tokens = 256;
    c.spec.num_speculative_tokens = 3;
    c.deterministic = deterministic;
    return c;
  }
  uint64_t positions(int64_t n) const {
    return uint64_t(n) * uint64_t(target->make_kv_cache(1, KvDType::kBF16).bytes_per_position());
  }
  // The subject fifth among n requests (prompts of 33-93 tokens), all submitted at once.
  std::vector<std::pair<std::vector<int64_t>, RequestOptions>> crowd(bool subject_deterministic, int n = 16) const {
    std::vector<std::pair<std::vector<int64_t>, RequestOptions>> jobs;
    for (int i = 0; i < n; ++i) {
      if (i == 4) {
        jobs.emplace_back(subject, greedy(kTokens, subject_deterministic));
      } else {
        jobs.emplace_back(prompt(33 + 4 * i, 100 + uint64_t(i), vocab), greedy(10 + 3 * i, false));
      }
    }
    return jobs;
  }
  Output alone() {
    Engine engine(*target, nullptr, config(true, positions(4096)), pool);
    Batch r = run(engine, {{subject, greedy(kTokens, false)}});
    return r.outputs[0];
  }
};

TEST_P(DeterministicTest, SameBitsAloneInACrowdWithPreemptionAndWithADraft) {
  const Output reference = alone();
  ASSERT_EQ(reference.error, "");
  ASSERT_EQ(int64_t(reference.tokens.size()), kTokens);
  {  // 16 at once with room for ~500 positions: the crowd needs ~1700, so sequences are preempted.
    Engine engine(*target, nullptr, config(true, positions(512)), pool);
    const Batch r = run(engine, crowd(false));
    EXPECT_GT(r.preemptions, 0) << "the KV budget was meant to preempt";
    EXPECT_EQ(r.outputs[4].error, "");
    EXPECT_TRUE(r.outputs[4] == reference) << "in a crowd with preemption";
  }
  {  // The same with a draft head that agrees 70% of the time: K + 1 rows verified per sequence.
    std::unique_ptr<Model> copy = load_model(dir, pool);
    testing::OracleHead head(*copy, 1, 0.3);
    Engine engine(*target, &head, config(true, positions(1024)), pool);
    const Batch r = run(engine, crowd(false, 8));  // the oracle reruns its target per row: fewer
    EXPECT_GT(r.accepted, 0);
    EXPECT_EQ(r.outputs[4].error, "");
    EXPECT_TRUE(r.outputs[4] == reference) << "with a draft head";
  }
}

// One deterministic request in an engine that is not: its steps run the invariant kernels, and it does not
// take the prefix its twin (computed by the GEMM library, when the CPU has one) left in the cache.
TEST_P(DeterministicTest, OneDeterministicRequestInAnEngineThatIsNot) {
  const Output reference = alone();
  Engine engine(*target, nullptr, config(false, positions(4096)), pool);
  const Batch twin = run(engine, {{subject, greedy(2, false)}});
  ASSERT_EQ(twin.outputs[0].error, "");
  const Batch r = run(engine, crowd(true));
  EXPECT_EQ(r.outputs[4].error, "");
  EXPECT_TRUE(r.outputs[4] == reference);
}

// Without the mode the crowd's prefill rows share the subject's decode steps and take the GEMM, so its
// log-probabilities move (on CPUs with the GEMM library path: AVX-512-BF16).
TEST_P(DeterministicTest, WithoutTheModeTheCrowdChangesTheBits) {
  if (!cpu_features().avx512_bf16) GTEST_SKIP() << "no AVX-512-BF16: every row count takes the same kernels";
  const Output reference = alone();
  Engine engine(*target, nullptr, config(false, positions(4096)), pool);
  const Batch r = run(engine, crowd(false));
  EXPECT_FALSE(r.outputs[4] == reference);
}

INSTANTIATE_TEST_SUITE_P(Targets, DeterministicTest, ::testing::Values(0, 1),
                         [](const auto& info) { return std::string(info.index == 0 ? "Llama" : "Deepseek"); });

}  // namespace
}  // namespace aerie
