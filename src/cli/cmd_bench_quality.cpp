// aerie bench-quality: what quantising the weights costs in accuracy. One token sequence is prefilled through
// the model as stored and through a quantised copy (--weights int8 or int4); per position, the KL divergence
// KL(as-stored || quantised) of the next-token distributions, whether the greedy (top-1) tokens agree and
// the largest logit difference. Activations default to split bf16 (float32-exact) so the figures measure
// the weights. The sequence is --ids or --prompt-tokens seeded pseudo-random ids: with random-weight
// checkpoints there is no natural text, and their sharp distributions make the KL pessimistic.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "cli/common.h"
#include "core/error.h"

namespace aerie::cli {
namespace {

std::vector<float> prefill_logits(Model& model, const std::vector<int64_t>& ids) {
  const int64_t n = int64_t(ids.size());
  KvCache kv = model.make_kv_cache(n, KvDType::kF32);
  const SequenceRows seq{0, n, &kv};
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  const ForwardOutput out = model.forward(StepBatch{ids, std::span(&seq, 1), rows, {}});
  return std::vector<float>(out.logits, out.logits + out.n_logit_rows * out.n_vocab);
}

// log-softmax of one row, in double.
std::vector<double> log_softmax(const float* x, int64_t n) {
  const double mx = *std::max_element(x, x + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(x[i]) - mx);
  const double log_sum = mx + std::log(sum);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = double(x[i]) - log_sum;
  return out;
}

}  // namespace

int run_bench_quality(const std::vector<std::string>& argv) {
  std::vector<OptionSpec> specs = model_options();
  specs.push_back({"--ids", true, "comma-separated token ids to score (default: --prompt-tokens seeded ids)"});
  specs.push_back({"--prompt-tokens", true, "length of the seeded pseudo-random sequence (default 128)"});
  specs.push_back({"--seed", true, "seed of that sequence (default 1)"});
  specs.push_back({"--help", false, "this text"});
  const Args args(argv, specs);
  if (args.has("--help")) {
    std::fputs(usage("bench-quality", specs).c_str(), stdout);
    return 0;
  }
  const WeightChoice quantised = weight_choice(args);
  AERIE_CHECK(quantised.format != WeightFormat::kAsStored, "bench-quality compares a quantised copy with the "
              "model as stored: give --weights int8 or int4");
  apply_bf16_activations(args, ops::Bf16Activations::kSplit);
  ThreadPool pool(thread_count(args));
  const bool quiet = args.has("--quiet");
  WeightChoice stored = quantised;
  stored.format = WeightFormat::kAsStored;
  std::unique_ptr<Model> reference = load_model_verbose(args.required("--model"), pool, quiet, stored);
  std::unique_ptr<Model> model = load_model_verbose(args.required("--model"), pool, quiet, quantised);
  std::vector<int64_t> ids;
  if (args.has("--ids")) {
    ids = args.integers("--ids");
  } else {
    const int64_t n = args.integer("--prompt-tokens", 128);
    AERIE_CHECK(n >= 1, "--prompt-tokens must be at least 1, got ", n);
    std::mt19937_64 rng(uint64_t(args.integer("--seed", 1)));
    for (int64_t i = 0; i < n; ++i) ids.push_back(int64_t(rng() % uint64_t(reference->n_vocab())));
  }
  const int64_t vocab = reference->n_vocab();
  const std::vector<float> p = prefill_logits(*reference, ids);
  const std::vector<float> q = prefill_logits(*model, ids);
  double kl_sum = 0, kl_max = 0, logit_diff = 0, logit_scale = 0;
  int64_t agree = 0;
  for (size_t r = 0; r < ids.size(); ++r) {
    const float* pr = p.data() + r * size_t(vocab);
    const float* qr = q.data() + r * size_t(vocab);
    const std::vector<double> lp = log_softmax(pr, vocab), lq = log_softmax(qr, vocab);
    double kl = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      kl += std::exp(lp[size_t(i)]) * (lp[size_t(i)] - lq[size_t(i)]);
      logit_diff = std::max(logit_diff, std::abs(double(pr[i]) - double(qr[i])));
      logit_scale = std::max(logit_scale, std::abs(double(pr[i])));
    }
    kl_sum += kl;
    kl_max = std::max(kl_max, kl);
    agree += std::max_element(pr, pr + vocab) - pr == std::max_element(qr, qr + vocab) - qr;
  }
  const double n = double(ids.size());
  std::printf("weights %s vs as stored, %zu positions: mean KL %.5f nats (max %.4f), top-1 agreement %.1f%% "
              "(%lld/%zu), max |logit diff| %.3f of max |logit| %.2f; weight bytes per decode step %.3f GB vs %.3f GB\n",
              quantised.format == WeightFormat::kInt8 ? "int8" : "int4", ids.size(), kl_sum / n, kl_max,
              100.0 * double(agree) / n, (long long)agree, ids.size(), logit_diff, logit_scale,
              double(model->decode_weight_bytes()) / 1e9, double(reference->decode_weight_bytes()) / 1e9);
  return 0;
}

}  // namespace aerie::cli
