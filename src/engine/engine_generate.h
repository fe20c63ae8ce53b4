// One request through the engine, with the generator's interface: what `aerie generate` runs, so that the
// CLI exercises the same path as the server (paged cache, batched verification, draft passes).
#pragma once

#include <span>

#include "engine/generator.h"
#include "models/model.h"
#include "spec/drafter.h"
#include "spec/spec_options.h"
#include "sched/spec_stats.h"

namespace aerie {

// The KV cache is sized for exactly this request (prompt + max_tokens + drafts). `draft` may be null.
// Stop ids are options.stop_token_ids only (the caller adds the model's EOS ids unless told not to).
// Throws aerie::Error when the request fails (FinishReason::kError: a failing forward, non-finite logits).
GenerateResult generate_with_engine(Model& target, Drafter* draft, ThreadPool& pool, std::span<const int64_t> prompt,
                                    const GenerateOptions& options, const SpecOptions& spec,
                                    const TokenCallback& on_token = nullptr, SpecStats* stats = nullptr);

}  // namespace aerie
