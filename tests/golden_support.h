// What the tests against committed golden data share: the case folders of a family (tests/data/<family>/
// <case>/), reading their JSON, and the error measure their tolerances are written in.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace aerie::testing {

// The names of the folders under `root` that hold `marker` (e.g. "golden.json"), sorted; none when root is
// missing (the parameterised suite is then empty and a CasesArePresent test says so).
inline std::vector<std::string> golden_case_names(const std::filesystem::path& root, const char* marker) {
  std::vector<std::string> names;
  if (!std::filesystem::exists(root)) return names;
  for (const auto& entry : std::filesystem::directory_iterator(root))
    if (entry.is_directory() && std::filesystem::exists(entry.path() / marker)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Largest |got - ref| over the largest |ref|: the error relative to the scale of the figures.
inline double relative_max_error(const float* got, const float* ref, size_t n) {
  double max_diff = 0, max_ref = 1e-30;
  for (size_t i = 0; i < n; ++i) {
    max_diff = std::max(max_diff, std::fabs(double(got[i]) - double(ref[i])));
    max_ref = std::max(max_ref, std::fabs(double(ref[i])));
  }
  return max_diff / max_ref;
}
inline double relative_max_error(const float* got, const std::vector<float>& ref) {
  return relative_max_error(got, ref.data(), ref.size());
}

}  // namespace aerie::testing
