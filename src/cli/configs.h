// The config structs the commands fill, each built from the parsed options (cli/options.h) in one function
// that every command shares. A field whose option the command does not take keeps the struct's own
// default; a default the table states is read from there, never retyped here.
#pragma once

#include <filesystem>
#include <optional>

#include "cli/args.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "sample/penalties.h"
#include "sample/sampling.h"
#include "server/http_server.h"
#include "spec/draft_head.h"
#include "spec/spec_options.h"

namespace aerie::cli {

// --temperature, --top-k, --top-p, --min-p, --seed; validated.
SamplingParams sampling_params(const Args& args);
// --presence-penalty, --frequency-penalty, --repetition-penalty; validated.
Penalties penalties(const Args& args);
// generate's request: --max-tokens, --max-length, --kv-cache-dtype, --deterministic, sampling and penalties.
GenerateOptions generate_options(const Args& args);

// serve's and bench-engine's engine: --max-num-seqs, --max-batch-tokens, --max-prefill-rows-while-decoding,
// --kv-cache-memory, --kv-cache-dtype, --max-length, --max-queue (the engine's queue one beyond the
// server's, so the server's 429 answers first), --deterministic, --num-speculative-tokens-per-batch-size.
// The speculative options are spec_options' (or bench-engine's runs).
EngineConfig engine_config(const Args& args);

// With a drafter: --num-speculative-tokens (one K), --draft-proposal, the --spec-tree-* shape and
// --synthetic-acceptance with its model's options. Without one, each of those the command takes is refused,
// naming it ("... needs --draft").
SpecOptions spec_options(const Args& args, Drafter* drafter);
// The synthetic acceptance model's --synthetic-depth-decay and --synthetic-sibling-rate (given or default)
// into `spec` (the rate itself is --synthetic-acceptance's, or bench-spec's --rates).
void apply_synthetic_model(const Args& args, SpecOptions& spec);

// --thinking-acceptance relaxed with --relaxed-top-k and --relaxed-delta, validated; empty when strict.
std::optional<RelaxedAcceptance> relaxed_acceptance(const Args& args);

// --kv-cache-dir DIR and --kv-cache-disk-bytes N (EngineConfig::kv_disk; no dir without the flag), with the
// identity of what computes the KV rows: the checkpoint at `model_dir` (kv/disk_identity.h), --weights and
// its groups, the bf16 activation mode and the kernels' instruction set; for a draft head, --draft and the
// options that change its rows. Refused beside --tensor-, --expert- or --data-parallel.
KvDiskOptions kv_disk_options(const Args& args, const std::filesystem::path& model_dir);

// The LoRA adapters of --lora-modules (serve) or --lora (generate, bench-accept; one adapter, index 0),
// loaded against `target` with --max-lora-rank; null when none is given. Prints a line per adapter unless
// quiet. Throws aerie::Error naming the adapter and what does not fit.
std::shared_ptr<const LoraSet> lora_adapters(const Args& args, const Model& target, bool quiet);
// kv_disk_options' checks that need no model (a directory that cannot be written, a flag without its
// partner), for a command to run before it loads one.
void check_kv_disk_flags(const Args& args);

// serve's HTTP side: --host, --port, --api-key, --served-model-name (absent: --model), --http-threads,
// --max-queue, and the request limits (--limit GROUP.FIELD=VALUE,..., then the specific flags over it).
server::ServerOptions server_options(const Args& args);

}  // namespace aerie::cli
