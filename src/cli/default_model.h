// The model a command runs when it is given no --model: aerie's own small trained family, shipped in the
// repository's models/ folder — the target models/aerie-tiny-llama and its EAGLE-3 head
// models/aerie-tiny-llama-eagle3 — so that a first `aerie generate --prompt ...` shows real text and a
// real speculative speedup without downloading anything.
//
// The models/ folder is looked for in this order: $AERIE_MODELS_DIR; models/ beside the executable or one
// folder above it (an installed tree, or build/aerie in the source tree); the source tree the binary was
// built from.
#pragma once

#include <filesystem>
#include <optional>

#include "cli/args.h"

namespace aerie::cli {

inline constexpr const char* kDefaultModelName = "aerie-tiny-llama";
inline constexpr const char* kDefaultDraftName = "aerie-tiny-llama-eagle3";
// K for the shipped head when --num-speculative-tokens is not given (its best measured speedup).
inline constexpr int64_t kDefaultDraftK = 2;

// The first models/ folder that holds the default model, or nothing.
std::optional<std::filesystem::path> shipped_models_dir();

struct ModelChoice {
  std::filesystem::path model;
  // The shipped EAGLE-3 head when the model is the default one (empty otherwise): the draft to use when
  // --draft is absent. `--draft none` turns it off.
  std::filesystem::path default_draft;
};

// --model DIR, or the shipped default (printing which one to stderr unless quiet); an aerie::Error that
// says where it looked when there is neither.
ModelChoice choose_model(const Args& args, bool quiet);

}  // namespace aerie::cli
