// Pieces shared by the subcommands: loading a model with terminal progress, thread counts.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "core/thread_pool.h"
#include "dist/communicator.h"
#include "io/weight_memory.h"
#include "models/model.h"
#include "models/tensor_parallel_driver.h"
#include "ops/ops.h"
#include "quant/quantize.h"

namespace aerie::cli {

// Loads the model in `dir`, printing progress to stderr when it is a terminal (and, unless quiet, a
// one-line summary with the load time and where the weights live: mapped, or in huge pages and how much of
// them the kernel gave 2 MiB pages).
// Where the weights live and in what format: --weight-memory, --weights, --int8-group, --int4-group.
struct WeightChoice {
  WeightMemory memory = WeightMemory::kMapped;
  WeightFormat format = WeightFormat::kAsStored;
  int64_t int8_group = 0;
  int64_t int4_group = 128;
  int64_t tensor_parallel = 1;  // ranks the model is spread over: --tensor-, --expert- or --data-parallel
  ParallelLayout layout = ParallelLayout::kTensor;  // kExpert under --expert-parallel, kData under --data-parallel
};
// With weights.tensor_parallel > 1, `ranks` (from tensor_parallel_ranks) must be given: commands that pass
// none are refused, naming the ones that run tensor parallel.
std::unique_ptr<Model> load_model_verbose(const std::filesystem::path& dir, ThreadPool& pool, bool quiet,
                                          const WeightChoice& weights, dist::Communicator* ranks = nullptr);

// The ranks of --tensor-parallel T: the MPI world when launched by mpirun, else this process
// alone. Throws aerie::Error unless the world has exactly T ranks (`mpirun -np T aerie ... --tensor-parallel
// T`). Every rank runs the same steps; on ranks other than 0, stdout goes to /dev/null so only rank 0
// writes output (callers also write files and summaries on rank 0 only).
std::unique_ptr<dist::Communicator> tensor_parallel_ranks(const Args& args);
// The ranks --tensor-parallel T, --expert-parallel E or --data-parallel D ask for (E given with T or D must
// equal it; T and D exclude each other), and with `layout` which layout (models/model.h).
int64_t parallel_ranks(const Args& args, ParallelLayout* layout = nullptr);

// The target model of an engine command (serve, generate, bench-engine) on rank 0: this rank's weights
// (all of them in one process), driving the other ranks' forwards under tensor parallelism.
struct EngineTarget {
  std::unique_ptr<Model> shard;
  std::unique_ptr<TensorParallelDriver> driver;  // only when ranks.size() > 1
  Model& model() { return driver ? static_cast<Model&>(*driver) : *shard; }
};
EngineTarget load_engine_target(const std::filesystem::path& dir, ThreadPool& pool, bool quiet,
                                const WeightChoice& weights, dist::Communicator& ranks);

// The routed (token, expert) rows each rank has run since load (DeepseekV3Model::expert_load); empty for a
// model without routed experts. describe_expert_load: "; expert rows per rank: 120 (52%) 110 (48%)", or "".
std::vector<int64_t> expert_load(const Model& model);
std::string describe_expert_load(const std::vector<int64_t>& load);

// Ranks other than 0 of a tensor-parallel engine command (serve, bench-engine, generate): loads this
// rank's shards (with args' activation mode and thread count) and repeats rank 0's forwards until rank 0
// stops them (models/tensor_parallel_driver.h); returns the exit status.
int follow_tensor_parallel(const std::filesystem::path& model_dir, dist::Communicator& ranks, const Args& args,
                           const WeightChoice& weights);

// --weight-memory mapped|hugepages|auto; its default is the command's (cli/options.h): huge pages make
// single-thread decode stream the weights 5-10 points of the bandwidth closer to the machine's limit (bench's
// per-step ratio, Llama 1B and 8B shapes), for a copy at load (15-36 s for 16 GB from the page cache here):
// a server, which loads once, defaults to auto; one-shot commands stay mapped (io/weight_memory.h).
WeightMemory weight_memory(const Args& args);
// weight_memory plus --weights as-stored|int8|int4, --int8-group N (0 or a multiple of 32) and --int4-group N
// (0 or a multiple of 64).
WeightChoice weight_choice(const Args& args);

// --bf16-activations split|rounded: sets the process-wide mode (ops::set_bf16_activations). Without the
// flag the mode stays what AERIE_BF16_ACTIVATIONS or the library default (rounded) made it, unless the
// command has a default of its own and the variable is unset (`logits`, a reference check, defaults to split).
void apply_bf16_activations(const Args& args);

// --kv-cache-dtype auto|bf16|f32|fp8 (vLLM's flag; auto is bf16): what the KV cache stores (core/kv_dtype.h);
// the command's default without the flag (`logits`, a reference check, defaults to f32).
KvDType kv_cache_dtype(const Args& args);

// --threads N (0: every core, shared among the ranks of this machine under mpirun).
int thread_count(const Args& args);

int run_generate(const std::vector<std::string>& argv);
int run_logits(const std::vector<std::string>& argv);
int run_bench(const std::vector<std::string>& argv);
int run_tokenize(const std::vector<std::string>& argv);
int run_bench_spec(const std::vector<std::string>& argv);
int run_bench_engine(const std::vector<std::string>& argv);
int run_serve(const std::vector<std::string>& argv);
int run_bench_accept(const std::vector<std::string>& argv);
int run_bench_quality(const std::vector<std::string>& argv);

}  // namespace aerie::cli
