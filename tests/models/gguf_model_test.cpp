// GGUF files as targets (models/gguf_loader.h) against two independent references per file
// (tests/data/gguf/goldens, tools/gen/gguf/make_goldens.py): the float64 PyTorch reference on the file's weights
// dequantised by numpy, and llama.cpp's own logits for the same file. Then split shards, speculative
// decoding through the engine with GGUF targets (an EAGLE-3 head in the Hugging Face layout, an oracle
// head), and files that lie about their model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/npy.h"
#include "models/registry.h"
#include "ops/ggml_blocks.h"
#include "spec/drafter_registry.h"
#include "../engine/oracle_head.h"
#include "../reference_precision.h"
#include "gguf_support.h"
#include "quantized_support.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;
const fs::path kData(AERIE_TEST_DATA_DIR);
const fs::path kGguf = kData / "gguf";

using testing::engine_greedy_runs;
using testing::golden_ids;
using testing::prompt_logits;

// The ids every golden was computed for.
std::vector<int64_t> ids() { return golden_ids(kData / "llama" / "bf16_gqa_rope_scaled_tied"); }

using testing::error_against;
using testing::max_abs;
using testing::read_logits;

class GgufGolden : public ::testing::TestWithParam<std::string> {
 protected:
  ThreadPool pool_{2};
};

