// The prefix cache's disk tier through the engine (--kv-cache-dir), on the tiny Llama (GQA cache; alone and
// with an EAGLE-3 head, whose own cache has a tier of its own) and the tiny DeepSeek-V3 (MLA latent cache;
// alone and with its MTP layer): a restarted engine finds the prompt's blocks on disk and its greedy output
// is token for token the output computed cold; so is that of an engine whose RAM cache evicted them. Files
// of another KV dtype are left alone, corrupt or truncated files are logged and recomputed, and a directory
// that cannot be used stops the engine's construction with a clear error.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "engine/engine.h"
#include "kv/disk_identity.h"
#include "models/registry.h"
#include "spec/drafter_registry.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
const fs::path kData(AERIE_TEST_DATA_DIR);

struct Case {
  const char* name;
  const char* target;  // under tests/data
  const char* draft;   // under tests/data, "mtp", or "" (none)
};

const Case kCases[] = {
    {"llama", "llama/bf16_gqa_rope_scaled_tied", ""},
    {"llama_eagle3", "llama/bf16_gqa_rope_scaled_tied", "eagle/eagle3_midlayer_d2t"},
    {"deepseek", "deepseek/bf16_qlora_yarn", ""},
    {"deepseek_mtp", "deepseek/bf16_qlora_yarn", "mtp"},
};

struct Output {
  std::vector<int64_t> tokens;
  int64_t cached = 0;
  std::string error;
};

class KvDiskEngineTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           (std::string("aerie_kv_disk_engine_") + GetParam().name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    target_ = load_model(kData / GetParam().target, pool_);
    const std::string draft = GetParam().draft;
    if (!draft.empty()) {
      const std::string where = draft == "mtp" ? draft : (kData / draft).string();
      head_ = load_any_drafter(where, *target_, pool_);
      draft_identity_ = draft == "mtp" ? IdentityHasher().add("mtp").value() : checkpoint_fingerprint(kData / draft);
    }
    std::mt19937_64 rng(11);
    prompt_.push_back(1);
    while (prompt_.size() < 70) prompt_.push_back(3 + int64_t(rng() % uint64_t(target_->n_vocab() - 3)));
  }
  void TearDown() override { fs::remove_all(dir_); }

  EngineConfig config(bool disk, KvDType dtype = KvDType::kBF16, uint64_t kv_bytes = uint64_t{1} << 20) {
    EngineConfig c;
    c.kv_cache_memory = kv_bytes;
    c.kv_cache_dtype = dtype;
    c.block_size = 8;
    c.max_length = 128;
    c.max_batch_tokens = 32;  // the prompt is prefilled in chunks
    c.max_num_seqs = 2;
    c.spec.num_speculative_tokens = 2;
    if (disk) {
      c.kv_disk.dir = dir_.string();
      c.kv_disk.max_bytes = uint64_t{64} << 20;
      c.kv_disk.identity = checkpoint_fingerprint(kData / GetParam().target);
      c.kv_disk.draft_identity = draft_identity_;
      c.kv_disk.log = [this](const std::string& l) { log_.push_back(l); };
    }
    return c;
  }

  std::vector<Output> run(Engine& engine, const std::vector<std::vector<int64_t>>& prompts) {
    std::vector<Output> out(prompts.size());
    RequestOptions o;
    o.max_tokens = 10;
    o.ignore_eos = true;
    for (size_t i = 0; i < prompts.size(); ++i)
      engine.submit(prompts[i], o, [&out, i](const TokenEvent& e) {
        out[i].tokens.insert(out[i].tokens.end(), e.tokens.begin(), e.tokens.end());
        if (e.finished) {
          out[i].cached = e.cached_prompt_tokens;
          out[i].error = e.error;
        }
      });
    engine.run_until_idle();
    return out;
  }

  Output run_one(const EngineConfig& c) {
    Engine engine(*target_, head_.get(), c, pool_);
    return run(engine, {prompt_})[0];
  }

  bool logged(const std::string& s) const {
    for (const auto& l : log_)
      if (l.find(s) != std::string::npos) return true;
    return false;
  }

  std::vector<fs::path> files() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().extension() == ".kvb") out.push_back(e.path());
    return out;
  }

  ThreadPool pool_{2};
  fs::path dir_;
  std::unique_ptr<Model> target_;
  std::unique_ptr<Drafter> head_;
  uint64_t draft_identity_ = 0;
  std::vector<int64_t> prompt_;
  std::vector<std::string> log_;
};

// 70 tokens in blocks of 8: 8 whole blocks (64 positions) are reused, 6 tokens are computed.
constexpr int64_t kReused = 64;

