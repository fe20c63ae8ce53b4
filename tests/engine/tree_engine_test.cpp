// EAGLE-2 draft trees on the engine path (spec/head_proposer.h, spec/draft_tree.h, spec/tree_verify.h):
// greedy tree output equals plain output token for token, batched, paged and under preemption, with the
// shipped trained heads (which accept: long paths are exercised) and a random head with a reduced
// vocabulary, and on DeepSeek-V3 with its MLA head, its MTP layer and an MHA head; top_k 1 is exactly the
// chain (same tokens, same acceptance); requests a tree cannot verify
// (penalties, structured output) draft chains in the same batch; drafters without tree rows refuse.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/engine.h"
#include "models/registry.h"
#include "ops/ops.h"
#include "spec/drafter_registry.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
const fs::path kData(AERIE_TEST_DATA_DIR);
const fs::path kModels = fs::path(AERIE_SOURCE_DIR) / "models";

// The sanitizer build runs fewer prompts, tokens and shapes (it is ~10x slower).
#ifdef __SANITIZE_ADDRESS__
constexpr int64_t kMaxTokens = 24;
constexpr size_t kPrompts = 3;
const std::vector<DraftTreeShape> kShapes = {{4, 5, 12}};
#else
constexpr int64_t kMaxTokens = 48;
constexpr size_t kPrompts = 8;
// 2:8:3 is deeper than its nodes (the learned shape ends it early: no head pass once nothing deeper can be
// kept); the last is EAGLE-2's confidence shape.
const std::vector<DraftTreeShape> kShapes = {{2, 4, 6}, {4, 5, 12}, {3, 2, 4}, {2, 8, 3},
                                             {2, 4, 6, TreeScore::kConfidence}};
#endif

struct Job {
  std::vector<int64_t> prompt;
  RequestOptions options;
};

struct Outcome {
  std::vector<int64_t> tokens;
  FinishReason reason = FinishReason::kNone;
  std::string error;
  SpecStats spec;
};

