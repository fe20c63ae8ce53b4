#include "cli/common.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <thread>

#include "core/cpu_features.h"
#include "core/error.h"
#include "models/deepseek_v3.h"
#include "models/registry.h"

namespace aerie::cli {

namespace {

// "weights in hugepages: 98% in 2 MiB pages, copied in 3.1 s", "weights mapped (<why not huge pages>)".
std::string describe_weight_memory(const WeightMemoryReport& r) {
  if (r.used == WeightMemory::kHugePages) {
    const double share = r.file_bytes > 0 ? 100.0 * double(r.huge_page_bytes) / double(r.file_bytes) : 0.0;
    return str_cat("weights in hugepages: ", int(std::min(share, 100.0) + 0.5), "% in 2 MiB pages, copied in ",
                   int(r.copy_seconds * 10 + 0.5) / 10.0, " s");
  }
  return r.note.empty() ? "weights mapped" : str_cat("weights mapped (", r.note, ")");
}

}  // namespace

std::unique_ptr<Model> load_model_verbose(const std::filesystem::path& dir, ThreadPool& pool, bool quiet,
                                          const WeightChoice& weights, dist::Communicator* ranks) {
  AERIE_CHECK(weights.tensor_parallel == 1 || ranks != nullptr,
              "--tensor-parallel: only `aerie generate`, `serve`, `logits`, `bench` and `bench-engine` run tensor parallel so "
              "far");
  const bool tty = isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  LoadOptions options;
  options.communicator = ranks;
  options.layout = weights.layout;
  options.weight_memory = weights.memory;
  options.weights = weights.format;
  options.int8_group = weights.int8_group;
  options.int4_group = weights.int4_group;
  WeightMemoryReport report;
  options.weight_memory_report = &report;
  if (tty && !quiet) {
    options.progress = [](const LoadProgress& p) {
      if (p.tensors_total == 0) {  // copying the files into huge-page memory
        std::fprintf(stderr, "\rreading weights: %.2f/%.2f GB", double(p.bytes_done) / 1e9,
                     double(p.bytes_total) / 1e9);
      } else {
        std::fprintf(stderr, "\rloading: %lld/%lld tensors, %.2f/%.2f GB", (long long)p.tensors_done,
                     (long long)p.tensors_total, double(p.bytes_done) / 1e9, double(p.bytes_total) / 1e9);
      }
      std::fflush(stderr);
    };
  }
  std::unique_ptr<Model> model = load_model(dir, pool, options);
  if (!quiet) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string format = weights.format == WeightFormat::kInt8
                                   ? str_cat("; projections quantised to int8 at load (",
                                             weights.int8_group == 0 ? std::string("per channel")
                                                                     : str_cat("groups of ", weights.int8_group),
                                             ")")
                                   : weights.format == WeightFormat::kInt4
                                   ? str_cat("; projections quantised to int4 at load (",
                                             weights.int4_group == 0 ? std::string("per channel")
                                                                     : str_cat("groups of ", weights.int4_group),
                                             ")")
                                   : std::string();
    std::fprintf(stderr, "%sloaded %s in %.2f s (%s; %s%s; %d threads; cpu: %s)\n", tty ? "\r\033[K" : "",
                 dir.string().c_str(), seconds, model->describe().c_str(), describe_weight_memory(report).c_str(),
                 format.c_str(),
                 pool.n_threads(), cpu_features().describe().c_str());
  }
  return model;
}

WeightMemory weight_memory(const Args& args) {
  return parse_weight_memory(args.str("--weight-memory"), "--weight-memory");
}

WeightChoice weight_choice(const Args& args) {
  WeightChoice c;
  c.memory = weight_memory(args);
  c.format = parse_weight_format(args.str("--weights"), "--weights");
  c.int8_group = args.integer("--int8-group");
  AERIE_CHECK(c.int8_group == 0 || (c.int8_group > 0 && c.int8_group % 32 == 0), "--int8-group must be 0 (one "
              "scale per output channel) or a positive multiple of 32, got ", c.int8_group);
  // The groups apply to the target (--weights) and the draft head (--draft-weights, cli/draft.h).
  const std::string draft_format = args.has("--draft-weights") ? args.str("--draft-weights") : "";
  AERIE_CHECK(c.int8_group == 0 || c.format == WeightFormat::kInt8 || draft_format == "int8",
              "--int8-group needs --weights int8 or --draft-weights int8");
  c.int4_group = args.integer("--int4-group");
  AERIE_CHECK(c.int4_group == 0 || (c.int4_group > 0 && c.int4_group % 64 == 0), "--int4-group must be 0 (one "
              "group per output channel) or a positive multiple of 64, got ", c.int4_group);
  AERIE_CHECK(!args.has("--int4-group") || c.format == WeightFormat::kInt4 || draft_format == "int4",
              "--int4-group needs --weights int4 or --draft-weights int4");
  c.tensor_parallel = parallel_ranks(args, &c.layout);
  return c;
}

EngineTarget load_engine_target(const std::filesystem::path& dir, ThreadPool& pool, bool quiet,
                                const WeightChoice& weights, dist::Communicator& ranks) {
  EngineTarget target;
  target.shard = load_model_verbose(dir, pool, quiet, weights, &ranks);
  if (ranks.size() > 1) target.driver = std::make_unique<TensorParallelDriver>(*target.shard, ranks);
  return target;
}

