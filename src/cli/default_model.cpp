#include "cli/default_model.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"

namespace aerie::cli {
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> candidate_dirs() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("AERIE_MODELS_DIR"); env != nullptr && *env != '\0') dirs.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back(exe.parent_path() / "models");
    dirs.push_back(exe.parent_path().parent_path() / "models");
  }
#ifdef AERIE_SOURCE_DIR
  dirs.push_back(fs::path(AERIE_SOURCE_DIR) / "models");
#endif
  return dirs;
}

}  // namespace

std::optional<fs::path> shipped_models_dir() {
  for (const fs::path& dir : candidate_dirs()) {
    std::error_code ec;
    if (fs::is_regular_file(dir / kDefaultModelName / "config.json", ec)) return dir;
  }
  return std::nullopt;
}

ModelChoice choose_model(const Args& args, bool quiet) {
  if (args.has("--model")) return {args.str("--model"), {}};
  const std::optional<fs::path> dir = shipped_models_dir();
  if (!dir) {
    std::string looked;
    for (const fs::path& d : candidate_dirs()) looked += str_cat(looked.empty() ? "" : ", ", d.string());
    throw Error(str_cat("no --model given and the shipped model ", kDefaultModelName, " was not found (looked in ",
                        looked, "; set AERIE_MODELS_DIR to the folder that holds it)"));
  }
  ModelChoice choice{*dir / kDefaultModelName, {}};
  std::error_code ec;
  if (fs::is_regular_file(*dir / kDefaultDraftName / "config.json", ec)) choice.default_draft = *dir / kDefaultDraftName;
  if (!quiet)
    std::fprintf(stderr, "no --model given: using the shipped %s%s\n", choice.model.string().c_str(),
                 choice.default_draft.empty() ? "" : str_cat(" with its EAGLE-3 head ", kDefaultDraftName).c_str());
  return choice;
}

}  // namespace aerie::cli
