// DiskBlockStore: the prefix cache's second tier, full KV blocks kept as files in a directory, so that a
// prompt prefix evicted from RAM, or computed before a restart, is read back instead of recomputed.
//
// One file a block, named `<identity>-<hash>.kvb` (16 hex digits each): `hash` is the block's prefix chain
// hash (BlockPool::chain_hash, which names the whole prefix up to and including the block), `identity`
// everything the stored bytes depend on besides the tokens (the model's weights, how they were loaded, the
// KV dtype and geometry, the block size; the caller hashes them together, kv/disk_identity.h). Layout:
//   header    64 bytes: magic "AERIEKV1", version, block_size, identity, hash, parent hash, payload bytes,
//             payload checksum, header checksum (over the header's first 56 bytes and the token ids)
//   tokens    [block_size] int64: the block's token ids
//   payload   the block's KV bytes as KvStore::export_block lays them out
// Nothing read from disk is trusted: a block is used only when its file has the expected size, both
// checksums match, and identity, hash, parent hash and tokens are exactly the ones asked for. Any other
// file of this identity is logged and removed; files of another identity (another model, dtype or block
// size sharing the directory) are left alone, and counted in one log line at start.
//
// Writes happen on a thread of the store's own: put() copies the block into a bounded queue (the one cost
// on the caller's thread) and the thread writes `.tmp-<name>` then renames it, so a crash leaves no
// half-written `.kvb`. The files of this identity are bounded by `max_bytes`: past it the least recently
// used (written or read; the order survives restarts through the files' modification times) are removed.
// A write that fails (a full disk, the directory made read-only) is logged and the block is simply not
// cached. A directory that cannot be created or written at construction is an aerie::Error.
//
// Thread-safe: the engine's step thread calls contains / put / get while the writer runs.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kv/disk_store_stats.h"

namespace aerie {

struct DiskStoreConfig {
  std::filesystem::path dir;
  uint64_t max_bytes = 0;    // files of this identity, at most (>= one block's file)
  uint64_t identity = 0;     // what the payload depends on besides the tokens
  int64_t block_size = 0;    // positions (tokens) a block
  size_t payload_bytes = 0;  // one block's KV bytes
  // Blocks queued for the writer, in bytes (at least one block): beyond it put() drops the block.
  size_t max_queue_bytes = size_t{64} << 20;
  // Identities of the other stores one engine keeps in the same directory (a draft head's beside the
  // target's): their files are not counted as another model's.
  std::vector<uint64_t> siblings;
  // Where log lines go (one line each, no newline); null: stderr, prefixed "aerie: ".
  std::function<void(const std::string&)> log;
};


class DiskBlockStore {
 public:
  explicit DiskBlockStore(DiskStoreConfig config);
  // Writes what is queued, then stops the writer.
  ~DiskBlockStore();
  DiskBlockStore(const DiskBlockStore&) = delete;
  DiskBlockStore& operator=(const DiskBlockStore&) = delete;

  // Creates `dir` if needed and checks that files can be made there; throws aerie::Error starting with
  // `what` otherwise (the constructor does this too; a command line checks before loading a model).
  static void check_directory(const std::filesystem::path& dir, const std::string& what);
  // Bytes of one block's file: header, token ids and payload.
  static uint64_t file_bytes(int64_t block_size, size_t payload_bytes);
  uint64_t file_bytes() const { return file_bytes(config_.block_size, config_.payload_bytes); }
  const DiskStoreConfig& config() const { return config_; }

  // Whether block `hash` is on disk or queued for it.
  bool contains(uint64_t hash) const;
  // Queues block `hash` (content of (parent_hash, tokens)) for writing; `fill` writes its payload_bytes
  // into the buffer it is given. False when it is held already or the queue is full (dropped), unless
  // `wait`: then it waits for room (a shutdown's last writes).
  bool put(uint64_t hash, uint64_t parent_hash, std::span<const int64_t> tokens,
           const std::function<void(std::byte*)>& fill, bool wait = false);
  // Reads block `hash` into payload ([payload_bytes]) after the checks above; false on a miss, and on a bad
  // file (logged and removed).
  bool get(uint64_t hash, uint64_t parent_hash, std::span<const int64_t> tokens, std::byte* payload);
  // Waits until every queued block is written (or has failed).
  void flush();
  DiskStoreStats stats() const;

  // The file block `hash` is kept in (tests damage files on purpose).
  std::filesystem::path path_of(uint64_t hash) const;

 private:
  struct Pending {
    uint64_t hash = 0, parent_hash = 0;
    std::vector<int64_t> tokens;
    std::vector<std::byte> payload;
  };
  struct Entry {
    std::list<uint64_t>::iterator lru;       // position in lru_ (on disk only)
    std::shared_ptr<const Pending> pending;  // set while queued
  };

  void log(const std::string& line) const;
  void scan();
  void writer_loop();
  // Writes one file; on failure logs and returns false.
  bool write_file(const Pending& block);
  // Removes least recently used files until the budget holds; the names to unlink go to `doomed`.
  void trim_locked(std::vector<std::filesystem::path>& doomed);
  // Drops `hash` from the index and removes its file, after a bad read.
  void discard(uint64_t hash, const std::string& why);
  bool check_file(std::span<const std::byte> bytes, uint64_t hash, uint64_t parent_hash,
                  std::span<const int64_t> tokens, std::string* why) const;

  DiskStoreConfig config_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, drained_;
  std::unordered_map<uint64_t, Entry> index_;
  std::list<uint64_t> lru_;  // hashes on disk, least recently used first
  std::deque<std::shared_ptr<const Pending>> queue_;
  size_t queue_bytes_ = 0;
  bool writing_ = false;  // the writer holds a block taken from the queue
  bool stop_ = false;
  DiskStoreStats stats_;
  std::thread writer_;
};

}  // namespace aerie
