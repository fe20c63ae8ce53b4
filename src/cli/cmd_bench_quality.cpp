// aerie bench-quality: what quantising the weights costs in accuracy. One token sequence is scored by the
// model as stored with split bf16 activations (float32-exact: the reference) and by a quantised copy
// (--weights int8 or int4), or by another file of the same model as stored (--reference: a GGUF Q4_K_M
// against the BF16 GGUF or Hugging Face folder it was made from, as llama.cpp's `llama-perplexity
// --kl-divergence` compares them), the way decoding runs it: in forwards of --chunk rows (by default below the
// GEMM threshold, so the decode and verification kernels run) with the activation mode of
// --bf16-activations (by default rounded, what generate and serve use). Per position: KL(reference ||
// quantised) of the next-token distributions, whether the greedy (top-1) tokens agree and the largest logit
// difference. The same figures for the model as stored in the same activation mode are printed first: the
// cost BF16 users already accept. The sequence is --ids or --prompt-tokens seeded pseudo-random ids: with
// random-weight checkpoints there is no natural text, and their flat distributions make top-1 agreement
// pessimistic.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <random>

#include "cli/common.h"
#include "cli/options.h"
#include "cli/prompt.h"
#include "core/error.h"
#include "tokenizer/tokenizer_gguf.h"

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

// Figures over the scored positions of every chunk.
struct Quality {
  double sum_kl = 0, max_kl = 0, max_logit_diff = 0, max_logit = 0;
  int64_t agree = 0, rows = 0;
};

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

// Adds rows [row_begin, row_end) of one chunk's logits p (reference) and q (scored), [rows, vocab], to `out`.
void compare(const std::vector<float>& p, const std::vector<float>& q, int64_t row_begin, int64_t row_end,
             int64_t vocab, Quality& out) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* pr = p.data() + r * vocab;
    const float* qr = q.data() + r * vocab;
    const std::vector<double> lp = log_softmax(pr, vocab), lq = log_softmax(qr, vocab);
    double kl = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      kl += std::exp(lp[size_t(i)]) * (lp[size_t(i)] - lq[size_t(i)]);
      out.max_logit_diff = std::max(out.max_logit_diff, std::abs(double(pr[i]) - double(qr[i])));
      out.max_logit = std::max(out.max_logit, std::abs(double(pr[i])));
    }
    out.sum_kl += kl;
    out.max_kl = std::max(out.max_kl, kl);
    out.agree += std::max_element(pr, pr + vocab) - pr == std::max_element(qr, qr + vocab) - qr;
    out.rows += 1;
  }
}

void print(const char* what, const Quality& x) {
  const int64_t n_rows = x.rows;
  std::printf("%s: mean KL %.5f nats (max %.4f), top-1 agreement %.1f%% (%lld/%lld), max |logit diff| %.3f of max "
              "|logit| %.2f\n",
              what, x.sum_kl / double(n_rows), x.max_kl, 100.0 * double(x.agree) / double(n_rows), (long long)x.agree,
              (long long)n_rows, x.max_logit_diff, x.max_logit);
}

}  // namespace