// Held-out prompts of a shipped target (its goldens: model_golden for Llama, deepseek_golden).
std::vector<Job> golden_jobs(const char* golden = "model_golden") {
  std::ifstream in(kData / "trained" / golden / "golden.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<Job> jobs;
  for (const auto& c : j.at("cases")) {
    Job job;
    job.prompt = c.at("ids").get<std::vector<int64_t>>();
    job.options.max_tokens = kMaxTokens;
    job.options.ignore_eos = true;
    jobs.push_back(job);
    if (jobs.size() == kPrompts) break;
  }
  return jobs;
}

EngineConfig engine_config(int64_t max_num_seqs, uint64_t kv_bytes, const DraftTreeShape& tree, int64_t k = 3) {
  EngineConfig c;
  c.kv_cache_memory = kv_bytes;
  c.block_size = 8;
  c.max_length = 256;
  c.max_num_seqs = max_num_seqs;
  c.spec.num_speculative_tokens = k;
  c.spec.tree = tree;
  return c;
}

std::vector<Outcome> run_engine(Model& target, Drafter* draft, const EngineConfig& config, ThreadPool& pool,
                                const std::vector<Job>& jobs, EngineMetrics* metrics = nullptr) {
  Engine engine(target, draft, config, pool);
  std::vector<Outcome> out(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i)
    engine.submit(jobs[i].prompt, jobs[i].options, [&out, i](const TokenEvent& e) {
      out[i].tokens.insert(out[i].tokens.end(), e.tokens.begin(), e.tokens.end());
      if (!e.finished) return;
      out[i].reason = e.finish_reason;
      out[i].error = e.error;
      out[i].spec = *e.spec;
    });
  engine.run_until_idle();
  EXPECT_EQ(engine.metrics().kv_blocks_in_use, 0);
  if (metrics) *metrics = engine.metrics();
  return out;
}

// In the default (rounded) BF16 activation mode that users run: ops::tree_attention gives each tree row
// exactly the bits of the chain of its path, so while a step's rows stay below ops::kGemmMinRows (where
// every matmul is batch invariant) the tree's rows are plain decoding's bit for bit. A step of more rows
// goes through the oneDNN GEMM, equal to plain decoding's kernels to float32 rounding only, which with
// activations rounded to one bf16 can flip a near tie (4 sequences of 1 + 12 tree rows: one token of 48);
// those steps run with split activations (float32-exact to ~1e-5), as ops::kGemmMinRows documents.
class TreeEngine : public ::testing::Test {
 public:
  void SetUp() override { saved_ = ops::bf16_activations(); }
  void TearDown() override { ops::set_bf16_activations(saved_); }
  // Split activations where a step of `rows` rows would reach the GEMM, else the default.
  void activations_for(int64_t rows) {
    ops::set_bf16_activations(rows >= ops::kGemmMinRows ? ops::Bf16Activations::kSplit : saved_);
  }
  ThreadPool pool{2};
  ops::Bf16Activations saved_ = ops::Bf16Activations::kRounded;
};

// Greedy trees with the shipped heads: the output is plain greedy output, batched (1 and 4 sequences at a
// time), for several shapes; the trees accept more than one token per round.
TEST_F(TreeEngine, ShippedHeadsGreedyTreeOutputEqualsPlain) {
  const std::unique_ptr<Model> target = load_model(kModels / "aerie-tiny-llama", pool);
  const std::vector<Job> jobs = golden_jobs();
  for (const char* head_dir : {"aerie-tiny-llama-eagle1", "aerie-tiny-llama-eagle3"}) {
    const std::unique_ptr<DraftHead> head = load_drafter(kModels / head_dir, *target, pool);
    for (const DraftTreeShape& shape : kShapes) {
      for (int64_t seqs : {1, 4}) {
        activations_for(seqs * (1 + shape.total_tokens));
        const std::vector<Outcome> plain = run_engine(*target, nullptr, engine_config(8, 8 << 20, {}), pool, jobs);
        EngineMetrics m;
        const std::vector<Outcome> out =
            run_engine(*target, head.get(), engine_config(seqs, 8 << 20, shape), pool, jobs, &m);
        for (size_t i = 0; i < jobs.size(); ++i)
          EXPECT_EQ(out[i].tokens, plain[i].tokens) << head_dir << " top_k " << shape.top_k << " depth " << shape.depth
                                                    << " tokens " << shape.total_tokens << " seqs " << seqs << " request "
                                                    << i << " " << out[i].error;
        std::printf("%s tree %lld:%lld:%lld, %lld at a time: mean acceptance length %.3f\n", head_dir,
                    (long long)shape.top_k, (long long)shape.depth, (long long)shape.total_tokens, (long long)seqs,
                    m.spec.mean_acceptance_length());
        EXPECT_GT(m.spec.mean_acceptance_length(), 2.1) << head_dir << " top_k " << shape.top_k;
        EXPECT_LE(m.spec.accepted_tokens, m.spec.rounds * shape.depth);
      }
    }
  }
}

// Every shape of kShapes, one and three sequences at a time, on the shipped DeepSeek-V3's golden prompts:
// greedy output equals plain, and the drafter's trees are accepted (the label names it in the log).
void expect_deepseek_trees_equal_plain(TreeEngine& t, Model& target, DraftHead& drafter, const char* label) {
  const std::vector<Job> jobs = golden_jobs("deepseek_golden");
  for (const DraftTreeShape& shape : kShapes) {
    for (int64_t seqs : {1, 3}) {
      t.activations_for(seqs * (1 + shape.total_tokens));
      const std::vector<Outcome> plain = run_engine(target, nullptr, engine_config(8, 8 << 20, {}), t.pool, jobs);
      EngineMetrics m;
      const std::vector<Outcome> out = run_engine(target, &drafter, engine_config(seqs, 8 << 20, shape), t.pool, jobs, &m);
      for (size_t i = 0; i < jobs.size(); ++i)
        EXPECT_EQ(out[i].tokens, plain[i].tokens) << label << " top_k " << shape.top_k << " depth " << shape.depth
                                                  << " tokens " << shape.total_tokens << " seqs " << seqs << " request "
                                                  << i << " " << out[i].error;
      std::printf("%s tree %lld:%lld:%lld, %lld at a time: mean acceptance length %.3f\n", label,
                  (long long)shape.top_k, (long long)shape.depth, (long long)shape.total_tokens, (long long)seqs,
                  m.spec.mean_acceptance_length());
      EXPECT_GT(m.spec.mean_acceptance_length(), 1.5) << label << " top_k " << shape.top_k;
      EXPECT_LE(m.spec.accepted_tokens, m.spec.rounds * shape.depth);
    }
  }
}

// DeepSeek-V3 (FP8, MoE, the MLA latent cache) with its shipped EAGLE-3 MLA head: tree rows run in MLA's
// absorbed form, in the target's verification and in the head's levels; greedy output equals plain.
TEST_F(TreeEngine, DeepseekMlaHeadGreedyTreeOutputEqualsPlain) {
  const std::unique_ptr<Model> target = load_model(kModels / "aerie-tiny-deepseek", pool);
  const std::unique_ptr<DraftHead> head = load_drafter(kModels / "aerie-tiny-deepseek-eagle3", *target, pool);
  expect_deepseek_trees_equal_plain(*this, *target, *head, "deepseek eagle3");
}

// DeepSeek-V3's own MTP layer (--draft mtp) drafting trees: its levels run as tree rows of its one-layer
// latent cache (MLA's absorbed form, the layer's MoE row by row) on top of the earlier levels' rows, and the
// target verifies them as above; greedy output equals plain, one and three sequences at a time.
TEST_F(TreeEngine, DeepseekMtpGreedyTreeOutputEqualsPlain) {
  const std::unique_ptr<Model> target = load_model(kModels / "aerie-tiny-deepseek", pool);
  const std::unique_ptr<DraftHead> mtp = load_drafter(kMtpDraftName, *target, pool);
  ASSERT_TRUE(mtp->takes_tree_rows());
  expect_deepseek_trees_equal_plain(*this, *target, *mtp, "deepseek mtp");
}

// An EAGLE-3 head with MHA attention (its own KV cache, a reduced vocabulary) on a random DeepSeek-V3: the
// target verifies tree rows in MLA's absorbed form while the head runs its levels as MHA tree rows; greedy
// output equals plain, batched.
TEST_F(TreeEngine, DeepseekMhaHeadGreedyTreeOutputEqualsPlain) {
  const std::unique_ptr<Model> target = load_model(kData / "deepseek_tiny_vocab", pool);
  const std::unique_ptr<DraftHead> head = load_drafter(kData / "deepseek_tiny_vocab_mha_head", *target, pool);
  ASSERT_TRUE(head->reduced_vocab());
  Rng rng(5);
  std::vector<Job> jobs(5);
  for (Job& j : jobs) {
    const int64_t len = 3 + int64_t(rng.next_u64() % 20);
    for (int64_t t = 0; t < len; ++t) j.prompt.push_back(2 + int64_t(rng.next_u64() % uint64_t(target->n_vocab() - 2)));
    j.options.max_tokens = kMaxTokens;
    j.options.ignore_eos = true;
  }
  for (const DraftTreeShape& shape : kShapes) {
    activations_for(3 * (1 + shape.total_tokens));
    const std::vector<Outcome> plain = run_engine(*target, nullptr, engine_config(8, 8 << 20, {}), pool, jobs);
    EngineMetrics m;
    const std::vector<Outcome> out = run_engine(*target, head.get(), engine_config(3, 8 << 20, shape), pool, jobs, &m);
    for (size_t i = 0; i < jobs.size(); ++i)
      EXPECT_EQ(out[i].tokens, plain[i].tokens) << "top_k " << shape.top_k << " depth " << shape.depth << " request "
                                                << i << " " << out[i].error;
    EXPECT_GT(m.spec.rounds, 0) << "top_k " << shape.top_k;
    EXPECT_GT(m.spec.accepted_tokens, 0) << "top_k " << shape.top_k;
  }
}

// top_k 1 grows the head's argmax chain: the same drafts, tokens and acceptance as a chain of K = depth
// (an EAGLE-3 head on Llama, and DeepSeek-V3's MTP layer, whose chain and tree rows both take MLA's absorbed
// form).
void expect_top_one_is_the_chain(Model& target, DraftHead& head, const std::vector<Job>& jobs, ThreadPool& pool) {
  for (int64_t k : {1, 4}) {
    const std::vector<Outcome> chain = run_engine(target, &head, engine_config(4, 8 << 20, {}, k), pool, jobs);
    const std::vector<Outcome> tree = run_engine(target, &head, engine_config(4, 8 << 20, {1, k, k}), pool, jobs);
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_EQ(tree[i].tokens, chain[i].tokens) << "K " << k << " request " << i;
      EXPECT_EQ(tree[i].spec.rounds, chain[i].spec.rounds) << "K " << k << " request " << i;
      EXPECT_EQ(tree[i].spec.draft_tokens, chain[i].spec.draft_tokens) << "K " << k << " request " << i;
      EXPECT_EQ(tree[i].spec.accepted_tokens, chain[i].spec.accepted_tokens) << "K " << k << " request " << i;
    }
  }
}

