// Random PEFT LoRA adapters written at test time for any model's LoraTargets (the committed goldens come
// from tools/gen/make_lora.py; these serve tests that need no reference: batching, speculation, the
// prefix cache, refusals). Deterministic from the seed.
#pragma once

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/lora.h"
#include "tensor_files.h"

namespace aerie::testing {

struct LoraSpec {
  int64_t rank = 4;
  double alpha = 8;
  std::vector<LoraModule> modules = {LoraModule::kQ,    LoraModule::kK,  LoraModule::kV,   LoraModule::kO,
                                     LoraModule::kGate, LoraModule::kUp, LoraModule::kDown};
  double b_std = 0.5;  // B ~ N(0, (b_std / sqrt(rank))^2), A ~ N(0, 1 / n_in)
  uint32_t seed = 1;
};

inline std::string lora_tensor_stem(int64_t layer, LoraModule m) {
  return "base_model.model.model.layers." + std::to_string(layer) + "." + lora_module_block(m) + "." +
         lora_module_name(m);
}

inline OwnedTensor random_f32(std::vector<int64_t> shape, double stddev, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, float(stddev));
  std::vector<float> values(size_t(shape[0] * shape[1]));
  for (float& v : values) v = normal(rng);
  OwnedTensor t{DType::kF32, std::move(shape), {}};
  t.bytes.resize(values.size() * sizeof(float));
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

// The adapter's tensors (PEFT names, f32) and its adapter_config.json, for tests to edit before writing.
struct LoraFiles {
  TensorMap tensors;
  nlohmann::json config;
};

inline LoraFiles random_lora(const LoraTargets& targets, const LoraSpec& spec) {
  LoraFiles files;
  std::mt19937 rng(spec.seed);
  nlohmann::json modules = nlohmann::json::array();
  for (LoraModule m : spec.modules) modules.push_back(lora_module_name(m));
  for (int64_t il = 0; il < targets.n_layer; ++il) {
    for (LoraModule m : spec.modules) {
      const LoraProjectionShape s = targets.shapes[size_t(m)];
      files.tensors[lora_tensor_stem(il, m) + ".lora_A.weight"] = random_f32({spec.rank, s.n_in},
                                                                             1 / std::sqrt(double(s.n_in)), rng);
      files.tensors[lora_tensor_stem(il, m) + ".lora_B.weight"] = random_f32({s.n_out, spec.rank},
                                                                             spec.b_std / std::sqrt(double(spec.rank)),
                                                                             rng);
    }
  }
  files.config = {{"peft_type", "LORA"},       {"r", spec.rank}, {"lora_alpha", spec.alpha},
                  {"target_modules", modules}, {"bias", "none"}, {"use_rslora", false},
                  {"modules_to_save", nullptr}};
  return files;
}

inline void write_lora(const std::filesystem::path& dir, const LoraFiles& files) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "adapter_config.json") << files.config.dump(2);
  write_safetensors(dir / "adapter_model.safetensors", files.tensors);
}

// A random adapter written to `dir` and loaded back against `targets`.
inline LoraAdapter make_lora(const std::filesystem::path& dir, const LoraTargets& targets, const LoraSpec& spec,
                             std::string name = "") {
  write_lora(dir, random_lora(targets, spec));
  return load_lora_adapter(dir, targets, LoraOptions{}, std::move(name));
}

}  // namespace aerie::testing
