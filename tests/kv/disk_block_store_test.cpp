// The prefix cache's disk tier: a block's bytes out of a KvStore and back (every dtype, GQA and MLA
// layouts), files written and read back equal, found again by a new store over the same directory, ignored
// when written for another identity, removed with a log line when truncated or corrupt, kept within the
// byte budget least recently used first; a directory that cannot be used is an error at construction and
// one that breaks later only loses the blocks. Then the pool with the tier under it: a block evicted from
// RAM comes back from disk with the same bytes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "kv/block_pool.h"
#include "kv/disk_block_store.h"
#include "kv/disk_identity.h"
#include "kv/disk_kv_tier.h"
#include "kv/kv_cache.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system's temporary one, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("aerie_kv_disk_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Every log line a store writes.
struct LogLines {
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& l) { lines.push_back(l); };
  }
  bool any_contains(const std::string& s) const {
    for (const auto& l : lines)
      if (l.find(s) != std::string::npos) return true;
    return false;
  }
};

constexpr int64_t kBlock = 4;
constexpr size_t kPayload = 1000;

DiskStoreConfig config_for(const fs::path& dir, uint64_t identity, uint64_t max_files, LogLines* log) {
  DiskStoreConfig c;
  c.dir = dir;
  c.identity = identity;
  c.block_size = kBlock;
  c.payload_bytes = kPayload;
  c.max_bytes = max_files * DiskBlockStore::file_bytes(kBlock, kPayload);
  if (log) c.log = log->sink();
  return c;
}

// Block i of a made-up chain: its tokens, parent hash, hash and payload.
struct TestBlock {
  std::vector<int64_t> tokens;
  uint64_t parent = 0, hash = 0;
  std::vector<std::byte> payload;
};

std::vector<TestBlock> make_chain(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TestBlock> chain;
  uint64_t parent = BlockPool::kRootHash;
  for (int i = 0; i < n; ++i) {
    TestBlock b;
    for (int64_t t = 0; t < kBlock; ++t) b.tokens.push_back(int64_t(rng() % 50000));
    b.parent = parent;
    b.hash = BlockPool::chain_hash(parent, b.tokens);
    b.payload.resize(kPayload);
    for (auto& x : b.payload) x = std::byte(rng());
    parent = b.hash;
    chain.push_back(b);
  }
  return chain;
}

void put(DiskBlockStore& store, const TestBlock& b) {
  store.put(b.hash, b.parent, b.tokens, [&](std::byte* out) { std::memcpy(out, b.payload.data(), kPayload); });
}

bool get_equal(DiskBlockStore& store, const TestBlock& b) {
  std::vector<std::byte> out(kPayload);
  return store.get(b.hash, b.parent, b.tokens, out.data()) && out == b.payload;
}

TEST(KvStoreBlockBytes, ExportThenImportCopiesEveryLayerAndScaleBitForBit) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (KvDType dtype : {KvDType::kF32, KvDType::kBF16, KvDType::kFP8E4M3}) {
    for (bool values : {true, false}) {  // GQA keys and values; the MLA latent (keys only)
      SCOPED_TRACE(std::string(kv_dtype_name(dtype)) + (values ? " with values" : " latent"));
      const int64_t n_layer = 3, row = 24, blocks = 5, bs = 4, scale_width = values ? 8 : 0;
      KvStore a(n_layer, row, blocks, bs, values, dtype, scale_width);
      KvStore b(n_layer, row, blocks, bs, values, dtype, scale_width);
      std::vector<float> k(row), v(row);
      for (int64_t layer = 0; layer < n_layer; ++layer)
        for (int64_t slot = 0; slot < blocks * bs; ++slot) {
          for (auto& x : k) x = normal(rng);
          for (auto& x : v) x = normal(rng);
          a.write(layer, slot, k.data(), values ? v.data() : nullptr);
        }
      const size_t per_row = size_t(row) * kv_dtype_size(dtype) +
                             (dtype == KvDType::kFP8E4M3 ? (values ? 3 : 1) * 4 : 0);
      EXPECT_EQ(a.block_bytes(), size_t(n_layer * bs) * per_row * (values ? 2 : 1));
      std::vector<std::byte> bytes(a.block_bytes());
      a.export_block(3, bytes.data());
      b.import_block(1, bytes.data());
      // Block 3 of a reads, row for row and as decoded f32, as block 1 of b; b's other blocks stay zero.
      for (int64_t layer = 0; layer < n_layer; ++layer)
        for (bool which : {false, true}) {
          if (which && !values) continue;
          const int32_t ida = 3, idb = 1;
          const PagedRows ra = a.rows(layer, which, &ida), rb = b.rows(layer, which, &idb);
          std::vector<float> xa(row), xb(row);
          for (int64_t p = 0; p < bs; ++p) {
            ra.load(p, 0, row, xa.data());
            rb.load(p, 0, row, xb.data());
            EXPECT_EQ(std::memcmp(xa.data(), xb.data(), size_t(row) * 4), 0) << "layer " << layer << " pos " << p;
          }
          const int32_t other = 0;
          b.rows(layer, which, &other).load(0, 0, row, xb.data());
          EXPECT_EQ(xb, std::vector<float>(size_t(row), 0.0f));
        }
      std::vector<std::byte> again(a.block_bytes());
      b.export_block(1, again.data());
      EXPECT_EQ(again, bytes);
    }
  }
}