// Float activations (the scalar tier; F32 weights; BF16 with split activations, reference_precision.h): the file's exact function, to ~1e-6 of
// the logit scale (4e-5 for BF16 split into two bf16 parts); a wrong block layout, scale, q/k order or rope factor moves logits by percents.
// Int8 activations (the VNNI / AVX2 tiers of the block types, as llama.cpp's own kernels do): these tiny
// random models amplify the activation rounding to a few per cent of the logit scale, so the bound is
// relative to llama.cpp's own error against the same reference on the same file.
TEST_P(GgufGolden, LogitsMatchTheReferenceAndLlamaCpp) {
  const fs::path file = kGguf / (GetParam() + ".gguf");
  std::unique_ptr<Model> model = load_model(file, pool_);
  const std::vector<float> logits = prompt_logits(*model, ids());
  const std::vector<float> ref = read_logits(kGguf / "goldens" / (GetParam() + ".logits.npy"));
  const std::vector<float> llama_cpp = read_logits(kGguf / "goldens" / (GetParam() + ".llama_cpp.npy"));
  ASSERT_EQ(logits.size(), ref.size());
  const bool int8_activations = std::string(ops::matmul_blocks_isa(DType::kQ4_K)) != "scalar" &&
                                GetParam() != "llama_f32" && GetParam() != "llama_bf16";
  const double error = error_against(logits, ref), llama_cpp_error = error_against(llama_cpp, ref);
  if (int8_activations) {
    EXPECT_LT(error, std::max(1.5 * llama_cpp_error, 0.02)) << "llama.cpp's error: " << llama_cpp_error;
  } else {
    EXPECT_LT(error, 1e-4);
  }
  // The same next token as the exact reference at every position where the reference's top two differ
  // by more than the error allows.
  const int64_t v = model->n_vocab();
  for (size_t r = 0; r < logits.size() / size_t(v); ++r) {
    const float* row = ref.data() + r * size_t(v);
    std::vector<float> sorted(row, row + v);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    if (sorted[0] - sorted[1] < 4 * error * max_abs(ref)) continue;
    const float* mine = logits.data() + r * size_t(v);
    EXPECT_EQ(std::max_element(mine, mine + v) - mine, std::max_element(row, row + v) - row) << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Files, GgufGolden,
                         ::testing::Values("llama_f32", "llama_bf16", "llama_q8_0", "llama_k256_q4_k_m",
                                           "llama_k256_q5_k_m", "llama_k256_q6_k", "llama_k256_q4_0"));

TEST(GgufModel, SplitShardsGiveTheWholeFilesLogits) {
  ThreadPool pool(2);
  std::unique_ptr<Model> whole = load_model(kGguf / "llama_f32.gguf", pool);
  std::unique_ptr<Model> split = load_model(kGguf / "llama_f32_split-00002-of-00003.gguf", pool);
  EXPECT_EQ(prompt_logits(*split, ids()), prompt_logits(*whole, ids()));
}

// A prompt prefilled at once gives the logits of the same tokens decoded one by one (block-type kernels
// at 12 rows and at 1 row agree: batch invariance below kGemmMinRows).
TEST(GgufModel, PrefillEqualsTokenByTokenDecode) {
  ThreadPool pool(2);
  std::unique_ptr<Model> model = load_model(kGguf / "llama_k256_q4_k_m.gguf", pool);
  const std::vector<int64_t> prompt = ids();
  const std::vector<float> whole = prompt_logits(*model, prompt);
  KvCache kv = model->make_kv_cache(int64_t(prompt.size()), KvDType::kF32);
  const int64_t v = model->n_vocab();
  for (size_t t = 0; t < prompt.size(); ++t) {
    const SequenceRows seq{0, 1, &kv};
    const int64_t row = 0;
    const ForwardOutput out = model->forward({std::span(&prompt[t], 1), std::span(&seq, 1), std::span(&row, 1), {}});
    for (int64_t i = 0; i < v; ++i) ASSERT_EQ(out.logits[i], whole[t * size_t(v) + size_t(i)]) << "position " << t;
  }
}

// Greedy speculative decoding with GGUF targets equals plain decoding token for token: a Q8_0 target with
// an EAGLE-3 head in the Hugging Face layout (few drafts accepted) and an oracle head (most accepted), and a
// Q4_K_M target with an oracle head.
TEST(GgufEngine, GreedySpeculativeEqualsPlain) {
  ThreadPool pool(2);
  for (const char* name : {"llama_q8_0.gguf", "llama_k256_q4_k_m.gguf"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<Model> target = load_model(kGguf / name, pool);
    std::unique_ptr<Model> copy = load_model(kGguf / name, pool);
    testing::OracleHead oracle(*copy, 1, 0.2);
    int64_t accepted = 0;
    auto run = [&](DraftHead* head) { return engine_greedy_runs(*target, head, pool, &accepted); };
    const auto plain = run(nullptr);
    if (target->n_embd() == 64) {
      std::unique_ptr<DraftHead> eagle = load_drafter(kData / "eagle" / "eagle3_midlayer_d2t", *target, pool);
      EXPECT_EQ(run(eagle.get()), plain);
    }
    accepted = 0;
    EXPECT_EQ(run(&oracle), plain);
    EXPECT_GT(accepted, 4 * 24 / 2) << "the oracle head should have had most drafts accepted";
  }
}

// ---- files that lie ------------------------------------------------------------------------------------

// llama_f32.gguf with the first occurrence of `from` replaced by `to` (same length), loaded; the error.
std::string edited_load_error(const std::string& from, const std::string& to) {
  std::ifstream in(kGguf / "llama_f32.gguf", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(from.size(), to.size());
  bytes.replace(at, from.size(), to);
  const fs::path path = fs::temp_directory_path() / ("aerie_gguf_edit_" + std::to_string(::getpid()) + ".gguf");
  std::ofstream(path, std::ios::binary) << bytes;
  std::string error = "(no error)";
  try {
    ThreadPool pool(1);
    load_model(path, pool);
  } catch (const Error& e) {
    error = e.what();
  }
  fs::remove(path);
  return error;
}

TEST(GgufModel, FilesThatLieAreClearErrors) {
  // general.architecture's value (a u64 length 5, then the text).
  std::string e = edited_load_error(std::string("\x05\0\0\0\0\0\0\0llama", 13),
                                    std::string("\x05\0\0\0\0\0\0\0gemma", 13));
  EXPECT_NE(e.find("GGUF architecture 'gemma' is not supported (supported: llama, deepseek2)"), std::string::npos) << e;
  e = edited_load_error("blk.1.ffn_up.weight", "blk.1.ffn_uq.weight");
  EXPECT_NE(e.find("tensor 'blk.1.ffn_uq.weight' is not one aerie knows"), std::string::npos) << e;
  e = edited_load_error("blk.1.", "blk.7.");
  EXPECT_NE(e.find("belongs to layer 7 of a 2-layer model"), std::string::npos) << e;
  e = edited_load_error("llama.embedding_length", "llama.embedding_lengtx");
  EXPECT_NE(e.find("metadata key 'llama.embedding_length' is missing"), std::string::npos) << e;
  e = edited_load_error("rope_freqs.weight", "rope_freqz.weight");
  EXPECT_NE(e.find("'rope_freqz.weight' is not one aerie knows"), std::string::npos) << e;
}

TEST(GgufModel, RefusesQuantisingAtLoad) {
  ThreadPool pool(1);
  LoadOptions options;
  options.weights = WeightFormat::kInt4;
  try {
    load_model(kGguf / "llama_q8_0.gguf", pool, options);
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a GGUF file's weights are used as stored"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aerie