TEST_P(KvDiskEngineTest, ARestartedEngineReadsThePrefixFromDiskAndAnswersAsCold) {
  const Output cold = run_one(config(false));
  ASSERT_TRUE(cold.error.empty()) << cold.error;
  {
    Engine first(*target_, head_.get(), config(true), pool_);
    const Output o = run(first, {prompt_})[0];
    EXPECT_EQ(o.tokens, cold.tokens);
    EXPECT_EQ(o.cached, 0);
  }  // writes what is queued
  EXPECT_FALSE(files().empty());
  Engine second(*target_, head_.get(), config(true), pool_);
  EXPECT_TRUE(logged("blocks (")) << "no start-up line";
  EXPECT_FALSE(logged("another model")) << "the head's files are the same engine's";
  const Output o = run(second, {prompt_})[0];
  EXPECT_EQ(o.tokens, cold.tokens);
  EXPECT_EQ(o.cached, kReused);
  const int64_t per_prompt = kReused / 8 * (head_ && second.draft_disk_tier() ? 2 : 1);  // the head's blocks too
  EXPECT_EQ(second.metrics().kv_disk.hits, per_prompt);
  EXPECT_EQ(second.metrics().prefilled_tokens, int64_t(prompt_.size()) - kReused);
}

TEST_P(KvDiskEngineTest, BlocksEvictedFromRamComeBackFromDisk) {
  const Output cold = run_one(config(false));
  // RAM for little more than one sequence: the other prompts evict the first one's blocks.
  const uint64_t per_position = target_->make_kv_cache(1, KvDType::kBF16).bytes_per_position();
  const uint64_t ram = per_position * 8 * 20;  // 20 blocks (and as many for a head's cache)
  EngineConfig c = config(true, KvDType::kBF16, ram * (head_ ? 3 : 1));
  c.max_num_seqs = 1;
  Engine engine(*target_, head_.get(), c, pool_);
  EXPECT_EQ(run(engine, {prompt_})[0].tokens, cold.tokens);
  std::mt19937_64 rng(5);
  std::vector<std::vector<int64_t>> others(3, std::vector<int64_t>{1});
  for (auto& p : others)
    while (p.size() < 100) p.push_back(3 + int64_t(rng() % uint64_t(target_->n_vocab() - 3)));
  run(engine, others);
  const int64_t hits_before = engine.metrics().kv_disk.hits;
  const Output o = run(engine, {prompt_})[0];
  EXPECT_EQ(o.tokens, cold.tokens);
  EXPECT_EQ(o.cached, kReused);
  EXPECT_GT(engine.metrics().kv_disk.hits, hits_before) << "the blocks were still in RAM: the test evicts nothing";
}

TEST_P(KvDiskEngineTest, AnotherKvDtypeLeavesTheFilesAlone) {
  run_one(config(true));
  const size_t n_files = files().size();
  const Output cold = run_one(config(false, KvDType::kF32));
  log_.clear();
  const Output o = run_one(config(true, KvDType::kF32));
  EXPECT_EQ(o.tokens, cold.tokens);
  EXPECT_EQ(o.cached, 0);
  EXPECT_TRUE(logged(std::to_string(n_files) + " files of another model, KV dtype or block size left alone"));
  EXPECT_EQ(files().size(), 2 * n_files);  // its own written beside them
}

TEST_P(KvDiskEngineTest, CorruptOrTruncatedFilesAreLoggedAndRecomputed) {
  const Output cold = run_one(config(false));
  for (const std::string how : {"corrupt", "truncate"}) {
    SCOPED_TRACE(how);
    fs::remove_all(dir_);
    run_one(config(true));
    for (const fs::path& f : files()) {
      if (how == "truncate") {
        fs::resize_file(f, fs::file_size(f) / 2);
        continue;
      }
      std::fstream s(f, std::ios::in | std::ios::out | std::ios::binary);
      const std::streamoff last = std::streamoff(fs::file_size(f) - 1);  // the payload's last byte
      s.seekg(last);
      const char c = char(s.get() ^ 0x5a);
      s.seekp(last);
      s.put(c);
    }
    log_.clear();
    Engine engine(*target_, head_.get(), config(true), pool_);
    const Output o = run(engine, {prompt_})[0];
    EXPECT_EQ(o.tokens, cold.tokens);
    EXPECT_EQ(o.cached, 0);
    EXPECT_GT(engine.metrics().kv_disk.bad_files, 0);
    EXPECT_TRUE(logged(how == "truncate" ? "(truncated?); removed" : "payload checksum mismatch (corrupt); removed"));
  }
}

TEST_P(KvDiskEngineTest, AnUnusableDirectoryIsAClearErrorAtConstruction) {
  EngineConfig c = config(true);
  c.kv_disk.dir = "/proc/aerie_kv_cache";
  try {
    Engine engine(*target_, head_.get(), c, pool_);
    FAIL() << "an engine over a directory that cannot be created";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV disk cache /proc/aerie_kv_cache: cannot create the directory"),
              std::string::npos)
        << e.what();
  }
  c = config(true);
  c.kv_disk.identity = 0;
  EXPECT_THROW(Engine(*target_, head_.get(), c, pool_), Error);
  c = config(true);
  c.prefix_caching = false;
  EXPECT_THROW(Engine(*target_, head_.get(), c, pool_), Error);
}

INSTANTIATE_TEST_SUITE_P(Models, KvDiskEngineTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace aerie