TEST(DiskBlockStore, WritesReadsBackAndARestartFindsTheBlocks) {
  TempDir dir;
  const std::vector<TestBlock> chain = make_chain(6, 1);
  {
    DiskBlockStore store(config_for(dir.path(), 42, 100, nullptr));
    for (const TestBlock& b : chain) put(store, b);
    for (const TestBlock& b : chain) EXPECT_TRUE(get_equal(store, b));  // queued or written: the same bytes
    store.flush();
    const DiskStoreStats s = store.stats();
    EXPECT_EQ(s.blocks, 6);
    EXPECT_EQ(s.written, 6);
    EXPECT_EQ(s.bytes, 6 * store.file_bytes());
    EXPECT_TRUE(fs::exists(store.path_of(chain[2].hash)));
    put(store, chain[2]);  // held already: no second write
    store.flush();
    EXPECT_EQ(store.stats().written, 6);
  }
  LogLines log;
  DiskBlockStore again(config_for(dir.path(), 42, 100, &log));
  EXPECT_EQ(again.stats().blocks, 6);
  EXPECT_TRUE(log.any_contains("6 blocks"));
  for (const TestBlock& b : chain) EXPECT_TRUE(get_equal(again, b));
  // Asked for with another parent or other tokens under the same name: not that block.
  std::vector<std::byte> out(kPayload);
  EXPECT_FALSE(again.get(chain[1].hash, chain[1].parent ^ 1, chain[1].tokens, out.data()));
  EXPECT_FALSE(again.get(chain[5].hash + 1, chain[5].parent, chain[5].tokens, out.data()));
}

TEST(DiskBlockStore, FilesOfAnotherIdentityAreLeftAloneAndNeverRead) {
  TempDir dir;
  const std::vector<TestBlock> chain = make_chain(3, 2);
  {
    DiskBlockStore store(config_for(dir.path(), 7, 100, nullptr));
    for (const TestBlock& b : chain) put(store, b);
  }
  LogLines log;
  DiskBlockStore other(config_for(dir.path(), 8, 100, &log));  // another model, KV dtype or block size
  EXPECT_EQ(other.stats().blocks, 0);
  EXPECT_TRUE(log.any_contains("3 files of another model"));
  for (const TestBlock& b : chain) EXPECT_FALSE(other.contains(b.hash));
  EXPECT_FALSE(get_equal(other, chain[0]));
  // A file of identity 7 renamed to identity 8's name: its header still says 7, so it is not trusted.
  const DiskBlockStore probe(config_for(dir.path(), 7, 100, nullptr));
  fs::copy_file(probe.path_of(chain[0].hash), other.path_of(chain[0].hash));
  DiskBlockStore reopened(config_for(dir.path(), 8, 100, &log));
  EXPECT_TRUE(reopened.contains(chain[0].hash));
  EXPECT_FALSE(get_equal(reopened, chain[0]));
  EXPECT_TRUE(log.any_contains("another model"));
  EXPECT_FALSE(fs::exists(reopened.path_of(chain[0].hash)));
  EXPECT_EQ(reopened.stats().bad_files, 1);
  EXPECT_TRUE(fs::exists(probe.path_of(chain[0].hash)));  // identity 7's own file is untouched
}

