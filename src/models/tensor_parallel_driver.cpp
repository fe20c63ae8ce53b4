#include "models/tensor_parallel_driver.h"

#include <cstdio>
#include <span>

#include "core/error.h"
#include "kv/block_pool.h"
#include "kv/kv_cache.h"

namespace aerie {
namespace {

// The header every message starts with (int64 each); the payload's size follows from it.
enum Field : size_t {
  kOp, kTokens, kSequences, kLogitRows, kCaptures, kBlockIds,
  kLayers, kRowWidth, kStoreBlocks, kBlockSize, kWithValues, kDType, kScaleWidth,
  kHeaderFields
};
enum Op : int64_t { kStop = 0, kForward = 1, kHeartbeat = 2 };
constexpr int64_t kPerSequence = 4;  // row_begin, n_rows, cache length, number of block ids

std::span<std::byte> bytes_of(std::vector<int64_t>& v) {
  return std::as_writable_bytes(std::span<int64_t>(v));
}

}  // namespace

TensorParallelDriver::TensorParallelDriver(Model& local, dist::Communicator& ranks)
    : local_(local), ranks_(ranks), header_(kHeaderFields, 0), last_sent_(std::chrono::steady_clock::now()) {
  AERIE_CHECK(ranks.rank() == 0, "TensorParallelDriver runs on rank 0, not rank ", ranks.rank());
}

TensorParallelDriver::~TensorParallelDriver() {
  try {
    std::fill(header_.begin(), header_.end(), 0);
    header_[kOp] = kStop;
    payload_.clear();
    send(header_, payload_);
  } catch (const std::exception& e) {  // a follower already gone: its job ends anyway
    std::fprintf(stderr, "aerie: telling the tensor-parallel ranks to stop failed: %s\n", e.what());
  }
}

void TensorParallelDriver::send(std::vector<int64_t>& header, std::vector<int64_t>& payload) {
  ranks_.broadcast(bytes_of(header), 0);
  if (!payload.empty()) ranks_.broadcast(bytes_of(payload), 0);
  last_sent_ = std::chrono::steady_clock::now();
}

void TensorParallelDriver::heartbeat() {
  if (std::chrono::steady_clock::now() - last_sent_ < std::chrono::seconds(1)) return;
  std::fill(header_.begin(), header_.end(), 0);
  header_[kOp] = kHeartbeat;
  payload_.clear();
  send(header_, payload_);
}

ForwardOutput TensorParallelDriver::forward(const StepBatch& batch) {
  AERIE_CHECK(!batch.sequences.empty(), "tensor parallel forward: a batch without sequences");
  const KvStore& store = batch.sequences.front().kv->store();
  payload_.assign(batch.token_ids.begin(), batch.token_ids.end());
  int64_t n_block_ids = 0;
  for (const SequenceRows& s : batch.sequences) {
    AERIE_CHECK(&s.kv->store() == &store, "tensor parallel forward: one batch's caches must share one KV store");
    AERIE_CHECK(s.tree_parent == nullptr, "draft trees do not run under tensor parallelism yet: leave "
                "--spec-tree-top-k out");
    const std::span<const int32_t> blocks = s.kv->block_ids();
    payload_.insert(payload_.end(), {s.row_begin, s.n_rows, s.kv->length(), int64_t(blocks.size())});
    n_block_ids += int64_t(blocks.size());
  }
  for (const SequenceRows& s : batch.sequences) {
    const std::span<const int32_t> blocks = s.kv->block_ids();
    payload_.insert(payload_.end(), blocks.begin(), blocks.end());
  }
  payload_.insert(payload_.end(), batch.logit_rows.begin(), batch.logit_rows.end());
  payload_.insert(payload_.end(), batch.capture_layers.begin(), batch.capture_layers.end());
  header_ = {kForward,
             int64_t(batch.token_ids.size()),
             int64_t(batch.sequences.size()),
             int64_t(batch.logit_rows.size()),
             int64_t(batch.capture_layers.size()),
             n_block_ids,
             store.n_layer(),
             store.row_width(),
             store.n_blocks(),
             store.block_size(),
             store.has_values() ? 1 : 0,
             int64_t(store.dtype()),
             store.scale_width()};
  send(header_, payload_);
  return local_.forward(batch);
}

void run_tensor_parallel_follower(Model& local, dist::Communicator& ranks) {
  AERIE_CHECK(ranks.rank() != 0, "rank 0 drives the tensor-parallel forwards; it does not follow");
  std::vector<int64_t> header(kHeaderFields), payload;
  // The mirror of rank 0's target store (same blocks, this rank's kv heads) and per-step views of it.
  std::unique_ptr<KvStore> store;
  std::unique_ptr<BlockPool> pool;  // KvCache's paged form needs one; the follower never allocates from it
  std::vector<int64_t> geometry;
  std::vector<BlockTable> tables;
  std::vector<KvCache> caches;
  std::vector<SequenceRows> sequences;
  std::vector<int> captures;
  const KvCache probe = local.make_kv_cache(1, KvDType::kF32);  // this rank's row width
  for (;;) {
    ranks.broadcast(bytes_of(header), 0);
    if (header[kOp] == kStop) return;
    if (header[kOp] == kHeartbeat) continue;
    AERIE_CHECK(header[kOp] == kForward, "tensor parallel follower: unknown message ", header[kOp]);
    const int64_t n_tokens = header[kTokens], n_seqs = header[kSequences], n_logits = header[kLogitRows],
                  n_captures = header[kCaptures], n_block_ids = header[kBlockIds];
    payload.resize(size_t(n_tokens + kPerSequence * n_seqs + n_block_ids + n_logits + n_captures));
    ranks.broadcast(bytes_of(payload), 0);
    const std::vector<int64_t> wanted(header.begin() + kLayers, header.end());
    if (!store || wanted != geometry) {
      AERIE_CHECK(wanted[kRowWidth - kLayers] == probe.row_width() && wanted[0] == probe.n_layer(),
                  "tensor parallel follower: rank 0's KV rows are ", wanted[kRowWidth - kLayers], " wide over ",
                  wanted[0], " layers, this rank's ", probe.row_width(), " over ", probe.n_layer());
      geometry = wanted;
      store = std::make_unique<KvStore>(geometry[0], geometry[1], geometry[2], geometry[3], geometry[4] != 0,
                                        KvDType(geometry[5]), geometry[6]);
      pool = std::make_unique<BlockPool>(int32_t(geometry[2]), int32_t(geometry[3]), false);
    }
    const int64_t* seq_fields = payload.data() + n_tokens;
    const int64_t* block_ids = seq_fields + kPerSequence * n_seqs;
    const int64_t* logit_rows = block_ids + n_block_ids;
    const int64_t* capture_layers = logit_rows + n_logits;
    tables.resize(size_t(n_seqs));
    caches.clear();
    sequences.clear();
    for (int64_t s = 0; s < n_seqs; ++s) {
      const int64_t* f = seq_fields + kPerSequence * s;
      BlockTable& table = tables[size_t(s)];
      table.blocks.assign(block_ids, block_ids + f[3]);
      block_ids += f[3];
      table.n_tokens = f[2];
      caches.emplace_back(*store, table, *pool);
    }
    for (int64_t s = 0; s < n_seqs; ++s) {
      const int64_t* f = seq_fields + kPerSequence * s;
      sequences.push_back(SequenceRows{f[0], f[1], &caches[size_t(s)], nullptr});
    }
    captures.assign(capture_layers, capture_layers + n_captures);
    try {
      local.forward(StepBatch{std::span<const int64_t>(payload.data(), size_t(n_tokens)), sequences,
                              std::span<const int64_t>(logit_rows, size_t(n_logits)), captures});
    } catch (const Error& e) {
      // A batch the model refuses before any collective (its checks) is refused on rank 0 too, which
      // retries its sequences one by one (engine/engine.h): follow on with the next message.
      std::fprintf(stderr, "aerie: rank %d: a forward failed as on rank 0: %s\n", ranks.rank(), e.what());
    }
  }
}

}  // namespace aerie
