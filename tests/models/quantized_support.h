// What the quantised-weight model tests (int8, int4, DeepSeek int8) share: logits of a prompt, the error
// measures they compare with, and greedy decoding of four ragged requests through the engine.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/engine.h"
#include "models/model.h"
#include "models/registry.h"
#include "spec/draft_head.h"
#include "../golden_support.h"
#include "../tensor_files.h"

namespace aerie::testing {

// golden.json's "ids" of a test case folder.
inline std::vector<int64_t> golden_ids(const std::filesystem::path& dir) {
  std::ifstream in(dir / "golden.json");
  return nlohmann::json::parse(in).at("ids").get<std::vector<int64_t>>();
}

// Logits of every prompt position from one prefill, with an f32 KV cache (the goldens' arithmetic).
inline std::vector<float> prompt_logits(Model& model, const std::vector<int64_t>& ids) {
  KvCache kv = model.make_kv_cache(int64_t(ids.size()), KvDType::kF32);
  const SequenceRows seq{0, int64_t(ids.size()), &kv};
  std::vector<int64_t> rows(ids.size());
  std::iota(rows.begin(), rows.end(), 0);
  const ForwardOutput out = model.forward({ids, std::span(&seq, 1), rows, {}});
  return std::vector<float>(out.logits, out.logits + out.n_logit_rows * out.n_vocab);
}

// Logits of every position decoded one token at a time through an f32 KV cache (the decode path's arithmetic).
inline std::vector<float> decoded_logits(Model& model, const std::vector<int64_t>& ids) {
  KvCache kv = model.make_kv_cache(int64_t(ids.size()), KvDType::kF32);
  std::vector<float> all;
  for (size_t i = 0; i < ids.size(); ++i) {
    const SequenceRows seq{0, 1, &kv};
    const int64_t row = 0;
    const ForwardOutput out = model.forward({std::span(&ids[i], 1), std::span(&seq, 1), std::span(&row, 1), {}});
    all.insert(all.end(), out.logits, out.logits + out.n_vocab);
  }
  return all;
}

// Mean over rows of KL(softmax(p) || softmax(q)), nats.
inline double mean_kl(const std::vector<float>& p, const std::vector<float>& q, int64_t n_vocab) {
  const size_t n_rows = p.size() / size_t(n_vocab);
  double kl = 0;
  for (size_t r = 0; r < n_rows; ++r) {
    const float* x = p.data() + r * size_t(n_vocab);
    const float* y = q.data() + r * size_t(n_vocab);
    double mx = -1e30, my = -1e30, sx = 0, sy = 0;
    for (int64_t i = 0; i < n_vocab; ++i) mx = std::max(mx, double(x[i])), my = std::max(my, double(y[i]));
    for (int64_t i = 0; i < n_vocab; ++i) sx += std::exp(x[i] - mx), sy += std::exp(y[i] - my);
    for (int64_t i = 0; i < n_vocab; ++i) {
      const double lp = x[i] - mx - std::log(sx), lq = y[i] - my - std::log(sy);
      kl += std::exp(lp) * (lp - lq);
    }
  }
  return kl / double(n_rows);
}

// Four requests of ragged prompt lengths (all starting with token 1), 24 greedy tokens each, batched
// through one Engine with `head` drafting K = 3 (null: plain decoding). Returns each request's tokens;
// *accepted gets the drafts the engine accepted.
inline std::vector<std::vector<int64_t>> engine_greedy_runs(Model& target, DraftHead* head, ThreadPool& pool,
                                                            int64_t* accepted) {
  EngineConfig c;
  c.kv_cache_memory = uint64_t(1) << 21;
  c.block_size = 8;
  c.max_length = 256;
  c.max_num_seqs = 4;
  c.spec.num_speculative_tokens = 3;
  Engine engine(target, head, c, pool);
  std::vector<std::vector<int64_t>> out(4);
  for (int j = 0; j < 4; ++j) {
    std::vector<int64_t> prompt = {1};
    for (int t = 0; t < 3 + 5 * j; ++t) prompt.push_back(3 + (37 * t + 11 * j) % 250);
    RequestOptions o;
    o.max_tokens = 24;
    o.ignore_eos = true;
    engine.submit(prompt, o, [&out, j](const TokenEvent& e) {
      out[size_t(j)].insert(out[size_t(j)].end(), e.tokens.begin(), e.tokens.end());
      ASSERT_TRUE(e.error.empty()) << e.error;
    });
  }
  engine.run_until_idle();
  *accepted = engine.metrics().spec.accepted_tokens;
  return out;
}

// The aerie::Error loading the checkpoint folder `dir` throws, or "" when it loads.
inline std::string load_error(const std::filesystem::path& dir, ThreadPool& pool) {
  try {
    load_model(dir, pool);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Checkpoint folder `src` copied into `dir` with its config.json edited by `edit_config` (given the config, or
// its quantization_config when `quantization_only`) and its tensors by `edit_tensors` (written as one
// model.safetensors), then loaded: the error, or "".
inline std::string edited_load_error(const std::filesystem::path& src, const std::filesystem::path& dir,
                                     const std::function<void(nlohmann::json&)>& edit_config,
                                     const std::function<void(TensorMap&)>& edit_tensors, bool quantization_only,
                                     ThreadPool& pool) {
  std::ifstream in(src / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  edit_config(quantization_only ? config["quantization_config"] : config);
  std::ofstream(dir / "config.json") << config.dump();
  TensorMap t = read_tensors(src);
  edit_tensors(t);
  write_safetensors(dir / "model.safetensors", t);
  return load_error(dir, pool);
}

}  // namespace aerie::testing