// Damages the file of `b` in `store`'s directory by `how`.
void damage(const fs::path& path, const std::string& how) {
  if (how == "truncate") {
    fs::resize_file(path, fs::file_size(path) - 100);
    return;
  }
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  // payload: a byte near the end; header: the parent hash; tokens: the first token id.
  const std::streamoff at = how == "payload" ? std::streamoff(fs::file_size(path) - 10) : how == "header" ? 33 : 64;
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = char(c ^ 0x10);
  f.seekp(at);
  f.write(&c, 1);
}

TEST(DiskBlockStore, TruncatedOrCorruptFilesAreLoggedRemovedAndNeverUsed) {
  for (const std::string how : {"truncate", "payload", "header", "tokens"}) {
    SCOPED_TRACE(how);
    TempDir dir;
    const std::vector<TestBlock> chain = make_chain(2, 3);
    fs::path damaged;
    {
      DiskBlockStore store(config_for(dir.path(), 9, 100, nullptr));
      for (const TestBlock& b : chain) put(store, b);
      store.flush();
      damaged = store.path_of(chain[0].hash);
    }
    damage(damaged, how);
    LogLines log;
    DiskBlockStore store(config_for(dir.path(), 9, 100, &log));
    EXPECT_FALSE(get_equal(store, chain[0]));
    EXPECT_TRUE(get_equal(store, chain[1]));  // the undamaged one is still good
    EXPECT_FALSE(fs::exists(damaged));
    EXPECT_EQ(store.stats().bad_files, 1);
    EXPECT_EQ(store.stats().blocks, 1);
    EXPECT_TRUE(log.any_contains("ignored " + damaged.filename().string())) << log.lines.back();
    // It is written again when offered again.
    put(store, chain[0]);
    store.flush();
    EXPECT_TRUE(get_equal(store, chain[0]));
  }
}

TEST(DiskBlockStore, StaysWithinTheBudgetDroppingTheLeastRecentlyUsed) {
  TempDir dir;
  const std::vector<TestBlock> chain = make_chain(6, 4);
  DiskBlockStore store(config_for(dir.path(), 5, 3, nullptr));  // room for 3 files
  for (int i = 0; i < 3; ++i) put(store, chain[size_t(i)]);
  store.flush();
  EXPECT_TRUE(get_equal(store, chain[0]));  // 0 is now the most recently used: 1 goes first
  put(store, chain[3]);
  store.flush();
  EXPECT_FALSE(store.contains(chain[1].hash));
  EXPECT_FALSE(fs::exists(store.path_of(chain[1].hash)));
  for (int i : {0, 2, 3}) EXPECT_TRUE(get_equal(store, chain[size_t(i)])) << i;
  put(store, chain[4]);
  put(store, chain[5]);
  store.flush();
  const DiskStoreStats s = store.stats();
  EXPECT_EQ(s.blocks, 3);
  EXPECT_EQ(s.evicted, 3);
  int64_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 3);
  // A restart with a smaller budget trims to it, oldest first (by modification time).
  DiskBlockStore smaller(config_for(dir.path(), 5, 1, nullptr));
  EXPECT_EQ(smaller.stats().blocks, 1);
}

TEST(DiskBlockStore, AnUnusableDirectoryIsAnErrorAtConstruction) {
  TempDir dir;
  const fs::path file = dir.path() / "plain_file";
  std::ofstream(file) << "x";
  EXPECT_THROW(DiskBlockStore(config_for(file, 1, 10, nullptr)), Error);                    // not a directory
  EXPECT_THROW(DiskBlockStore(config_for("/proc/aerie_kv_cache", 1, 10, nullptr)), Error);  // cannot be made
  try {
    DiskBlockStore store(config_for(dir.path(), 1, 10, nullptr));
    DiskStoreConfig c = config_for(dir.path(), 1, 10, nullptr);
    c.max_bytes = store.file_bytes() - 1;
    DiskBlockStore too_small(c);
    FAIL() << "a budget smaller than one block's file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot hold one block"), std::string::npos) << e.what();
  }
  if (::geteuid() != 0) {  // root writes through permissions
    const fs::path ro = dir.path() / "read_only";
    fs::create_directories(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    try {
      DiskBlockStore store(config_for(ro, 1, 10, nullptr));
      FAIL() << "a read-only directory was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot write"), std::string::npos) << e.what();
    }
    fs::permissions(ro, fs::perms::owner_all);
  }
}

