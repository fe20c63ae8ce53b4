// aerie logits: one prefill of the given ids; float32 logits for every position as .npy [n, n_vocab],
// and optionally hidden states per requested layer as PREFIX<layer>.npy [n, n_embd]. Layer i is the
// residual stream entering decoder layer i (0 = embedding output, n_layer = the last layer's output
// before the final norm); "final_norm" is the normalised state the head reads.
#include <cstdio>
#include <numeric>
#include <sstream>

#include "cli/common.h"
#include "cli/draft.h"
#include "cli/options.h"
#include "core/error.h"
#include "io/npy.h"

namespace aerie::cli {
namespace {

std::vector<int> parse_layers(const std::string& text, int64_t n_layer) {
  std::vector<int> layers;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item == "final_norm") {
      layers.push_back(kFinalNormLayer);
      continue;
    }
    const std::vector<int64_t> value = parse_int_list(item, "--hidden-layers");
    AERIE_CHECK(value[0] >= 0 && value[0] <= n_layer, "--hidden-layers: layer ", value[0], " is outside [0, ",
                n_layer, "] (or final_norm)");
    layers.push_back(int(value[0]));
  }
  return layers;
}

// Teacher-forced head logits: the target prefills x_0..x_{n-1} capturing the head's layers, then the head
// runs rows t = 0..n-2 with the target's features at t and token x_{t+1}; row t predicts x_{t+2}.
int write_draft_logits(Model& target, DraftHead& head, const std::vector<int64_t>& ids, KvDType kv_dtype,
                       const std::string& out_path) {
  const int64_t n = int64_t(ids.size());
  AERIE_CHECK(n >= 2, "--draft logits need at least 2 ids (row t pairs the feature at t with token t+1)");
  KvCache kv = target.make_kv_cache(n, kv_dtype);
  const SequenceRows seq{0, n, &kv};
  const StepBatch batch{ids, std::span(&seq, 1), {}, head.target_layers()};
  const ForwardOutput out = target.forward(batch);
  std::vector<const float*> parts;
  for (const CapturedHidden& h : out.hidden) parts.push_back(h.data);  // rows 0..n-2 are the first n-1
  KvCache head_kv = head.make_kv_cache(n - 1, kv_dtype);
  const SequenceRows head_seq{0, n - 1, &head_kv};
  std::vector<int64_t> rows(size_t(n - 1));
  std::iota(rows.begin(), rows.end(), 0);
  const DraftBatch draft{std::span(ids).subspan(1), FeatureSource::kTarget, parts, std::span(&head_seq, 1), rows};
  const DraftOutput logits = head.forward(draft);
  write_npy_f32(out_path, logits.logits, {n - 1, logits.n_vocab});
  std::fprintf(stderr, "wrote %s [%lld, %lld] (draft head, teacher-forced%s)\n", out_path.c_str(), (long long)(n - 1),
               (long long)logits.n_vocab, head.reduced_vocab() ? ", draft vocabulary" : "");
  return 0;
}

}  // namespace

int run_logits(const std::vector<std::string>& argv) {
  const Args args = parse_options(Command::kLogits, argv);
  if (args.has("--help")) {
    std::fputs(command_usage(Command::kLogits).c_str(), stdout);
    return 0;
  }
  const std::vector<int64_t> ids = args.integers("--ids");
  const std::string out_path = args.required("--out");
  apply_bf16_activations(args);                   // the command's default: split, float32-exact
  const KvDType kv_dtype = kv_cache_dtype(args);  // the command's default: f32, exact KV unless asked
  // Tensor parallel: every rank runs the same prefill; rank 0 alone writes the files.
  const std::unique_ptr<dist::Communicator> ranks = tensor_parallel_ranks(args);
  const bool writer = ranks->rank() == 0;
  ThreadPool pool(thread_count(args));
  std::unique_ptr<Model> model = load_model_verbose(args.required("--model"), pool, args.has("--quiet") || !writer,
                                                    weight_choice(args), ranks.get());
  if (args.has("--draft")) {
    AERIE_CHECK(ranks->size() == 1, "--draft with --tensor-parallel is not supported yet (the target alone runs "
                                    "tensor parallel)");
    AERIE_CHECK(!args.has("--hidden-layers"), "--hidden-layers applies to the target; use it without --draft");
    const std::unique_ptr<Drafter> drafter = load_draft_verbose(args, *model, pool, args.has("--quiet"));
    AERIE_CHECK(drafter != nullptr, "--draft none: no head to write logits of");
    AERIE_CHECK(drafter->as_head() != nullptr, "logits: ", drafter->describe(), " has no logits to write");
    return write_draft_logits(*model, *drafter->as_head(), ids, kv_dtype, out_path);
  }

  std::vector<int> layers;
  if (args.has("--hidden-layers")) {
    layers = parse_layers(args.str("--hidden-layers"), model->n_layer());
    AERIE_CHECK(args.has("--hidden-out"), "--hidden-layers needs --hidden-out PREFIX");
  }
  const int64_t n = int64_t(ids.size());
  KvCache kv = model->make_kv_cache(n, kv_dtype);
  const SequenceRows seq{0, n, &kv};
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  const StepBatch batch{ids, std::span(&seq, 1), rows, layers};
  const ForwardOutput out = model->forward(batch);
  if (!writer) return 0;
  write_npy_f32(out_path, out.logits, {n, out.n_vocab});
  for (const CapturedHidden& h : out.hidden) {
    const std::string name = h.layer == kFinalNormLayer ? "final_norm" : std::to_string(h.layer);
    write_npy_f32(args.str("--hidden-out") + name + ".npy", h.data, {n, out.n_embd});
  }
  std::fprintf(stderr, "wrote %s [%lld, %lld]%s\n", out_path.c_str(), (long long)n, (long long)out.n_vocab,
               layers.empty() ? "" : " and hidden states");
  return 0;
}

}  // namespace aerie::cli
