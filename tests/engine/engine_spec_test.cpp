// Speculation inside the continuous-batching engine, several sequences at once, with a draft head that
// agrees with the target at a chosen rate (oracle_head.h): the output of every request equals what plain
// decoding gives it alone, wherever it ends — at max_tokens, at a stop token that arrives in the middle of
// a run of accepted drafts, or at an end-of-sequence id — and no KV block outlives the requests.
#include <gtest/gtest.h>

#include <filesystem>
#include <cmath>
#include <map>
#include <random>

#include "engine/engine.h"
#include "engine/generator.h"
#include "models/registry.h"
#include "oracle_head.h"
#include "spec/drafter_registry.h"

namespace aerie {
namespace {

const std::filesystem::path kData(AERIE_TEST_DATA_DIR);

struct Job {
  std::vector<int64_t> prompt;
  RequestOptions options;
};

// Prompts that all start with token 1 (the oracle head's x_0), 2..40 tokens long.
std::vector<Job> make_jobs(int n, uint64_t seed, int64_t vocab, int64_t max_tokens) {
  std::mt19937_64 rng(seed);
  std::vector<Job> jobs(static_cast<size_t>(n));
  for (Job& j : jobs) {
    j.prompt = {1};
    const int64_t len = 1 + int64_t(rng() % 40);
    for (int64_t t = 0; t < len; ++t) j.prompt.push_back(3 + int64_t(rng() % uint64_t(vocab - 3)));
    j.options.max_tokens = max_tokens;
    j.options.ignore_eos = true;
  }
  return jobs;
}

struct Outcome {
  std::vector<int64_t> tokens;
  FinishReason reason = FinishReason::kNone;
  std::string error;
};

std::vector<Outcome> run_engine(Engine& engine, const std::vector<Job>& jobs) {
  std::vector<Outcome> out(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i)
    engine.submit(jobs[i].prompt, jobs[i].options, [&out, i](const TokenEvent& e) {
      out[i].tokens.insert(out[i].tokens.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished) {
        out[i].reason = e.finish_reason;
        out[i].error = e.error;
      }
    });
  engine.run_until_idle();
  return out;
}

class EngineSpecTest : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  std::unique_ptr<Model> target = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);
  std::unique_ptr<Model> copy = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);

  EngineConfig config(int64_t k) const {
    EngineConfig c;
    c.kv_cache_memory = uint64_t(1) << 21;
    c.block_size = 8;
    c.max_length = 256;
    c.max_num_seqs = 6;
    c.spec.num_speculative_tokens = k;
    return c;
  }
};

// The regression of a stop token accepted as a draft with more accepted drafts after it: the cache held
// positions of tokens that were never emitted, and the step failed ("fewer tokens than positions written").
TEST_F(EngineSpecTest, StopTokenInsideAcceptedDraftsEndsLikePlain) {
  std::vector<Job> jobs = make_jobs(6, 11, target->n_vocab(), 30);
  std::vector<std::vector<int64_t>> expected;
  for (Job& j : jobs) {
    GenerateOptions g;
    g.max_tokens = 30;
    const std::vector<int64_t> plain = generate(*target, j.prompt, g).tokens;
    j.options.stop_token_ids = {plain[9]};  // ends at the first occurrence of the 10th token
    g.stop_token_ids = j.options.stop_token_ids;
    expected.push_back(generate(*target, j.prompt, g).tokens);
  }
  for (int64_t k : {2, 5}) {
    testing::OracleHead head(*copy, 1, 0.05);
    Engine engine(*target, &head, config(k), pool);
    const std::vector<Outcome> out = run_engine(engine, jobs);
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_EQ(out[i].tokens, expected[i]) << "request " << i << " K=" << k << " " << out[i].error;
      EXPECT_EQ(out[i].reason, FinishReason::kStop) << "request " << i << " K=" << k << " " << out[i].error;
    }
    EXPECT_GT(engine.metrics().spec.accepted_tokens, 0);
    EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0);
  }
}

// The same through the model's end-of-sequence ids (not the request's stop ids).
TEST_F(EngineSpecTest, EndOfSequenceInsideAcceptedDraftsEndsLikePlain) {
  const std::vector<int64_t> eos = target->eos_token_ids();
  ASSERT_FALSE(eos.empty());
  // Prompts whose plain greedy continuation reaches an EOS id.
  std::vector<Job> jobs;
  std::vector<std::vector<int64_t>> expected;
  for (const Job& candidate : make_jobs(400, 12, target->n_vocab(), 48)) {
    GenerateOptions g;
    g.max_tokens = 48;
    g.stop_token_ids = eos;
    const GenerateResult plain = generate(*target, candidate.prompt, g);
    if (plain.finish_reason != "stop" || plain.tokens.size() < 3) continue;
    Job j = candidate;
    j.options.ignore_eos = false;
    jobs.push_back(j);
    expected.push_back(plain.tokens);
    if (jobs.size() == 4) break;
  }
  if (jobs.empty()) GTEST_SKIP() << "no prompt of this checkpoint reaches an EOS id greedily";
  testing::OracleHead head(*copy, 1, 0.05);
  Engine engine(*target, &head, config(4), pool);
  const std::vector<Outcome> out = run_engine(engine, jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(out[i].tokens, expected[i]) << "request " << i << " " << out[i].error;
    EXPECT_EQ(out[i].reason, FinishReason::kStop) << "request " << i;
  }
  EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0);
}

// Counts the passes of the head it wraps.
class CountingHead final : public testing::DelegatingDraftHead {
 public:
  using DelegatingDraftHead::DelegatingDraftHead;
  DraftOutput forward(const DraftBatch& batch) override {
    ++(batch.source == FeatureSource::kTarget ? target_passes : self_passes);
    logit_rows += int64_t(batch.logit_rows.size());
    return inner_.forward(batch);
  }
  std::string describe() const override { return "counting " + inner_.describe(); }
  void reset() { target_passes = self_passes = logit_rows = 0; }
  int64_t target_passes = 0, self_passes = 0, logit_rows = 0;
};

