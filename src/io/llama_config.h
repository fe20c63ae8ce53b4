// LlamaConfig: the config.json of a LlamaForCausalLM checkpoint (Llama 3 / 3.1 / 3.2), typed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace aerie {

// rope_scaling with rope_type "llama3" (Llama 3.1+). Absent: no scaling.
struct Llama3RopeScaling {
  bool enabled = false;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct LlamaConfig {
  std::string architecture;          // "LlamaForCausalLM"
  int64_t n_embd = 0;                // hidden_size
  int64_t n_ff = 0;                  // intermediate_size
  int64_t n_head = 0;                // num_attention_heads
  int64_t n_head_kv = 0;             // num_key_value_heads (defaults to n_head when absent)
  int64_t head_dim = 0;              // head_dim, or hidden_size / num_attention_heads
  int64_t n_layer = 0;               // num_hidden_layers
  int64_t n_vocab = 0;               // vocab_size
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  Llama3RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;       // q/k/v/o biases (false for Llama 3)
  bool mlp_bias = false;
  std::vector<int64_t> bos_token_ids;  // bos_token_id: an int or a list
  std::vector<int64_t> eos_token_ids;  // eos_token_id: an int or a list
  std::string torch_dtype;           // "bfloat16", "float32", ...
  // Set by the GGUF loader, never by config.json (models/gguf_loader.h):
  //   q/k rows in llama.cpp's order: within each head, rows i and i + head_dim/2 of the Hugging Face weight
  //   are adjacent (2i, 2i + 1), so RoPE rotates adjacent pairs. The same permutation of q and k leaves every
  //   q.k, and so the model, unchanged; no copy of the weights is made to undo it.
  bool qk_rows_interleaved = false;
  //   rope_freqs.weight, llama.cpp's form of Llama 3.1's scaling: inv_freq[i] = theta^(-2i/head_dim) / f[i].
  std::vector<float> rope_freq_factors;  // [head_dim / 2] or empty
};

// Parses a config.json object. `source` names the file in errors. Throws aerie::Error naming the key on an
// unknown architecture, a missing required key, a value of the wrong type, a value out of range (sizes not
// positive, vocab_size beyond LoadLimits::max_vocab_size, rms_norm_eps or rope_theta not positive and
// finite, rope_scaling factors out of order) or an inconsistent shape (hidden_size not divisible by heads,
// heads not divisible by kv heads, an odd head_dim).
LlamaConfig parse_llama_config(const nlohmann::json& json, const std::string& source);
LlamaConfig load_llama_config(const std::filesystem::path& config_json);

}  // namespace aerie
