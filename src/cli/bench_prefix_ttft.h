// aerie bench-engine --prefix-ttft: time to first token of one long prompt cold, from the RAM prefix cache
// and from the --kv-cache-dir disk tier (bench_prefix_ttft.cpp says how each is measured).
#pragma once

#include <filesystem>

#include "cli/args.h"
#include "core/thread_pool.h"
#include "models/model.h"

namespace aerie::cli {

// Prints one line (or with --json one object); returns the exit status.
int run_prefix_ttft(const Args& args, Model& target, ThreadPool& pool, const std::filesystem::path& model_dir);

}  // namespace aerie::cli
