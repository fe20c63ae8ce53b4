// aerie bench-quality: what quantising the weights costs in accuracy. One token sequence is scored by the
// model as stored with split bf16 activations (float32-exact: the reference) and by a quantised copy
// (--weights int8 or int4) the way decoding runs it: in forwards of --chunk rows (default 16, below the
// GEMM threshold, so the decode and verification kernels run) with the activation mode of
// --bf16-activations (default rounded, what generate and serve use). Per position: KL(reference ||
// quantised) of the next-token distributions, whether the greedy (top-1) tokens agree and the largest logit
// difference. The same figures for the model as stored in the same activation mode are printed first: the
// cost BF16 users already accept. The sequence is --ids or --prompt-tokens seeded pseudo-random ids: with
// random-weight checkpoints there is no natural text, and their flat distributions make top-1 agreement
// pessimistic.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "cli/common.h"
#include "core/error.h"

namespace aerie::cli {
namespace {

// Logits of every position, the sequence fed in forwards of `chunk` rows.
std::vector<float> sequence_logits(Model& model, const std::vector<int64_t>& ids, int64_t chunk) {
  const int64_t n = int64_t(ids.size());
  KvCache kv = model.make_kv_cache(n, KvDType::kF32);
  std::vector<float> logits;
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t rows_n = std::min(chunk, n - begin);
    const SequenceRows seq{0, rows_n, &kv};
    std::vector<int64_t> rows(static_cast<size_t>(rows_n));
    std::iota(rows.begin(), rows.end(), 0);
    const ForwardOutput out =
        model.forward(StepBatch{std::span(ids).subspan(size_t(begin), size_t(rows_n)), std::span(&seq, 1), rows, {}});
    logits.insert(logits.end(), out.logits, out.logits + out.n_logit_rows * out.n_vocab);
  }
  return logits;
}

struct Quality {
  double mean_kl = 0, max_kl = 0, max_logit_diff = 0, max_logit = 0;
  int64_t agree = 0;
};

Quality compare(const std::vector<float>& p, const std::vector<float>& q, int64_t n_rows, int64_t vocab);

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

Quality compare(const std::vector<float>& p, const std::vector<float>& q, int64_t n_rows, int64_t vocab) {
  Quality out;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* pr = p.data() + r * vocab;
    const float* qr = q.data() + r * vocab;
    const std::vector<double> lp = log_softmax(pr, vocab), lq = log_softmax(qr, vocab);
    double kl = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      kl += std::exp(lp[size_t(i)]) * (lp[size_t(i)] - lq[size_t(i)]);
      out.max_logit_diff = std::max(out.max_logit_diff, std::abs(double(pr[i]) - double(qr[i])));
      out.max_logit = std::max(out.max_logit, std::abs(double(pr[i])));
    }
    out.mean_kl += kl / double(n_rows);
    out.max_kl = std::max(out.max_kl, kl);
    out.agree += std::max_element(pr, pr + vocab) - pr == std::max_element(qr, qr + vocab) - qr;
  }
  return out;
}

void print(const char* what, const Quality& x, int64_t n_rows) {
  std::printf("%s: mean KL %.5f nats (max %.4f), top-1 agreement %.1f%% (%lld/%lld), max |logit diff| %.3f of max "
              "|logit| %.2f\n",
              what, x.mean_kl, x.max_kl, 100.0 * double(x.agree) / double(n_rows), (long long)x.agree,
              (long long)n_rows, x.max_logit_diff, x.max_logit);
}

}  // namespace

int run_bench_quality(const std::vector<std::string>& argv) {
  std::vector<OptionSpec> specs = model_options();
  specs.push_back({"--ids", true, "comma-separated token ids to score (default: --prompt-tokens seeded ids)"});
  specs.push_back({"--prompt-tokens", true, "length of the seeded pseudo-random sequence (default 128)"});
  specs.push_back({"--seed", true, "seed of that sequence (default 1)"});
  specs.push_back({"--chunk", true, "rows per forward of the scored runs (default 16: the decode/verify kernels)"});
  specs.push_back({"--help", false, "this text"});
  const Args args(argv, specs);
  if (args.has("--help")) {
    std::fputs(usage("bench-quality", specs).c_str(), stdout);
    return 0;
  }
  const WeightChoice quantised = weight_choice(args);
  AERIE_CHECK(quantised.format != WeightFormat::kAsStored, "bench-quality compares a quantised copy with the "
              "model as stored: give --weights int8 or int4");
  apply_bf16_activations(args, ops::Bf16Activations::kRounded);
  const ops::Bf16Activations mode = ops::bf16_activations();
  const int64_t chunk = args.integer("--chunk", 16);
  AERIE_CHECK(chunk >= 1, "--chunk must be at least 1, got ", chunk);
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
  const int64_t vocab = reference->n_vocab(), n = int64_t(ids.size());
  ops::set_bf16_activations(ops::Bf16Activations::kSplit);
  const std::vector<float> p = sequence_logits(*reference, ids, n);
  ops::set_bf16_activations(mode);
  const std::vector<float> stored_logits = sequence_logits(*reference, ids, chunk);
  const std::vector<float> q = sequence_logits(*model, ids, chunk);
  const char* mode_name = mode == ops::Bf16Activations::kSplit ? "split" : "rounded";
  std::printf("%lld positions, reference: as stored, split activations, one prefill; scored: forwards of %lld rows, "
              "%s activations\n", (long long)n, (long long)chunk, mode_name);
  print("as stored", compare(p, stored_logits, n, vocab), n);
  print(quantised.format == WeightFormat::kInt8 ? "int8     " : "int4     ", compare(p, q, n, vocab), n);
  std::printf("weight bytes per decode step %.3f GB vs %.3f GB as stored\n", double(model->decode_weight_bytes()) / 1e9,
              double(reference->decode_weight_bytes()) / 1e9);
  return 0;
}

}  // namespace aerie::cli
