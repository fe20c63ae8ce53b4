// The tracing hook (io/trace.h). This executable runs twice (tests/CMakeLists.txt): as is, where tracing is
// off and a write must not even read its data, and as "traced.*" with AERIE_TRACE_DIR set, where the named
// intermediates of a Llama and a DeepSeek-V3 forward must be the numbers the independent PyTorch references
// computed (the committed goldens: hidden states entering each layer, final norm, logits) and what the
// forward itself returned, in the order of the computation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "io/npy.h"
#include "io/trace.h"
#include "models/registry.h"
#include "../reference_precision.h"
#include "quantized_support.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

const fs::path kData = fs::path(AERIE_TEST_DATA_DIR);

using testing::golden_ids;
using testing::prompt_logits;

double relative_max_error(const std::vector<float>& a, const std::vector<float>& b) {
  return testing::relative_max_error(a.data(), b);
}

std::vector<std::string> read_index(const fs::path& dir) {
  std::ifstream in(dir / "index.txt");
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) names.push_back(line);
  return names;
}

std::vector<float> traced(const fs::path& dir, const std::string& stem, const std::vector<int64_t>& want_shape) {
  std::vector<int64_t> shape;
  std::vector<float> values = read_npy_f32(dir / (stem + ".npy"), &shape);
  EXPECT_EQ(shape, want_shape) << stem;
  return values;
}

fs::path trace_dir() { return std::getenv("AERIE_TRACE_DIR"); }

TEST(Trace, OffReadsNothing) {
  if (trace::enabled()) GTEST_SKIP() << "the traced run";
  ThreadPool pool(2);
  const fs::path dir = kData / "llama" / "bf16_gqa_rope_scaled_tied";
  std::unique_ptr<Model> model = load_model(dir, pool);
  trace::write("x", nullptr, 1, 1);  // a no-op when off: the null pointer is never read
  EXPECT_FALSE(prompt_logits(*model, golden_ids(dir)).empty());
}

TEST(Trace, LlamaIntermediatesAreTheReferenceHiddenStates) {
  if (!trace::enabled()) GTEST_SKIP() << "runs as traced.* with AERIE_TRACE_DIR set";
  ThreadPool pool(2);
  const fs::path dir = kData / "llama" / "bf16_gqa_rope_scaled_tied";
  std::unique_ptr<Model> model = load_model(dir, pool);
  const std::vector<int64_t> ids = golden_ids(dir);
  const int64_t n = int64_t(ids.size()), d = model->n_embd(), L = model->n_layer();
  const std::vector<float> logits = prompt_logits(*model, ids);
  const fs::path t = trace_dir();

  // The computation's order, every layer's names.
  std::vector<std::string> want = {"target.embed"};
  for (int64_t l = 0; l < L; ++l)
    for (const char* name : {"attn_norm", "q", "k", "v", "attn_out", "ffn_norm", "ffn_out", "out"})
      want.push_back("target.L" + std::string(l < 10 ? "0" : "") + std::to_string(l) + "." + name);
  want.push_back("target.final_norm");
  want.push_back("target.logits");
  EXPECT_EQ(read_index(t), want);

  // The residual stream leaving layer l is the reference's hidden state entering layer l + 1.
  std::vector<int64_t> shape;
  EXPECT_LT(relative_max_error(traced(t, "target.embed", {n, d}), read_npy_f32(dir / "hidden_0.npy", &shape)), 2e-4);
  for (int64_t l = 0; l < L; ++l) {
    const std::string stem = "target.L0" + std::to_string(l) + ".out";
    const std::vector<float> ref = read_npy_f32(dir / ("hidden_" + std::to_string(l + 1) + ".npy"), &shape);
    EXPECT_LT(relative_max_error(traced(t, stem, {n, d}), ref), 2e-4) << stem;
  }
  EXPECT_LT(relative_max_error(traced(t, "target.final_norm", {n, d}), read_npy_f32(dir / "hidden_final_norm.npy", &shape)),
            2e-4);
  EXPECT_EQ(traced(t, "target.logits", {n, model->n_vocab()}), logits);  // what the forward returned, bit for bit
  EXPECT_LT(relative_max_error(logits, read_npy_f32(dir / "logits.npy", &shape)), 2e-4);
}

TEST(Trace, DeepseekNamesTheLatentsAndTheRoutes) {
  if (!trace::enabled()) GTEST_SKIP() << "runs as traced.* with AERIE_TRACE_DIR set";
  ThreadPool pool(2);
  const fs::path dir = kData / "deepseek" / "bf16_qlora_yarn";
  std::unique_ptr<Model> model = load_model(dir, pool);
  const std::vector<int64_t> ids = golden_ids(dir);
  const int64_t n = int64_t(ids.size()), d = model->n_embd();
  const std::vector<float> logits = prompt_logits(*model, ids);
  const fs::path t = trace_dir();
  const std::vector<std::string> index = read_index(t);
  auto has = [&](const std::string& s) { return std::find(index.begin(), index.end(), s) != index.end(); };
  // Layer 0 is dense, layers 1.. MoE (first_k_dense_replace 1).
  EXPECT_TRUE(has("target.L00.kv_latent") && has("target.L00.q_rope") && has("target.L00.k_rope"));
  EXPECT_FALSE(has("target.L00.router_logits"));
  EXPECT_TRUE(has("target.L01.router_logits") && has("target.L01.experts") && has("target.L01.shared_out"));
  std::vector<int64_t> shape;
  const int64_t L = model->n_layer();
  const std::vector<float> ref = read_npy_f32(dir / ("hidden_" + std::to_string(L) + ".npy"), &shape);
  EXPECT_LT(relative_max_error(traced(t, "target.L0" + std::to_string(L - 1) + ".out", {n, d}), ref), 2e-4);
  // Chosen experts, ascending per token, and the weights: the routed output is their weighted sum.
  const std::vector<float> experts = read_npy_f32(t / "target.L01.experts.npy", &shape);
  ASSERT_EQ(shape.size(), 2u);
  for (int64_t r = 0; r < shape[0]; ++r)
    for (int64_t j = 1; j < shape[1]; ++j) EXPECT_LT(experts[size_t(r * shape[1] + j - 1)], experts[size_t(r * shape[1] + j)]);
  EXPECT_EQ(traced(t, "target.logits", {n, model->n_vocab()}), logits);
}

}  // namespace
}  // namespace aerie
