// The scheduler on its own (no model): token budget and sequence cap, verifications never split, prefix
// hits at admission, preemption of the newest sequence when blocks run out, and update() — the only
// writer of a sequence's progress — appending tokens, cutting rejected positions (blocks back to the
// pool) and registering full blocks; over a partitioned pool (data-parallel attention), where new
// sequences start and whom a sequence short of blocks preempts; and request priorities (lower first):
// admission, step order and preemption follow them, equal priorities stay first come first served.
#include <gtest/gtest.h>

#include <memory>

#include "core/error.h"
#include "kv/kv_cache.h"
#include "sched/scheduler.h"

namespace aerie {
namespace {

constexpr int64_t kBlock = 4;

// What the engine hands Scheduler::update after a step's decision (a Progress over its own storage).
struct StepResult {
  int64_t n_new_positions = 0;
  std::vector<int64_t> tokens;
  void clear() { *this = StepResult(); }
  operator Progress() const { return Progress{tokens, n_new_positions, 0}; }
};

struct Fixture {
  // 8 blocks of 4 positions by default; with partitions > 1, a data-parallel pool of that many ranks.
  explicit Fixture(int32_t n_blocks = 8, bool prefix_caching = true, int32_t partitions = 1)
      : store(1, 2, n_blocks, kBlock, true, KvDType::kBF16), pool(n_blocks, kBlock, prefix_caching, partitions) {}
  KvStore store;
  BlockPool pool;
  std::vector<std::unique_ptr<Sequence>> seqs;

  Sequence* make(std::vector<int64_t> prompt, uint64_t arrival) {
    auto seq = std::make_unique<Sequence>();
    seq->tokens = std::move(prompt);
    seq->n_prompt = int64_t(seq->tokens.size());
    seq->arrival = arrival;
    seq->kv.emplace(store, seq->table, pool);
    seqs.push_back(std::move(seq));
    return seqs.back().get();
  }
  // What a forward does to the cache: positions written.
  static void compute(Sequence& seq, int64_t n) {
    seq.kv->check_room(n);
    seq.kv->advance(n);
  }
  // A step's forward over n rows of seq, then the engine's update with one sampled token.
  static void step(Scheduler& s, Sequence& seq, int64_t n, int64_t token) {
    compute(seq, n);
    StepResult r;
    r.n_new_positions = n;
    r.tokens = {token};
    s.update(seq, r);
  }
};

TEST(Scheduler, BudgetChunksPromptsAndNeverSplitsAVerification) {
  Fixture f;
  SchedulerConfig c;
  c.max_batch_tokens = 6;
  c.max_num_seqs = 4;
  Scheduler s(c, f.pool, nullptr);
  Sequence* a = f.make({1, 2, 3, 4, 5, 6, 7, 8, 9}, 0);
  Sequence* b = f.make({1, 9, 9}, 1);
  s.add(a);
  s.add(b);
  std::vector<Sequence*> preempted;
  std::vector<ScheduledRows> plan = s.plan(preempted);
  ASSERT_EQ(plan.size(), 1u);  // a's first chunk takes the whole budget
  EXPECT_EQ(plan[0].n_rows, 6);
  Fixture::compute(*a, 6);
  StepResult r;
  r.n_new_positions = 6;
  s.update(*a, r);
  EXPECT_EQ(a->n_computed, 6);
  plan = s.plan(preempted);  // a's last 3 prompt rows, then b's 3
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].n_rows, 3);
  EXPECT_EQ(plan[1].n_rows, 3);
  // a finishes its prompt and emits a token; it now verifies 1 + 3 drafts: 4 rows, never split.
  Fixture::compute(*a, 3);
  r.n_new_positions = 3;
  r.tokens = {42};
  s.update(*a, r);
  Fixture::compute(*b, 3);
  r.tokens = {43};
  s.update(*b, r);
  a->drafts = {5, 6, 7};
  b->drafts = {5, 6};
  plan = s.plan(preempted);
  ASSERT_EQ(plan.size(), 1u) << "b's 3 verification rows do not fit the 2 left after a's 4";
  EXPECT_EQ(plan[0].n_rows, 4);
  EXPECT_TRUE(preempted.empty());
}