TEST(DiskBlockStore, ADirectoryThatBreaksLaterLosesBlocksWithALogLineAndNothingElse) {
  TempDir dir;
  const fs::path sub = dir.path() / "cache";
  const std::vector<TestBlock> chain = make_chain(3, 5);
  LogLines log;
  DiskBlockStore store(config_for(sub, 6, 10, &log));
  put(store, chain[0]);
  store.flush();
  fs::remove_all(sub);  // as a full or unmounted disk: every write and read fails from here
  put(store, chain[1]);
  put(store, chain[2]);
  store.flush();
  const DiskStoreStats s = store.stats();
  EXPECT_EQ(s.write_failures, 2);
  EXPECT_TRUE(log.any_contains("cannot write to"));
  EXPECT_FALSE(store.contains(chain[1].hash));  // not held: looked for in RAM only from now
  EXPECT_FALSE(get_equal(store, chain[0]));     // its file is gone: a miss, logged
  EXPECT_FALSE(store.contains(chain[0].hash));
}

TEST(DiskIdentity, ChecksumAndIdentitySeeEveryByteAndField) {
  std::vector<unsigned char> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = (unsigned char)(i * 7);
  const uint64_t base = checksum64(bytes.data(), bytes.size());
  for (size_t i : {size_t(0), size_t(31), size_t(32), size_t(995), size_t(999)}) {
    bytes[i] ^= 1;
    EXPECT_NE(checksum64(bytes.data(), bytes.size()), base) << i;
    bytes[i] ^= 1;
  }
  EXPECT_NE(checksum64(bytes.data(), 999), base);
  EXPECT_EQ(checksum64(bytes.data(), bytes.size()), base);
  EXPECT_NE(IdentityHasher().add("ab").add("c").value(), IdentityHasher().add("a").add("bc").value());
  EXPECT_NE(IdentityHasher().add(uint64_t(1)).value(), IdentityHasher().add(uint64_t(2)).value());
  TempDir dir;
  std::ofstream(dir.path() / "config.json") << "{\"a\": 1}";
  std::vector<char> weights(3 << 20, 1);
  std::ofstream(dir.path() / "model.safetensors", std::ios::binary)
      .write(weights.data(), std::streamsize(weights.size()));
  const uint64_t fp = checkpoint_fingerprint(dir.path());
  EXPECT_EQ(checkpoint_fingerprint(dir.path()), fp);
  weights[(3 << 20) / 2] = 2;  // one weight byte in a sampled window past the first MiB
  std::ofstream(dir.path() / "model.safetensors", std::ios::binary)
      .write(weights.data(), std::streamsize(weights.size()));
  EXPECT_NE(checkpoint_fingerprint(dir.path()), fp);
  std::ofstream(dir.path() / "tokenizer.json") << "{}";  // not part of what computes KV rows
  const uint64_t fp2 = checkpoint_fingerprint(dir.path());
  std::ofstream(dir.path() / "config.json") << "{\"a\": 2}";
  EXPECT_NE(checkpoint_fingerprint(dir.path()), fp2);
  EXPECT_THROW(checkpoint_fingerprint(dir.path() / "missing"), Error);
}

