// The thread-safe facade over the single-threaded engine (engine/engine_loop.h), and the engine's steps as
// values (StepStats): requests submitted from several threads at once each produce what they produce
// alone; refusals happen at submit and leave nothing in flight; cancellation ends a request with its last
// event; the metrics the loop snapshots are the steps' stats folded in.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "core/error.h"
#include "engine/engine_loop.h"
#include "engine/generator.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"

namespace aerie {
namespace {

const std::filesystem::path kData(AERIE_TEST_DATA_DIR);
using Clock = std::chrono::steady_clock;

EngineConfig small_config() {
  EngineConfig c;
  c.max_batch_tokens = 64;
  c.max_num_seqs = 4;
  c.block_size = 8;
  c.max_length = 256;
  c.kv_cache_memory = uint64_t(1) << 20;
  return c;
}

// Collects one request's events; wait() blocks until its last one.
struct Collector {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<int64_t> tokens;
  FinishReason reason = FinishReason::kNone;
  std::string error;
  bool done = false;
  int events_after_end = 0;

  EventCallback callback() {
    return [this](const TokenEvent& e) {
      std::lock_guard<std::mutex> lock(mutex);
      if (done) ++events_after_end;
      tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished) {
        reason = e.finish_reason;
        error = e.error;
        done = true;
        cv.notify_all();
      }
    };
  }
  bool wait(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, timeout, [this] { return done; });
  }
};

class EngineLoopTest : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  std::unique_ptr<Model> target = load_model(kData / "llama/bf16_gqa_rope_scaled_tied", pool);

  std::vector<int64_t> prompt(uint64_t seed, int64_t len) const {
    std::mt19937_64 rng(seed);
    std::vector<int64_t> p;
    for (int64_t t = 0; t < len; ++t) p.push_back(3 + int64_t(rng() % uint64_t(target->n_vocab() - 3)));
    return p;
  }
};

TEST_F(EngineLoopTest, RequestsFromManyThreadsEachEqualTheirGreedyRunAlone) {
  constexpr int kThreads = 4, kPerThread = 3;
  std::vector<Collector> results(kThreads * kPerThread);
  std::vector<std::vector<int64_t>> prompts(results.size()), alone(results.size());
  RequestOptions options;
  options.max_tokens = 12;
  options.ignore_eos = true;
  for (size_t i = 0; i < prompts.size(); ++i) {
    prompts[i] = prompt(100 + i, 5 + int64_t(i) * 3);
    GenerateOptions g;
    g.max_tokens = options.max_tokens;
    alone[i] = generate(*target, prompts[i], g).tokens;  // before the loop: the model runs one forward at a time
  }
  std::unique_ptr<DraftHead> head = load_drafter(kData / "eagle/eagle3_midlayer_d2t", *target, pool);
  Engine engine(*target, head.get(), small_config(), pool);
  EngineLoop loop(engine, 64);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int j = 0; j < kPerThread; ++j) {
        const size_t i = size_t(t * kPerThread + j);
        loop.submit({EngineJob{prompts[i], options, results[i].callback()}});
      }
    });
  for (std::thread& th : threads) th.join();
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].wait()) << "request " << i << " never finished";
    EXPECT_EQ(results[i].tokens, alone[i]) << "request " << i;
    EXPECT_EQ(results[i].reason, FinishReason::kLength);
    EXPECT_EQ(results[i].events_after_end, 0);
  }
  EXPECT_TRUE(loop.wait_until_empty(Clock::now() + std::chrono::seconds(60)));
  EXPECT_EQ(loop.in_flight(), 0);
  // The snapshot follows the step that finished the last request.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (loop.metrics().requests_finished < int64_t(results.size()) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const EngineMetrics m = loop.metrics();
  EXPECT_EQ(m.requests_finished, int64_t(results.size()));
  EXPECT_EQ(m.generated_tokens, int64_t(results.size()) * options.max_tokens);
  EXPECT_GT(m.spec.draft_tokens, 0);
}