// A decoding sequence gets its row before an older sequence's prompt chunk, and the chunk is capped while
// sequences decode (without the cap, b's prompt would take the whole budget and a would wait a step).
TEST(Scheduler, DecodesComeFirstAndPromptChunksAreCappedWhileDecoding) {
  Fixture f;
  SchedulerConfig c;
  c.max_batch_tokens = 8;
  c.max_num_seqs = 4;
  c.max_prefill_rows_while_decoding = 3;
  Scheduler s(c, f.pool, nullptr);
  Sequence* b = f.make({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 0);
  Sequence* a = f.make({7, 7}, 1);
  s.add(b);
  s.add(a);
  std::vector<Sequence*> preempted;
  std::vector<ScheduledRows> plan = s.plan(preempted);
  ASSERT_EQ(plan.size(), 1u) << "nobody decodes yet: b's chunk takes the whole budget";
  EXPECT_EQ(plan[0].seq, b);
  EXPECT_EQ(plan[0].n_rows, 8);
  Fixture::compute(*b, 8);
  StepResult r;
  r.n_new_positions = 8;
  s.update(*b, r);
  plan = s.plan(preempted);  // b's last 4 prompt rows and a's 2
  ASSERT_EQ(plan.size(), 2u);
  Fixture::compute(*b, 4);
  r.n_new_positions = 4;
  r.tokens = {42};
  s.update(*b, r);
  Fixture::compute(*a, 2);
  r.n_new_positions = 2;
  r.tokens = {43};
  s.update(*a, r);
  // Both decode now; a third request's prompt shares the step, capped at 3 rows.
  Sequence* d = f.make({5, 5, 5, 5, 5, 5}, 2);
  s.add(d);
  plan = s.plan(preempted);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].seq, b);
  EXPECT_EQ(plan[0].n_rows, 1);
  EXPECT_EQ(plan[1].seq, a);
  EXPECT_EQ(plan[1].n_rows, 1);
  EXPECT_EQ(plan[2].seq, d);
  EXPECT_EQ(plan[2].n_rows, 3);
  EXPECT_TRUE(preempted.empty());
}

// An older sequence still in its prompt does not delay a newer one's decode row.
TEST(Scheduler, AnOlderPromptDoesNotStarveANewerDecode) {
  Fixture f;
  SchedulerConfig c;
  c.max_batch_tokens = 4;
  c.max_num_seqs = 4;
  Scheduler s(c, f.pool, nullptr);
  Sequence* a = f.make({3, 3}, 1);
  s.add(a);
  std::vector<Sequence*> preempted;
  std::vector<ScheduledRows> plan = s.plan(preempted);
  ASSERT_EQ(plan.size(), 1u);
  Fixture::step(s, *a, 2, 9);
  Sequence* b = f.make({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0);  // arrived first (re-admitted after preemption)
  s.add(b);
  plan = s.plan(preempted);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].seq, a);
  EXPECT_EQ(plan[0].n_rows, 1);
  EXPECT_EQ(plan[1].seq, b);
  EXPECT_EQ(plan[1].n_rows, 3);
  Fixture::step(s, *a, 1, 8);
  Fixture::compute(*b, 3);
  StepResult r;
  r.n_new_positions = 3;
  r.tokens = {};
  s.update(*b, r);
  // b runs before a in arrival order and still has 7 prompt rows: a's row comes first all the same.
  plan = s.plan(preempted);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].seq, a);
  EXPECT_EQ(plan[0].n_rows, 1);
  EXPECT_EQ(plan[1].seq, b);
  EXPECT_EQ(plan[1].n_rows, 3);
  EXPECT_TRUE(preempted.empty());
}