// The pool with a disk tier: blocks evicted from RAM come back from disk, into other block ids, with the
// same bytes; a restarted pool and store find them.
TEST(DiskKvTier, EvictedBlocksComeBackFromDiskWithTheirBytes) {
  TempDir dir;
  const int64_t n_layer = 2, row = 16, bs = 4, n_blocks = 4;
  std::mt19937 rng(6);
  std::normal_distribution<float> normal;
  std::vector<int64_t> prompt(13);
  for (auto& t : prompt) t = int64_t(rng() % 1000);
  std::vector<std::vector<std::byte>> original;  // per prompt block: its bytes
  auto config = [&] {
    DiskStoreConfig c;
    c.dir = dir.path();
    c.identity = 77;
    c.max_bytes = uint64_t{1} << 30;
    return c;
  };
  {
    KvStore store(n_layer, row, n_blocks, bs, true, KvDType::kBF16, 8);
    BlockPool pool{int32_t(n_blocks), int32_t(bs)};
    DiskKvTier tier(store, config());
    pool.set_tier(&tier);
    BlockTable table;
    ASSERT_TRUE(table.reserve(pool, 12));
    std::vector<float> k(row), v(row);
    for (int64_t layer = 0; layer < n_layer; ++layer)
      for (int64_t p = 0; p < 12; ++p) {
        for (auto& x : k) x = normal(rng);
        for (auto& x : v) x = normal(rng);
        store.write(layer, table.blocks[size_t(p / bs)] * bs + p % bs, k.data(), v.data());
      }
    table.n_tokens = 12;
    table.register_full_blocks(pool, prompt, 12);
    for (int32_t b : table.blocks) {
      original.emplace_back(store.block_bytes());
      store.export_block(b, original.back().data());
    }
    table.release_all(pool);
    // Another sequence takes every block: the three cached ones are evicted from RAM.
    BlockTable other;
    ASSERT_TRUE(other.reserve(pool, n_blocks * bs));
    EXPECT_EQ(pool.n_cached_idle(), 0);
    other.release_all(pool);
    BlockTable again;
    EXPECT_EQ(again.match_prefix(pool, prompt), 12);
    EXPECT_EQ(pool.tier_hits(), 3);
    for (size_t i = 0; i < 3; ++i) {
      std::vector<std::byte> now(store.block_bytes());
      store.export_block(again.blocks[i], now.data());
      EXPECT_EQ(now, original[i]) << "block " << i;
    }
    again.release_all(pool);
  }
  KvStore store(n_layer, row, n_blocks, bs, true, KvDType::kBF16, 8);
  BlockPool pool{int32_t(n_blocks), int32_t(bs)};
  DiskKvTier tier(store, config());
  pool.set_tier(&tier);
  BlockTable table;
  EXPECT_EQ(table.match_prefix(pool, std::span(prompt).first(9)), 8);  // 2 blocks, 1 token left to compute
  for (size_t i = 0; i < 2; ++i) {
    std::vector<std::byte> now(store.block_bytes());
    store.export_block(table.blocks[i], now.data());
    EXPECT_EQ(now, original[i]) << "block " << i;
  }
  table.release_all(pool);
  // A tier needs prefix caching and one partition.
  BlockPool no_cache(4, 4, false);
  EXPECT_THROW(no_cache.set_tier(&tier), Error);
}

// A write queue of one block drops blocks registered faster than they are written; a shutdown's
// offer_all_to_tier waits for room instead, so every registered block ends on disk.
TEST(DiskKvTier, AtShutdownEveryRegisteredBlockReachesTheDisk) {
  TempDir dir;
  const int64_t bs = 4, n_blocks = 64;
  KvStore store(2, 256, n_blocks, bs, true, KvDType::kF32);
  BlockPool pool{int32_t(n_blocks), int32_t(bs)};
  DiskStoreConfig c;
  c.dir = dir.path();
  c.identity = 78;
  c.max_bytes = uint64_t{1} << 30;
  c.max_queue_bytes = 1;  // one block
  DiskKvTier tier(store, c);
  pool.set_tier(&tier);
  std::vector<int64_t> tokens(size_t(n_blocks * bs));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int64_t(i * 31 % 997);
  BlockTable table;
  ASSERT_TRUE(table.reserve(pool, n_blocks * bs));
  table.n_tokens = n_blocks * bs;
  table.register_full_blocks(pool, tokens);
  tier.set_waiting(true);
  pool.offer_all_to_tier();
  tier.disk().flush();
  EXPECT_EQ(tier.disk().stats().blocks, n_blocks);
  table.release_all(pool);
}

}  // namespace
}  // namespace aerie
