// generation_config.json: the publisher's generation defaults. aerie reads the end-of-sequence ids from it
// (Llama 3.1 Instruct lists <|eot_id|> and <|eom_id|> there, not in config.json) and the sampling
// defaults, which the CLI reports but does not apply unless asked.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace aerie {

struct GenerationConfig {
  bool present = false;                // the file exists
  std::vector<int64_t> bos_token_ids;  // bos_token_id: an int or a list (empty when absent)
  std::vector<int64_t> eos_token_ids;  // eos_token_id: an int or a list (empty when absent)
  std::optional<bool> do_sample;
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k;
};

// DIR/generation_config.json; a missing file gives present = false. A file that is not JSON or has a key
// of the wrong type is an aerie::Error naming the file and the key.
GenerationConfig load_generation_config(const std::filesystem::path& dir);

// The union of two id lists, first-seen order.
std::vector<int64_t> merge_ids(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

}  // namespace aerie