TEST(Scheduler, UpdateCutsRejectedPositionsAndRegistersFullBlocks) {
  Fixture f;
  Scheduler s(SchedulerConfig{}, f.pool, nullptr);
  Sequence* a = f.make({1, 2, 3}, 0);
  s.add(a);
  std::vector<Sequence*> preempted;
  s.plan(preempted);
  Fixture::compute(*a, 3);
  StepResult r;
  r.n_new_positions = 3;
  r.tokens = {10};
  s.update(*a, r);
  // A round at p = 3 with 4 drafts: 5 positions written (3..7, two blocks), 1 accepted + the target's token.
  a->drafts = {11, 12, 13, 14};
  s.plan(preempted);
  Fixture::compute(*a, 5);
  EXPECT_EQ(f.pool.n_in_use(), 2);
  r.clear();
  r.tokens = {11, 20};
  r.n_new_positions = 2;  // x_3 and d1 stay; d2..d4 are cut
  s.update(*a, r);
  EXPECT_EQ(a->n_computed, 5);
  EXPECT_EQ(a->kv->length(), 5);
  EXPECT_EQ(a->tokens, (std::vector<int64_t>{1, 2, 3, 10, 11, 20}));
  EXPECT_TRUE(a->drafts.empty());
  EXPECT_EQ(f.pool.n_in_use(), 2);  // position 4 lives in the second block
  EXPECT_EQ(a->table.n_registered, 1);  // [1 2 3 10] is full
  EXPECT_TRUE(f.pool.is_registered(a->table.blocks[0]));
  // More positions than tokens is a bookkeeping bug, refused.
  r.clear();
  r.n_new_positions = 3;
  r.tokens = {21};
  EXPECT_THROW(s.update(*a, r), Error);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOutAndAdmitsFromThePrefixCache) {
  Fixture f;
  Scheduler s(SchedulerConfig{}, f.pool, nullptr);
  Sequence* old = f.make({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, 0);  // 4 blocks
  Sequence* young = f.make({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 30, 31}, 1);     // 4 blocks
  s.add(old);
  s.add(young);
  std::vector<Sequence*> preempted;
  std::vector<ScheduledRows> plan = s.plan(preempted);
  ASSERT_EQ(plan.size(), 2u);
  for (const ScheduledRows& p : plan) {
    Fixture::compute(*p.seq, p.n_rows);
    StepResult r;
    r.n_new_positions = p.n_rows;
    r.tokens = {50};
    s.update(*p.seq, r);
  }
  EXPECT_EQ(f.pool.n_in_use(), 8);
  // old verifies 1 + 2 drafts at 15..17: a fifth block it cannot get without preempting young.
  old->drafts = {60, 61};
  plan = s.plan(preempted);
  ASSERT_EQ(preempted.size(), 1u);
  EXPECT_EQ(preempted[0], young);
  EXPECT_EQ(young->preemptions, 1);
  // young's first three blocks held the same tokens as old's (registered first), so its own copies were
  // freed; it is admitted again at once sharing old's blocks, recomputing only 30 31 50.
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].seq, old);
  EXPECT_EQ(plan[0].n_rows, 3);
  EXPECT_EQ(plan[1].seq, young);
  EXPECT_EQ(young->n_computed, 12);
  EXPECT_EQ(plan[1].n_rows, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(young->table.blocks[size_t(i)], old->table.blocks[size_t(i)]);
    EXPECT_EQ(f.pool.refcount(old->table.blocks[size_t(i)]), 2);
  }
  EXPECT_EQ(f.pool.n_in_use(), 5 + 1);
  s.remove(old);
  s.remove(young);
  EXPECT_EQ(f.pool.n_in_use(), 0);
}