// K by batch size: one decoding sequence drafts 4, two or three draft 2, four or more draft nothing, and
// at K = 0 the head does not run at all (the rows' features wait for its next pass).
TEST_F(EngineSpecTest, DraftTokensFollowTheBatchSize) {
  testing::OracleHead oracle(*copy, 1, 0.0);
  CountingHead head(oracle);
  EngineConfig c = config(4);
  c.k_by_batch_size = DraftTokensByBatchSize::parse("1-1:4,2-3:2,4-:0");
  Engine engine(*target, &head, c, pool);
  std::vector<Job> jobs = make_jobs(4, 13, target->n_vocab(), 16);
  jobs[0].options.max_tokens = 80;  // outlives the others
  int64_t long_done = 0;  // tokens of the long request so far (K shrinks only within 5 of its end)
  engine.submit(jobs[0].prompt, jobs[0].options, [&](const TokenEvent& e) { long_done += int64_t(e.tokens.size()); });
  for (size_t i = 1; i < jobs.size(); ++i) engine.submit(jobs[i].prompt, jobs[i].options, nullptr);
  engine.step();  // every prompt in one batch: prefilled, first tokens, no drafts yet (still prefilling)
  std::map<int64_t, int> seen;  // running sequences -> steps checked
  while (!engine.idle()) {
    const int64_t running = engine.metrics().running;
    head.reset();
    engine.step();
    const EngineMetrics m = engine.metrics();
    const int64_t k_expected = running >= 4 ? 0 : running >= 2 ? 2 : 4;
    if (m.running == running && long_done + 5 < jobs[0].options.max_tokens) {  // nobody finished
      ASSERT_EQ(head.target_passes, k_expected == 0 ? 0 : 1) << running << " running";
      ASSERT_EQ(head.self_passes, k_expected == 0 ? 0 : k_expected - 1) << running << " running";
      ASSERT_EQ(head.logit_rows, running * k_expected) << running << " running";
      ++seen[running];
    }
  }
  EXPECT_GT(seen[4], 3) << "no step with four sequences decoding";
  EXPECT_GT(seen[1], 3) << "no step with one sequence decoding";
  EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0);
}

// After steps at K = 0 the head's cache catches up in one pass over the deferred rows: it then holds what
// a head that never skipped holds (same tokens, same target features), and greedy output is unchanged.
TEST_F(EngineSpecTest, HeadCatchesUpAfterStepsWithoutDrafts) {
  std::unique_ptr<DraftHead> head = load_drafter(kData / "eagle/eagle3_midlayer_d2t", *target, pool);
  std::vector<Job> jobs = make_jobs(3, 14, target->n_vocab(), 12);
  jobs[0].options.max_tokens = 60;
  struct Snapshot {
    std::vector<int64_t> tokens;
    std::vector<std::vector<float>> rows;  // per layer, head positions [0, n) (target-feature rows)
  };
  auto run = [&](const char* k_by_batch_size) {
    EngineConfig c = config(3);
    if (*k_by_batch_size) c.k_by_batch_size = DraftTokensByBatchSize::parse(k_by_batch_size);
    Engine engine(*target, head.get(), c, pool);
    Snapshot snap;
    std::vector<int64_t> tokens;
    uint64_t id = 0;
    id = engine.submit(jobs[0].prompt, jobs[0].options, [&](const TokenEvent& e) {
      tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished || tokens.size() < 40 || !snap.rows.empty()) return;
      const KvCache* cache = engine.draft_cache(id);
      ASSERT_NE(cache, nullptr);
      const int64_t n = int64_t(jobs[0].prompt.size() + tokens.size()) - 1;  // positions from target features
      ASSERT_GE(cache->length(), n);
      for (int64_t layer = 0; layer < cache->n_layer(); ++layer) {
        const int64_t w = cache->row_width();
        std::vector<float> rows(size_t(n * 2 * w));
        for (int64_t p = 0; p < n; ++p) cache->read_row(layer, p, &rows[size_t(2 * p * w)], &rows[size_t((2 * p + 1) * w)]);
        snap.rows.push_back(std::move(rows));
      }
      snap.tokens = tokens;
    });
    for (size_t i = 1; i < jobs.size(); ++i) engine.submit(jobs[i].prompt, jobs[i].options, nullptr);
    engine.run_until_idle();
    EXPECT_EQ(int64_t(tokens.size()), jobs[0].options.max_tokens);
    EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0);
    return snap;
  };
  const Snapshot always = run("");
  const Snapshot skipping = run("1-1:3,2-:0");  // no drafts (and no head pass) while the short ones run
  ASSERT_FALSE(always.rows.empty());
  ASSERT_FALSE(skipping.rows.empty());
  const size_t n_tokens = std::min(always.tokens.size(), skipping.tokens.size());
  ASSERT_TRUE(std::equal(always.tokens.begin(), always.tokens.begin() + int64_t(n_tokens), skipping.tokens.begin()));
  for (size_t layer = 0; layer < always.rows.size(); ++layer) {
    const size_t n = std::min(always.rows[layer].size(), skipping.rows[layer].size());
    ASSERT_GT(n, 0u);
    for (size_t i = 0; i < n; ++i)
      ASSERT_NEAR(always.rows[layer][i], skipping.rows[layer][i], 1e-3f * (1.0f + std::abs(always.rows[layer][i])))
          << "layer " << layer << " float " << i;
  }
}

}  // namespace
}  // namespace aerie
