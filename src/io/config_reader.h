// ConfigReader: typed access to one JSON object of a model folder's config.json, shared by the Llama,
// DeepSeek and EAGLE config parsers. A config.json comes from the internet: every value is checked for its
// type and, where the model's math needs it, its range (a zero rms_norm_eps or a negative rope_theta would
// otherwise load and produce garbage). Every error names the file and the key, with its path inside the
// file ("rope_scaling.factor").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace aerie {

class ConfigReader {
 public:
  // `prefix` is put before every key in errors (e.g. "rope_scaling."). `j` and `source` outlive the reader.
  ConfigReader(const nlohmann::json& j, const std::string& source, std::string prefix = "");

  bool has(const char* key) const;  // present and not null
  void require(const char* key) const;

  int64_t integer(const char* key) const;
  int64_t integer(const char* key, int64_t fallback) const;
  // In [1, 2^31): sizes, counts, lengths.
  int64_t positive_integer(const char* key) const;
  int64_t positive_integer(const char* key, int64_t fallback) const;
  // >= 0.
  int64_t non_negative_integer(const char* key, int64_t fallback) const;
  // vocab_size and the like: positive and below LoadLimits::max_vocab_size.
  int64_t vocab_size(const char* key) const;

  double number(const char* key) const;
  double number(const char* key, double fallback) const;
  // Finite and > 0: rms_norm_eps, rope_theta, scaling factors.
  double positive_number(const char* key) const;
  double positive_number(const char* key, double fallback) const;
  // Finite and >= 0.
  double non_negative_number(const char* key, double fallback) const;

  bool boolean(const char* key, bool fallback) const;
  std::string string(const char* key, const std::string& fallback) const;
  // An id that may be an int, a list of ints, or null/absent.
  std::vector<int64_t> ids(const char* key) const;

  // The key as errors spell it: prefix + key.
  std::string name(const char* key) const;
  const std::string& source() const { return source_; }

 private:
  const nlohmann::json& j_;
  const std::string& source_;
  std::string prefix_;
};

}  // namespace aerie
