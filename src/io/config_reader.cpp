#include "io/config_reader.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/limits.h"

namespace aerie {

using nlohmann::json;

ConfigReader::ConfigReader(const json& j, const std::string& source, std::string prefix)
    : j_(j), source_(source), prefix_(std::move(prefix)) {}

std::string ConfigReader::name(const char* key) const { return prefix_ + key; }

bool ConfigReader::has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

void ConfigReader::require(const char* key) const {
  AERIE_CHECK(has(key), source_, ": missing required key '", name(key), "'");
}

int64_t ConfigReader::integer(const char* key) const {
  require(key);
  AERIE_CHECK(j_[key].is_number_integer(), source_, ": '", name(key), "' must be an integer");
  return j_[key].get<int64_t>();
}

int64_t ConfigReader::integer(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }

int64_t ConfigReader::positive_integer(const char* key) const {
  const int64_t v = integer(key);
  // Sizes fit 32 bits, so that the products of two of them the loaders form (n_head * head_dim) cannot
  // overflow; tensor shapes then bound them further.
  AERIE_CHECK(v > 0 && v <= std::numeric_limits<int32_t>::max(), source_, ": '", name(key),
              "' must be a positive integer below 2^31, got ", v);
  return v;
}

int64_t ConfigReader::positive_integer(const char* key, int64_t fallback) const {
  return has(key) ? positive_integer(key) : fallback;
}

int64_t ConfigReader::non_negative_integer(const char* key, int64_t fallback) const {
  if (!has(key)) return fallback;
  const int64_t v = integer(key);
  AERIE_CHECK(v >= 0, source_, ": '", name(key), "' must be >= 0, got ", v);
  return v;
}

int64_t ConfigReader::vocab_size(const char* key) const {
  const int64_t v = positive_integer(key);
  const int64_t limit = LoadLimits{}.max_vocab_size;
  AERIE_CHECK(v <= limit, source_, ": '", name(key), "' = ", v, " exceeds the limit of ", limit,
              " token ids (LoadLimits::max_vocab_size)");
  return v;
}

double ConfigReader::number(const char* key) const {
  require(key);
  AERIE_CHECK(j_[key].is_number(), source_, ": '", name(key), "' must be a number");
  return j_[key].get<double>();
}

double ConfigReader::number(const char* key, double fallback) const { return has(key) ? number(key) : fallback; }

double ConfigReader::positive_number(const char* key) const {
  const double v = number(key);
  // Written so that NaN fails too.
  AERIE_CHECK(std::isfinite(v) && v > 0, source_, ": '", name(key), "' must be a positive finite number, got ", v);
  return v;
}

double ConfigReader::positive_number(const char* key, double fallback) const {
  return has(key) ? positive_number(key) : fallback;
}

double ConfigReader::non_negative_number(const char* key, double fallback) const {
  if (!has(key)) return fallback;
  const double v = number(key);
  AERIE_CHECK(std::isfinite(v) && v >= 0, source_, ": '", name(key), "' must be a finite number >= 0, got ", v);
  return v;
}

bool ConfigReader::boolean(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  AERIE_CHECK(j_[key].is_boolean(), source_, ": '", name(key), "' must be true or false");
  return j_[key].get<bool>();
}

std::string ConfigReader::string(const char* key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  AERIE_CHECK(j_[key].is_string(), source_, ": '", name(key), "' must be a string");
  return j_[key].get<std::string>();
}

std::vector<int64_t> ConfigReader::ids(const char* key) const {
  std::vector<int64_t> out;
  if (!has(key)) return out;
  const json& v = j_[key];
  if (v.is_number_integer()) return {v.get<int64_t>()};
  AERIE_CHECK(v.is_array(), source_, ": '", name(key), "' must be an integer or a list of integers");
  for (const json& x : v) {
    AERIE_CHECK(x.is_number_integer(), source_, ": '", name(key), "' must be an integer or a list of integers");
    out.push_back(x.get<int64_t>());
  }
  return out;
}

}  // namespace aerie
