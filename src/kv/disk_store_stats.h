// What a disk tier of the prefix cache holds and has done (kv/disk_block_store.h), as plain counters: apart
// from the store so that the engine's step statistics carry them without the store's thread and file headers.
#pragma once

#include <cstdint>

namespace aerie {

struct DiskStoreStats {
  int64_t blocks = 0;          // on disk, of this identity
  uint64_t bytes = 0;          // their files' bytes
  int64_t queued = 0;          // waiting for the writer
  int64_t written = 0;         // files written since start
  int64_t dropped = 0;         // put() refused: the queue was full
  int64_t write_failures = 0;  // writes that failed (logged)
  int64_t evicted = 0;         // files removed to stay within max_bytes
  int64_t hits = 0;            // get() that returned a block
  int64_t bad_files = 0;       // files found truncated, corrupt or mismatched, and removed

  DiskStoreStats& operator+=(const DiskStoreStats& o) {
    blocks += o.blocks, bytes += o.bytes, queued += o.queued, written += o.written, dropped += o.dropped;
    write_failures += o.write_failures, evicted += o.evicted, hits += o.hits, bad_files += o.bad_files;
    return *this;
  }
};

}  // namespace aerie
