#include "models/tensor_parallel_driver.h"

#include <cstdio>
#include <span>

#include "core/error.h"
#include "kv/block_pool.h"
#include "kv/kv_cache.h"
#include "ops/ops.h"

namespace aerie {
namespace {

// The header every message starts with (int64 each); the payload's size follows from it.
enum Field : size_t {
  kOp, kTokens, kSequences, kLogitRows, kCaptures, kBlockIds, kTreeParents, kCopies,
  kLayers, kRowWidth, kStoreBlocks, kBlockSize, kWithValues, kDType, kScaleWidth,
  kBatchInvariant,  // 1: the forward runs under ops::BatchInvariantScope on every rank (--deterministic)
  kHeaderFields
};
enum Op : int64_t { kStop = 0, kForward = 1, kHeartbeat = 2 };
// row_begin, n_rows, cache length, number of block ids, tree rows (0: a chain; else tree_cached + n_rows
// parents follow in the tree part), tree_cached
constexpr int64_t kPerSequence = 6;

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
  KvStore& store = batch.sequences.front().kv->store();
  if (&store != logged_store_) {  // from now on the store's slot copies (draft tree paths) reach the others
    if (logged_store_ == nullptr) copies_.clear();
    store.record_copies(&copies_);
    logged_store_ = &store;
  }
  payload_.assign(batch.token_ids.begin(), batch.token_ids.end());
  int64_t n_block_ids = 0, n_parents = 0;
  for (const SequenceRows& s : batch.sequences) {
    AERIE_CHECK(&s.kv->store() == &store, "tensor parallel forward: one batch's caches must share one KV store");
    const std::span<const int32_t> blocks = s.kv->block_ids();
    const int64_t tree_rows = s.tree_parent != nullptr ? s.tree_cached + s.n_rows : 0;
    payload_.insert(payload_.end(),
                    {s.row_begin, s.n_rows, s.kv->length(), int64_t(blocks.size()), tree_rows, s.tree_cached});
    n_block_ids += int64_t(blocks.size());
    n_parents += tree_rows;
  }
  for (const SequenceRows& s : batch.sequences) {
    const std::span<const int32_t> blocks = s.kv->block_ids();
    payload_.insert(payload_.end(), blocks.begin(), blocks.end());
  }
  for (const SequenceRows& s : batch.sequences)
    if (s.tree_parent != nullptr) payload_.insert(payload_.end(), s.tree_parent, s.tree_parent + s.tree_cached + s.n_rows);
  // Slot copies since the last forward (a verified tree's path moved into place), applied before this one.
  payload_.insert(payload_.end(), copies_.begin(), copies_.end());
  const int64_t n_copies = int64_t(copies_.size()) / 2;
  copies_.clear();
  payload_.insert(payload_.end(), batch.logit_rows.begin(), batch.logit_rows.end());
  payload_.insert(payload_.end(), batch.capture_layers.begin(), batch.capture_layers.end());
  header_ = {kForward,
             int64_t(batch.token_ids.size()),
             int64_t(batch.sequences.size()),
             int64_t(batch.logit_rows.size()),
             int64_t(batch.capture_layers.size()),
             n_block_ids,
             n_parents,
             n_copies,
             store.n_layer(),
             store.row_width(),
             store.n_blocks(),
             store.block_size(),
             store.has_values() ? 1 : 0,
             int64_t(store.dtype()),
             store.scale_width(),
             ops::batch_invariant() ? 1 : 0};
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
  std::vector<int32_t> parents;  // the batch's draft tree parents, sequence after sequence
  const KvCache probe = local.make_kv_cache(1, KvDType::kF32);  // this rank's row width
  for (;;) {
    ranks.broadcast(bytes_of(header), 0);
    if (header[kOp] == kStop) return;
    if (header[kOp] == kHeartbeat) continue;
    AERIE_CHECK(header[kOp] == kForward, "tensor parallel follower: unknown message ", header[kOp]);
    const int64_t n_tokens = header[kTokens], n_seqs = header[kSequences], n_logits = header[kLogitRows],
                  n_captures = header[kCaptures], n_block_ids = header[kBlockIds], n_parents = header[kTreeParents],
                  n_copies = header[kCopies];
    payload.resize(
        size_t(n_tokens + kPerSequence * n_seqs + n_block_ids + n_parents + 2 * n_copies + n_logits + n_captures));
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
      store->set_local_partition(local.kv_partitions(), local.kv_partition());  // data-parallel attention
    }
    const int64_t* seq_fields = payload.data() + n_tokens;
    const int64_t* block_ids = seq_fields + kPerSequence * n_seqs;
    const int64_t* tree_parents = block_ids + n_block_ids;
    const int64_t* copies = tree_parents + n_parents;
    const int64_t* logit_rows = copies + 2 * n_copies;
    const int64_t* capture_layers = logit_rows + n_logits;
    for (int64_t c = 0; c < n_copies; ++c) store->copy_slot(copies[2 * c], copies[2 * c + 1]);  // as rank 0 did
    parents.assign(tree_parents, tree_parents + n_parents);
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
    for (int64_t s = 0, tree_at = 0; s < n_seqs; ++s) {
      const int64_t* f = seq_fields + kPerSequence * s;
      sequences.push_back(SequenceRows{f[0], f[1], &caches[size_t(s)], f[4] > 0 ? parents.data() + tree_at : nullptr, f[5]});
      tree_at += f[4];
    }
    captures.assign(capture_layers, capture_layers + n_captures);
    try {
      const ops::BatchInvariantScope invariant(header[kBatchInvariant] != 0);
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
