// Draft tree rows in the Llama forward (SequenceRows::tree_parent): the logits of every node of a tree
// verified in one forward equal the last logits of a plain forward of the prompt followed by that node's
// root-to-node path as a chain (each node sees the prefix and its ancestors only, at position prefix +
// depth). Also: tree and chain sequences mix in one batch, and forwards without tree rows refuse them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "models/batch_check.h"
#include "models/registry.h"

namespace aerie {
namespace {

namespace fs = std::filesystem;

const fs::path kTiny = fs::path(AERIE_TEST_DATA_DIR) / "spec" / "tiny_vocab16";

std::vector<float> forward_rows(Model& model, std::span<const int64_t> ids, KvCache& kv,
                                const int32_t* tree_parent = nullptr) {
  SequenceRows seq{0, int64_t(ids.size()), &kv};
  seq.tree_parent = tree_parent;
  std::vector<int64_t> rows(ids.size());
  std::iota(rows.begin(), rows.end(), 0);
  const ForwardOutput out = model.forward({ids, std::span(&seq, 1), rows, {}});
  return std::vector<float>(out.logits, out.logits + out.n_logit_rows * out.n_vocab);
}

double max_diff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

TEST(TreeForward, EveryNodeEqualsItsPathAsAChain) {
  ThreadPool pool(2);
  std::unique_ptr<Model> model = load_model(kTiny, pool);
  const int64_t n_vocab = model->n_vocab();
  const std::vector<int64_t> prompt = {1, 5, 9, 3, 12};
  // root 0 (the last accepted token's successor), two branches of depth 3, and one sibling subtree.
  const std::vector<int32_t> parent = {-1, 0, 0, 1, 1, 2, 3, 5, 0};
  const std::vector<int64_t> tokens = {7, 4, 11, 2, 4, 6, 13, 8, 4};
  KvCache kv = model->make_kv_cache(64, KvDType::kF32);
  forward_rows(*model, prompt, kv);
  const std::vector<float> tree = forward_rows(*model, tokens, kv, parent.data());
  EXPECT_EQ(kv.length(), int64_t(prompt.size() + tokens.size()));
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<int64_t> path;
    for (int64_t j = int64_t(i); j >= 0; j = parent[size_t(j)]) path.insert(path.begin(), tokens[size_t(j)]);
    std::vector<int64_t> chain = prompt;
    chain.insert(chain.end(), path.begin(), path.end());
    KvCache fresh = model->make_kv_cache(64, KvDType::kF32);
    const std::vector<float> want = forward_rows(*model, chain, fresh);
    EXPECT_LT(max_diff(tree.data() + i * n_vocab, want.data() + (chain.size() - 1) * n_vocab, n_vocab), 1e-4)
        << "node " << i;
  }
}

TEST(TreeForward, TreeAndChainSequencesShareABatch) {
  ThreadPool pool(2);
  std::unique_ptr<Model> model = load_model(kTiny, pool);
  const int64_t n_vocab = model->n_vocab();
  const std::vector<int64_t> prompt_a = {1, 8, 2}, prompt_b = {1, 3, 3, 14};
  const std::vector<int32_t> parent = {-1, 0, 0, 2};
  KvCache kv_a = model->make_kv_cache(32, KvDType::kF32), kv_b = model->make_kv_cache(32, KvDType::kF32);
  forward_rows(*model, prompt_a, kv_a);
  forward_rows(*model, prompt_b, kv_b);
  // rows 0-2: b's chain of 3; rows 3-6: a's tree of 4.
  const std::vector<int64_t> ids = {5, 6, 7, 9, 10, 11, 12};
  SequenceRows seqs[2] = {{0, 3, &kv_b}, {3, 4, &kv_a}};
  seqs[1].tree_parent = parent.data();
  std::vector<int64_t> rows(ids.size());
  std::iota(rows.begin(), rows.end(), 0);
  const ForwardOutput out = model->forward({ids, seqs, rows, {}});
  const std::vector<float> batched(out.logits, out.logits + out.n_logit_rows * n_vocab);

  KvCache alone_a = model->make_kv_cache(32, KvDType::kF32), alone_b = model->make_kv_cache(32, KvDType::kF32);
  forward_rows(*model, prompt_a, alone_a);
  forward_rows(*model, prompt_b, alone_b);
  const std::vector<float> b = forward_rows(*model, std::span(ids).first(3), alone_b);
  const std::vector<float> a = forward_rows(*model, std::span(ids).subspan(3), alone_a, parent.data());
  EXPECT_LT(max_diff(batched.data(), b.data(), 3 * n_vocab), 1e-4);
  EXPECT_LT(max_diff(batched.data() + 3 * n_vocab, a.data(), 4 * n_vocab), 1e-4);
}

TEST(TreeForward, RefusedWhereUnsupportedOrMalformed) {
  KvCache kv(1, 2, 16, 16, KvDType::kF32);
  const std::vector<int64_t> ids = {1, 2};
  const std::vector<int32_t> parent = {-1, 0}, bad = {-1, 1};
  SequenceRows seq{0, 2, &kv};
  seq.tree_parent = parent.data();
  CacheFit chain_only{1, 32, true, "this head"};
  EXPECT_THROW(check_batch_rows("draft batch", ids, std::span(&seq, 1), {}, chain_only, 16), Error);
  CacheFit tree_ok = chain_only;
  tree_ok.tree_rows = true;
  EXPECT_NO_THROW(check_batch_rows("batch", ids, std::span(&seq, 1), {}, tree_ok, 16));
  seq.tree_parent = bad.data();
  EXPECT_THROW(check_batch_rows("batch", ids, std::span(&seq, 1), {}, tree_ok, 16), Error);
}

}  // namespace
}  // namespace aerie