int run_bench_quality(const std::vector<std::string>& argv) {
  const Args args = parse_options(Command::kBenchQuality, argv);
  if (args.has("--help")) {
    std::fputs(command_usage(Command::kBenchQuality).c_str(), stdout);
    return 0;
  }
  const WeightChoice quantised = weight_choice(args);
  const bool versus_reference = args.has("--reference");
  AERIE_CHECK(versus_reference || quantised.format != WeightFormat::kAsStored,
              "bench-quality compares a quantised copy with the model as stored: give --weights int8 or int4, or "
              "--reference MODEL (the file a quantised GGUF was made from)");
  AERIE_CHECK(!versus_reference || quantised.format == WeightFormat::kAsStored,
              "--reference compares two models as stored: leave out --weights");
  apply_bf16_activations(args);  // the command's default: rounded, what generate and serve use
  const ops::Bf16Activations mode = ops::bf16_activations();
  const int64_t chunk = args.integer("--chunk");  // at least 1 by its range
  ThreadPool pool(thread_count(args));
  const bool quiet = args.has("--quiet");
  WeightChoice stored = quantised;
  stored.format = WeightFormat::kAsStored;
  const std::string reference_path = versus_reference ? args.str("--reference") : args.required("--model");
  std::unique_ptr<Model> reference = load_model_verbose(reference_path, pool, quiet, stored);
  std::unique_ptr<Model> model = load_model_verbose(args.required("--model"), pool, quiet, quantised);
  AERIE_CHECK(model->n_vocab() == reference->n_vocab(), "--model has ", model->n_vocab(),
              " logits per position but --reference has ", reference->n_vocab(), ": not the same model");
  std::vector<int64_t> ids;
  std::optional<int32_t> bos;
  if (args.has("--file")) {
    const Tokenizer tokenizer = load_model_tokenizer(args.required("--model"));
    for (int32_t id : tokenizer.encode(read_text_file(args.str("--file"), "--file"), false)) ids.push_back(id);
    if (!tokenizer.encode("", true).empty()) bos = tokenizer.bos_id();
  } else if (args.has("--ids")) {
    ids = args.integers("--ids");
  } else {
    const int64_t n = args.integer("--prompt-tokens");  // at least 1 by its range
    std::mt19937_64 rng(uint64_t(args.integer("--seed")));
    for (int64_t i = 0; i < n; ++i) ids.push_back(int64_t(rng() % uint64_t(reference->n_vocab())));
  }
  const int64_t vocab = reference->n_vocab(), n = int64_t(ids.size());
  const int64_t ctx = args.has("--ctx") ? args.integer("--ctx") : n;
  AERIE_CHECK(ctx >= 2 && ctx <= n, "--ctx must be in [2, ", n, "] (the number of ids), got ", ctx);
  Quality stored_quality, model_quality;
  for (int64_t begin = 0; begin + ctx <= n; begin += ctx) {
    std::vector<int64_t> piece(ids.begin() + begin, ids.begin() + begin + ctx);
    if (args.has("--ctx") && bos) piece[0] = *bos;
    ops::set_bf16_activations(ops::Bf16Activations::kSplit);
    const std::vector<float> p = sequence_logits(*reference, piece, ctx);
    ops::set_bf16_activations(mode);
    const std::vector<float> stored_logits = sequence_logits(*reference, piece, chunk);
    const std::vector<float> q = sequence_logits(*model, piece, chunk);
    // llama-perplexity counts positions [ctx / 2, ctx - 1) of each chunk: the logits that predict a token.
    const int64_t first = args.has("--ctx") ? ctx / 2 : 0, last = args.has("--ctx") ? ctx - 1 : ctx;
    compare(p, stored_logits, first, last, vocab, stored_quality);
    compare(p, q, first, last, vocab, model_quality);
  }
  const char* mode_name = mode == ops::Bf16Activations::kSplit ? "split" : "rounded";
  std::printf("%lld positions scored in %lld chunks of %lld, reference: %s as stored, split activations, one prefill "
              "per chunk; scored: forwards of %lld rows, %s activations\n",
              (long long)model_quality.rows, (long long)(n / ctx), (long long)ctx, reference_path.c_str(),
              (long long)chunk, mode_name);
  print("reference", stored_quality);
  const char* label = versus_reference                          ? "--model  "
                      : quantised.format == WeightFormat::kInt8 ? "int8     "
                                                                : "int4     ";
  print(label, model_quality);
  std::printf("weight bytes per decode step %.3f GB vs %.3f GB as stored\n", double(model->decode_weight_bytes()) / 1e9,
              double(reference->decode_weight_bytes()) / 1e9);
  return 0;
}

}  // namespace aerie::cli
