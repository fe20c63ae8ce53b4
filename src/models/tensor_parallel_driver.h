// Tensor parallelism for the engine (issue 22): rank 0 runs the whole engine (scheduler, sampling,
// verification, the draft head, the HTTP server) against a TensorParallelDriver, and every other rank runs
// run_tensor_parallel_follower(), which repeats each of rank 0's target forwards on its own shards.
//
// Each forward, the driver broadcasts what the followers need to run the same batch over their own KV
// caches before running its own part: the token ids, each sequence's rows, cache length and block ids,
// the logit rows and the captured layers, and the geometry of the KV store (the followers keep a store of
// the same blocks, holding their own kv heads). The forward's all-reduces then keep the ranks in step, and
// every rank's caches receive the same positions in the same blocks, so a rollback (a shorter length in a
// later forward), prefix caching (blocks shared by id) and preemption need no message of their own. Only
// rank 0 samples, so the ranks can never disagree about a token.
//
//   rank 0:  engine.step() -> driver.forward(batch): broadcast header + batch, local forward (all-reduces)
//   rank r:  follower loop: receive header + batch, local forward over its mirror caches (all-reduces)
//
// While rank 0 has no work it calls heartbeat() (at most one message a second), so that a follower
// waiting for the next forward does not take a quiet server for a dead rank; a rank that really dies or
// hangs makes the others' next collective time out (dist/communicator.h). Destroying the driver tells the
// followers to return. Draft trees run too: each forward carries the batch's tree parents, and the slot
// copies rank 0's store made since the last one (KvCache::keep_tree_path moving a verified path into place,
// recorded by KvStore::record_copies), which the followers repeat on their mirrors first.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "kv/kv_cache.h"
#include "models/model.h"

namespace aerie {

class TensorParallelDriver final : public Model {
 public:
  // `local` is rank 0's shard of the target; both outlive the driver. ranks.rank() must be 0.
  TensorParallelDriver(Model& local, dist::Communicator& ranks);
  ~TensorParallelDriver() override;  // tells the followers to stop
  TensorParallelDriver(const TensorParallelDriver&) = delete;
  TensorParallelDriver& operator=(const TensorParallelDriver&) = delete;

  ForwardOutput forward(const StepBatch& batch) override;
  // A no-op message when nothing was sent for a second (call it while idle).
  void heartbeat();

  KvCache make_kv_cache(int64_t capacity, KvDType dtype) const override { return local_.make_kv_cache(capacity, dtype); }
  int64_t n_vocab() const override { return local_.n_vocab(); }
  int64_t n_embd() const override { return local_.n_embd(); }
  int64_t n_layer() const override { return local_.n_layer(); }
  int64_t max_position_embeddings() const override { return local_.max_position_embeddings(); }
  uint64_t decode_weight_bytes() const override { return local_.decode_weight_bytes(); }
  const std::vector<int64_t>& eos_token_ids() const override { return local_.eos_token_ids(); }
  const std::vector<int64_t>& bos_token_ids() const override { return local_.bos_token_ids(); }
  const Tensor& token_embedding() const override { return local_.token_embedding(); }
  const LinearWeight& output_head() const override { return local_.output_head(); }
  std::string describe() const override { return local_.describe(); }
  ModelFamily family() const override { return local_.family(); }
  // The ranks' shards would each need their share of an adapter's factors (not implemented).
  LoraTargets lora_targets() const override {
    LoraTargets none;
    none.refusal =
        "a model split over ranks (--tensor-parallel, --expert-parallel, --data-parallel) takes no LoRA adapters yet";
    return none;
  }
  const std::string& architecture() const override { return local_.architecture(); }
  const Model& local() const override { return local_; }
  int kv_partitions() const override { return local_.kv_partitions(); }
  int kv_partition() const override { return local_.kv_partition(); }

 private:
  void send(std::vector<int64_t>& header, std::vector<int64_t>& payload);

  Model& local_;
  dist::Communicator& ranks_;
  std::vector<int64_t> header_, payload_;  // reused
  // The target store's slot copies since the last forward, (from, to) pairs (KvStore::record_copies): a draft
  // tree's verified path moved into place, which the other ranks' mirrors repeat before the next forward.
  std::vector<int64_t> copies_;
  const KvStore* logged_store_ = nullptr;
  std::chrono::steady_clock::time_point last_sent_;
};

// Rank r > 0: repeats rank 0's forwards on `local` until the driver is destroyed. Returns normally then;
// throws aerie::Error when a collective fails or times out.
void run_tensor_parallel_follower(Model& local, dist::Communicator& ranks);

}  // namespace aerie