TEST(Scheduler, PartitionedPoolSpreadsSequencesAndKeepsASharedPrefixWhileItIsFair) {
  Fixture f(16, true, /*partitions=*/2);  // blocks 0-7 and 8-15: two ranks
  BlockPool& pool = f.pool;
  Scheduler s(SchedulerConfig{}, pool, nullptr);
  Sequence* a = f.make({1, 2, 3, 4, 5, 6, 7, 8, 9}, 0);  // a shared 8-token "system prompt", then its own
  s.add(a);
  std::vector<Sequence*> preempted;
  std::vector<ScheduledRows> plan = s.plan(preempted);
  ASSERT_EQ(plan.size(), 1u);
  Fixture::step(s, *a, 9, 50);  // registers [1..4] and [5..8]
  ASSERT_EQ(a->table.partition(pool), 0);
  std::vector<Sequence*> later;
  for (int i = 0; i < 4; ++i) {
    later.push_back(f.make({1, 2, 3, 4, 5, 6, 7, 8, 20 + i}, uint64_t(1 + i)));
    s.add(later.back());
  }
  plan = s.plan(preempted);
  ASSERT_EQ(plan.size(), 5u);
  // b joins a's rank (1 against 0 running: within one), c would make it 2 against 0 and starts on the other
  // rank, recomputing the prefix; d finds it there or on rank 0 (2 against 1), e then evens them out.
  std::vector<int32_t> parts;
  for (Sequence* seq : later) parts.push_back(seq->table.partition(pool));
  EXPECT_EQ(parts, (std::vector<int32_t>{0, 1, 0, 1}));
  EXPECT_EQ(later[0]->n_computed, 8);  // took a's two blocks
  EXPECT_EQ(later[0]->table.blocks[0], a->table.blocks[0]);
  EXPECT_EQ(later[1]->n_computed, 0);  // recomputes them on rank 1
  EXPECT_EQ(later[2]->n_computed, 8);
  for (Sequence* seq : later)
    for (int32_t b : seq->table.blocks) EXPECT_EQ(pool.partition_of(b), seq->table.partition(pool));
  for (auto& seq : f.seqs) s.remove(seq.get());
  EXPECT_EQ(pool.n_in_use(), 0);
}

TEST(Scheduler, ASequenceShortOfBlocksPreemptsOnlyInItsOwnPartition) {
  Fixture f(8, false, /*partitions=*/2);  // 4 blocks a partition
  BlockPool& pool = f.pool;
  Scheduler s(SchedulerConfig{}, pool, nullptr);
  Sequence* a = f.make({1, 2, 3, 4, 5, 6, 7, 8}, 0);    // partition 0, 2 blocks
  Sequence* b = f.make({9, 9, 9, 9, 9, 9, 9}, 1);        // partition 1
  Sequence* c = f.make({7, 7, 7, 7, 7, 7, 7, 7}, 2);     // partition 0 again, 2 blocks: 0 is full
  for (Sequence* seq : {a, b, c}) s.add(seq);
  std::vector<Sequence*> preempted;
  std::vector<ScheduledRows> plan = s.plan(preempted);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(a->table.partition(pool), 0);
  EXPECT_EQ(b->table.partition(pool), 1);
  EXPECT_EQ(c->table.partition(pool), 0);
  for (const ScheduledRows& p : plan) Fixture::step(s, *p.seq, p.n_rows, 50);
  // a needs a third block: b, the newest-but-one, lives in partition 1 and frees nothing a can use; c goes.
  plan = s.plan(preempted);
  ASSERT_EQ(preempted.size(), 1u);
  EXPECT_EQ(preempted[0], c);
  EXPECT_EQ(b->preemptions, 0);
  for (auto& seq : f.seqs) s.remove(seq.get());
  EXPECT_EQ(pool.n_in_use(), 0);
}