TEST_F(TreeEngine, TopOneIsTheChain) {
  const std::unique_ptr<Model> target = load_model(kModels / "aerie-tiny-llama", pool);
  const std::unique_ptr<DraftHead> head = load_drafter(kModels / "aerie-tiny-llama-eagle3", *target, pool);
  expect_top_one_is_the_chain(*target, *head, golden_jobs(), pool);
}

TEST_F(TreeEngine, DeepseekMtpTopOneIsTheChain) {
  const std::unique_ptr<Model> target = load_model(kModels / "aerie-tiny-deepseek", pool);
  const std::unique_ptr<DraftHead> mtp = load_drafter(kMtpDraftName, *target, pool);
  expect_top_one_is_the_chain(*target, *mtp, golden_jobs("deepseek_golden"), pool);
}

// A random EAGLE-3 head with a reduced vocabulary (d2t) on a random Llama: greedy equals plain with more
// requests than fit the cache at once (preemption), prefix caching on (shared prompt openings).
TEST_F(TreeEngine, RandomHeadEqualsPlainUnderPreemption) {
  const std::unique_ptr<Model> target = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);
  const std::unique_ptr<DraftHead> head = load_drafter(kData / "eagle/eagle3_midlayer_d2t", *target, pool);
  Rng rng(21);
  std::vector<Job> jobs(6);
  for (Job& j : jobs) {
    j.prompt = {1, 5, 9};
    const int64_t len = 2 + int64_t(rng.next_u64() % 30);
    for (int64_t t = 0; t < len; ++t) j.prompt.push_back(3 + int64_t(rng.next_u64() % uint64_t(target->n_vocab() - 3)));
    j.options.max_tokens = 20 + int64_t(rng.next_u64() % 20);
    j.options.ignore_eos = true;
  }
  for (const DraftTreeShape shape : {DraftTreeShape{3, 4, 8}, DraftTreeShape{2, 3, 5}}) {
    activations_for(6 * (1 + shape.total_tokens));
    const std::vector<Outcome> plain = run_engine(*target, nullptr, engine_config(6, 4 << 20, {}), pool, jobs);
    EngineMetrics m;
    // Room for 24 blocks of 8 positions (target and head): 6 sequences of up to ~80 are preempted.
    EngineConfig c = engine_config(6, 0, shape);
    c.max_length = 128;
    c.kv_cache_memory = 24 * uint64_t(c.block_size) * (target->make_kv_cache(1, c.kv_cache_dtype).bytes_per_position() +
                                                      head->make_kv_cache(1, c.kv_cache_dtype).bytes_per_position());
    const std::vector<Outcome> out = run_engine(*target, head.get(), c, pool, jobs, &m);
    for (size_t i = 0; i < jobs.size(); ++i)
      EXPECT_EQ(out[i].tokens, plain[i].tokens) << "top_k " << shape.top_k << " request " << i << " " << out[i].error;
    EXPECT_GT(m.preemptions, 0) << "top_k " << shape.top_k;
    EXPECT_GT(m.spec.rounds, 0);
  }
}