TEST_F(EngineLoopTest, RefusalsHappenAtSubmitAndLeaveNothingInFlight) {
  Engine engine(*target, nullptr, small_config(), pool);
  EngineLoop loop(engine, 2);
  Collector never;
  RequestOptions options;
  // The engine's own checks, from the submitting thread: all or none of a set.
  EXPECT_THROW(loop.submit({EngineJob{{}, options, never.callback()}}), Error);
  EXPECT_THROW(loop.submit({EngineJob{prompt(1, 4), options, never.callback()},
                            EngineJob{{target->n_vocab()}, options, never.callback()}}),
               Error);
  EXPECT_EQ(loop.in_flight(), 0);
  // Beyond max_in_flight: 429, nothing queued.
  try {
    loop.submit({EngineJob{prompt(2, 4), options, never.callback()}, EngineJob{prompt(3, 4), options, never.callback()},
                 EngineJob{prompt(4, 4), options, never.callback()}});
    FAIL() << "three requests fit a bound of two";
  } catch (const Overloaded& e) {
    EXPECT_EQ(e.status(), 429);
  }
  EXPECT_EQ(loop.in_flight(), 0);
  loop.stop_admission();
  try {
    loop.submit({EngineJob{prompt(5, 4), options, never.callback()}});
    FAIL() << "a draining loop took a request";
  } catch (const Overloaded& e) {
    EXPECT_EQ(e.status(), 503);
  }
  EXPECT_FALSE(never.done);
}

TEST_F(EngineLoopTest, CancelEndsARequestWithItsLastEvent) {
  Engine engine(*target, nullptr, small_config(), pool);
  EngineLoop loop(engine, 8);
  // The loop thread waits in the first event's callback until both cancellations are queued, so neither
  // request can run to its length first, however the threads are scheduled.
  std::mutex gate_mutex;
  std::condition_variable gate_cv;
  bool gate_open = false;
  Collector first, second;
  auto gated = [&](Collector& c) -> EventCallback {
    return [&, inner = c.callback()](const TokenEvent& e) {
      std::unique_lock<std::mutex> lock(gate_mutex);
      gate_cv.wait(lock, [&] { return gate_open; });
      lock.unlock();
      inner(e);
    };
  };
  RequestOptions options;
  options.max_tokens = 200;
  options.ignore_eos = true;
  const std::vector<uint64_t> ids =
      loop.submit({EngineJob{prompt(7, 6), options, gated(first)}, EngineJob{prompt(8, 6), options, gated(second)}});
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_NE(ids[0], ids[1]);
  loop.cancel(ids[0]);
  loop.cancel_all();
  {
    std::lock_guard<std::mutex> lock(gate_mutex);
    gate_open = true;
  }
  gate_cv.notify_all();
  ASSERT_TRUE(first.wait());
  ASSERT_TRUE(second.wait());
  EXPECT_EQ(first.reason, FinishReason::kCancelled);
  EXPECT_EQ(second.reason, FinishReason::kCancelled);
  EXPECT_LT(first.tokens.size(), 200u);
  EXPECT_TRUE(loop.wait_until_empty(Clock::now() + std::chrono::seconds(60)));
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while ((loop.metrics().requests_cancelled < 2 || loop.metrics().kv_blocks_in_use > 0) && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(loop.metrics().requests_cancelled, 2);
  EXPECT_EQ(loop.metrics().kv_blocks_in_use, 0);
}

TEST_F(EngineLoopTest, EachStepReturnsWhatItDidAndTheMetricsAreTheirSum) {
  Engine engine(*target, nullptr, small_config(), pool);
  RequestOptions options;
  options.max_tokens = 9;
  options.ignore_eos = true;
  int64_t n_prompt = 0;
  for (uint64_t s = 0; s < 3; ++s) {
    const std::vector<int64_t> p = prompt(20 + s, 10 + int64_t(s) * 30);
    n_prompt += int64_t(p.size());
    engine.submit(p, options, nullptr);
  }
  int64_t generated = 0, prefilled = 0, submitted = 0, finished = 0, steps = 0;
  while (true) {
    const StepStats& stats = engine.step();
    if (!stats.worked && engine.idle()) break;
    generated += stats.generated_tokens;
    prefilled += stats.prefilled_tokens;
    submitted += stats.submitted;
    finished += int64_t(stats.finished.size());
    steps += stats.ran ? 1 : 0;
    EXPECT_EQ(stats.running, engine.metrics().running);
  }
  EXPECT_EQ(submitted, 3);
  EXPECT_EQ(finished, 3);
  EXPECT_EQ(generated, 27);
  EXPECT_EQ(prefilled, n_prompt);
  const EngineMetrics& m = engine.metrics();
  EXPECT_EQ(m.generated_tokens, generated);
  EXPECT_EQ(m.prefilled_tokens, prefilled);
  EXPECT_EQ(m.steps, steps);
  EXPECT_EQ(m.requests_finished, 3);
  EXPECT_EQ(m.e2e_request_latency.count(), 3);
  EXPECT_EQ(m.time_to_first_token.count(), 3);
  EXPECT_EQ(m.inter_token_latency.count(), 3 * 8);
}

}  // namespace
}  // namespace aerie