TEST(Scheduler, PrioritiesOrderAdmissionStepsAndPreemption) {
  // Two slots. Arrivals 0 (priority 5), 1 (priority 0), 2 (priority 5): the urgent late one goes first.
  Fixture f;
  SchedulerConfig config;
  config.max_num_seqs = 2;
  Scheduler s(config, f.pool, nullptr);
  Sequence* a = f.make({1, 2, 3}, 0);
  Sequence* b = f.make({4, 5, 6}, 1);
  Sequence* c = f.make({7, 8, 9}, 2);
  a->priority = 5;
  b->priority = 0;
  c->priority = 5;
  s.add(a);
  s.add(c);
  s.add(b);
  std::vector<Sequence*> preempted;
  std::vector<ScheduledRows> plan = s.plan(preempted);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].seq, b);  // priority 0
  EXPECT_EQ(plan[1].seq, a);  // priority 5, arrived before c
  EXPECT_TRUE(preempted.empty());
  for (const ScheduledRows& p : plan) Fixture::step(s, *p.seq, p.n_rows, 50);
  // c waits (equal to a: no preemption). A more urgent request takes the slot of the last running one (a),
  // not b's.
  plan = s.plan(preempted);
  EXPECT_TRUE(preempted.empty());
  for (const ScheduledRows& p : plan) Fixture::step(s, *p.seq, p.n_rows, 51);
  Sequence* d = f.make({10, 11}, 3);
  d->priority = -1;
  s.add(d);
  plan = s.plan(preempted);
  ASSERT_EQ(preempted.size(), 1u);
  EXPECT_EQ(preempted[0], a);
  EXPECT_EQ(a->preemptions, 1);
  EXPECT_FALSE(a->running);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].seq, b);  // decodes first
  EXPECT_EQ(plan[1].seq, d);  // admitted
  for (const ScheduledRows& p : plan) Fixture::step(s, *p.seq, p.n_rows, 52);
  // b finishes: a (waiting again, and earlier than c) is admitted before c.
  s.remove(b);
  plan = s.plan(preempted);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].seq, d);
  EXPECT_EQ(plan[1].seq, a);
  EXPECT_EQ(preempted.size(), 1u);
  s.remove(a);
  s.remove(c);
  s.remove(d);
  EXPECT_EQ(f.pool.n_in_use(), 0);
}

TEST(Scheduler, AnUrgentRequestShortOfBlocksPreemptsLessUrgentOnesNeverEqualOnes) {
  // 8 blocks of 4: two priority-3 sequences of 15 prompt tokens hold 4 each.
  Fixture f;
  Scheduler s(SchedulerConfig{}, f.pool, nullptr);
  Sequence* low1 = f.make({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, 0);
  Sequence* low2 = f.make({21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35}, 1);
  low1->priority = low2->priority = 3;
  s.add(low1);
  s.add(low2);
  std::vector<Sequence*> preempted;
  std::vector<ScheduledRows> plan = s.plan(preempted);
  ASSERT_EQ(plan.size(), 2u);
  for (const ScheduledRows& p : plan) Fixture::step(s, *p.seq, p.n_rows, 50);
  EXPECT_EQ(f.pool.n_available(), 0);
  // An equal-priority request waits: nobody is preempted for it.
  Sequence* same = f.make({40, 41, 42, 43, 44, 45}, 2);
  same->priority = 3;
  s.add(same);
  plan = s.plan(preempted);
  EXPECT_TRUE(preempted.empty());
  ASSERT_EQ(plan.size(), 2u);
  for (const ScheduledRows& p : plan) EXPECT_NE(p.seq, same);
  for (const ScheduledRows& p : plan) Fixture::step(s, *p.seq, p.n_rows, 51);
  // A more urgent one preempts the newest of the less urgent (low2), runs beside low1, ahead of `same`.
  Sequence* urgent = f.make({60, 61, 62, 63, 64, 65}, 3);
  urgent->priority = 1;
  s.add(urgent);
  plan = s.plan(preempted);
  ASSERT_EQ(preempted.size(), 1u);
  EXPECT_EQ(preempted[0], low2);
  bool admitted = false, low1_ran = false, same_ran = false;
  for (const ScheduledRows& p : plan) {
    admitted = admitted || p.seq == urgent;
    low1_ran = low1_ran || p.seq == low1;
    same_ran = same_ran || p.seq == same;
  }
  EXPECT_TRUE(admitted);
  EXPECT_TRUE(low1_ran);
  EXPECT_FALSE(same_ran);
  for (Sequence* seq : {low1, low2, same, urgent}) s.remove(seq);
  EXPECT_EQ(f.pool.n_in_use(), 0);
}

}  // namespace
}  // namespace aerie