std::vector<int64_t> expert_load(const Model& model) {
  const auto* deepseek = dynamic_cast<const DeepseekV3Model*>(&model);
  return deepseek != nullptr ? deepseek->expert_load() : std::vector<int64_t>();
}

std::string describe_expert_load(const std::vector<int64_t>& load) {
  int64_t total = 0;
  for (int64_t rows : load) total += rows;
  if (load.size() < 2 || total == 0) return "";
  std::string out = "; expert rows per rank:";
  for (int64_t rows : load) out += str_cat(" ", rows, " (", int(100.0 * double(rows) / double(total) + 0.5), "%)");
  return out;
}

int follow_tensor_parallel(const std::filesystem::path& model_dir, dist::Communicator& ranks, const Args& args,
                           const WeightChoice& weights) {
  apply_bf16_activations(args);  // the same arithmetic as rank 0's
  ThreadPool pool(thread_count(args));
  const std::unique_ptr<Model> model = load_model_verbose(model_dir, pool, /*quiet=*/true, weights, &ranks);
  run_tensor_parallel_follower(*model, ranks);
  const auto* deepseek = dynamic_cast<const DeepseekV3Model*>(model.get());
  if (deepseek != nullptr && deepseek->kv_partitions() > 1)
    std::fprintf(stderr, "aerie: rank %d ran the attention of %lld rows (data-parallel attention)\n", ranks.rank(),
                 (long long)deepseek->owned_rows_run());
  return 0;
}

int64_t parallel_ranks(const Args& args, ParallelLayout* layout) {
  // Each at least 1: their ranges (cli/options.cpp) refuse anything else as the arguments are parsed.
  const int64_t t = args.integer("--tensor-parallel"), e = args.integer("--expert-parallel"),
                d = args.integer("--data-parallel");
  AERIE_CHECK(t == 1 || e == 1 || t == e, "--tensor-parallel ", t, " and --expert-parallel ", e, " differ: tensor "
              "parallelism already shares the routed experts out over its ranks; give one of the two");
  AERIE_CHECK(d == 1 || t == 1, "--data-parallel ", d, " and --tensor-parallel ", t, " exclude each other: data-parallel "
              "attention keeps every head of a sequence on one rank");
  AERIE_CHECK(d == 1 || e == 1 || d == e, "--data-parallel ", d, " and --expert-parallel ", e, " differ: the same ",
              "ranks run attention by sequence and share the experts out");
  if (layout != nullptr)
    *layout = d > 1 ? ParallelLayout::kData : t == 1 && e > 1 ? ParallelLayout::kExpert : ParallelLayout::kTensor;
  return std::max({t, e, d});
}

std::unique_ptr<dist::Communicator> tensor_parallel_ranks(const Args& args) {
  ParallelLayout layout;
  const int64_t t = parallel_ranks(args, &layout);
  const char* flag = layout == ParallelLayout::kData     ? "--data-parallel"
                     : layout == ParallelLayout::kExpert ? "--expert-parallel"
                                                         : "--tensor-parallel";
  std::unique_ptr<dist::Communicator> ranks = dist::make_world_communicator();
  AERIE_CHECK(ranks->size() == t, flag, " ", t, " needs exactly ", t, " ranks: run `mpirun -np ", t,
              " aerie ... ", flag, " ", t, "`; this run has ", ranks->size(),
              dist::mpi_available() ? "" : " (and this aerie was built without MPI: install libopenmpi-dev)");
  if (ranks->rank() != 0) {  // the others compute the same tokens; one copy of the output is enough
    const int null_fd = ::open("/dev/null", O_WRONLY);
    AERIE_CHECK(null_fd >= 0 && ::dup2(null_fd, STDOUT_FILENO) >= 0, "rank ", ranks->rank(),
                ": cannot send stdout to /dev/null");
    ::close(null_fd);
  }
  return ranks;
}

void apply_bf16_activations(const Args& args) {
  const std::string mode = args.str("--bf16-activations");  // the flag, or the command's default ("" if none)
  if (mode.empty() || (!args.has("--bf16-activations") && std::getenv("AERIE_BF16_ACTIVATIONS") != nullptr)) return;
  AERIE_CHECK(mode == "split" || mode == "rounded", "--bf16-activations must be split or rounded, got ", mode);
  ops::set_bf16_activations(mode == "split" ? ops::Bf16Activations::kSplit : ops::Bf16Activations::kRounded);
}

KvDType kv_cache_dtype(const Args& args) {
  const std::string name = args.str("--kv-cache-dtype");
  KvDType dtype;
  AERIE_CHECK(kv_dtype_from_name(name, &dtype), "--kv-cache-dtype must be auto, bf16, f32 or fp8, got '", name, "'");
  return dtype;
}

int thread_count(const Args& args) {
  const int64_t n = args.integer("--threads");
  if (n > 0) return int(n);
  // Under mpirun the ranks on this machine share its cores (Open MPI names how many there are).
  const char* local_ranks = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int sharing = local_ranks != nullptr ? std::max(1, std::atoi(local_ranks)) : 1;
  return int(std::max(1u, std::thread::hardware_concurrency() / unsigned(sharing)));
}

}  // namespace aerie::cli