// Allows only odd token ids, for `length` tokens.
class OddIds final : public TokenConstraint {
 public:
  explicit OddIds(int64_t n_vocab) : n_vocab_(n_vocab) {}
  void allowed_tokens(std::vector<uint8_t>& allowed) const override {
    allowed.assign(size_t(n_vocab_), 0);
    for (int64_t t = 1; t < n_vocab_; t += 2) allowed[size_t(t)] = !finished();
  }
  bool accept(int64_t token) override { return token % 2 == 1 && !finished() && ++count_ > 0; }
  bool finished() const override { return count_ >= 16; }
  std::unique_ptr<TokenConstraint> clone() const override { return std::make_unique<OddIds>(*this); }

 private:
  int64_t n_vocab_, count_ = 0;
};

// In one batch with tree requests: a penalised and a structured greedy request (chains, equal to plain),
// and a sampled one (a tree, verified by rejection over siblings: it completes; its distribution is
// tests/engine/tree_lossless_test.cpp's).
TEST_F(TreeEngine, RequestsATreeCannotVerifyDraftChainsBesideTrees) {
  const std::unique_ptr<Model> target = load_model(kModels / "aerie-tiny-llama", pool);
  const std::unique_ptr<DraftHead> head = load_drafter(kModels / "aerie-tiny-llama-eagle1", *target, pool);
  std::vector<Job> jobs = golden_jobs();
  while (jobs.size() < 5) jobs.push_back(jobs[jobs.size() - 3]);  // the sanitizer build's 3 prompts, repeated
  jobs.resize(5);
  jobs[1].options.penalties.frequency = 0.5f;
  jobs[2].options.constraint = std::make_shared<OddIds>(target->n_vocab());
  jobs[3].options.sampling.temperature = 0.8f;
  jobs[3].options.sampling.seed = 3;
  activations_for(5 * (1 + 8));
  const std::vector<Outcome> plain = run_engine(*target, nullptr, engine_config(5, 8 << 20, {}), pool, jobs);
  const std::vector<Outcome> out = run_engine(*target, head.get(), engine_config(5, 8 << 20, {3, 4, 8}), pool, jobs);
  for (size_t i : {0, 1, 2, 4}) EXPECT_EQ(out[i].tokens, plain[i].tokens) << "request " << i << " " << out[i].error;
  EXPECT_EQ(out[2].reason, FinishReason::kStop);
  EXPECT_EQ(int64_t(out[3].tokens.size()), kMaxTokens) << out[3].error;
  // The chains carry at most K = 3 drafts a round (fewer near max_tokens); the trees (greedy and sampled:
  // spec/tree_verify.h) more.
  for (size_t i : {1, 2}) EXPECT_LE(out[i].spec.draft_tokens, 3 * out[i].spec.rounds) << "request " << i;
  for (size_t i : {0, 3}) EXPECT_GT(out[i].spec.draft_tokens, 3 * out[i].spec.rounds) << "request " << i;
}

TEST_F(TreeEngine, DraftersWithoutTreeRowsAndBadShapesRefuse) {
  const std::unique_ptr<Model> target = load_model(kModels / "aerie-tiny-llama", pool);
  const std::unique_ptr<Drafter> ngram = load_any_drafter(kNgramDraftName, *target, pool);
  try {
    Engine engine(*target, ngram.get(), engine_config(2, 8 << 20, {2, 3, 4}), pool);
    FAIL() << "an n-gram drafter took a tree";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("drafts chains only"), std::string::npos) << e.what();
  }
  const std::unique_ptr<DraftHead> head = load_drafter(kModels / "aerie-tiny-llama-eagle3", *target, pool);
  EXPECT_THROW(Engine(*target, head.get(), engine_config(2, 8 << 20, {2, 0, 4}), pool), Error);
}

}  // namespace
}  // namespace aerie
