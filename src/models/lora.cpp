#include "models/lora.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mix64.h"
#include "io/json_file.h"
#include "io/weight_store.h"
#include "ops/ops.h"

namespace aerie {

namespace fs = std::filesystem;

namespace {

constexpr LoraModule kAllModules[kLoraModules] = {LoraModule::kQ,    LoraModule::kK,  LoraModule::kV,   LoraModule::kO,
                                                  LoraModule::kGate, LoraModule::kUp, LoraModule::kDown};

int module_index(std::string_view name) {
  for (LoraModule m : kAllModules)
    if (name == lora_module_name(m)) return int(m);
  return -1;
}

// PEFT's target_modules: a list of names, each matching a module whose path ends with it ("q_proj",
// "self_attn.q_proj"), or the string "all-linear" (every linear layer but the output head). Any other
// string is a regular expression over whole module paths, which is refused: list the modules instead.
std::array<bool, kLoraModules> parse_target_modules(const nlohmann::json& value, const std::string& where) {
  std::array<bool, kLoraModules> targeted{};
  if (value.is_string()) {
    const std::string s = value.get<std::string>();
    if (s == "all-linear") {
      targeted.fill(true);
      return targeted;
    }
    const int m = module_index(s);
    AERIE_CHECK(m >= 0, where, ": target_modules \"", s,
                "\" is a regular expression (PEFT matches a string against whole module paths); aerie takes a list "
                "of module names or \"all-linear\"");
    targeted[size_t(m)] = true;
    return targeted;
  }
  AERIE_CHECK(value.is_array() && !value.empty(), where, ": target_modules must be a non-empty list of module names");
  for (const nlohmann::json& entry : value) {
    AERIE_CHECK(entry.is_string(), where, ": target_modules holds a non-string entry ", entry.dump());
    const std::string s = entry.get<std::string>();
    const size_t dot = s.rfind('.');
    const std::string last = dot == std::string::npos ? s : s.substr(dot + 1);
    const int m = module_index(last);
    AERIE_CHECK(m >= 0, where, ": target module '", s,
                "' is not a projection aerie adapts (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)");
    if (dot != std::string::npos) {
      const std::string block = s.substr(0, dot);  // "self_attn" or "mlp", possibly with more path before it
      const std::string expected = lora_module_block(LoraModule(m));
      AERIE_CHECK(block == expected || (block.size() > expected.size() &&
                                        block.compare(block.size() - expected.size(), expected.size(), expected) == 0 &&
                                        block[block.size() - expected.size() - 1] == '.'),
                  where, ": target module '", s, "' does not name a module of the model (", last, " sits in ", expected,
                  ")");
    }
    targeted[size_t(m)] = true;
  }
  return targeted;
}

// A field PEFT writes with a default that means "off"; anything else is a feature aerie does not implement.
void refuse_unless_default(const nlohmann::json& config, const char* field, const std::string& where, const char* why) {
  if (!config.contains(field)) return;
  const nlohmann::json& v = config.at(field);
  const bool off = v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_object() && v.empty()) ||
                   (v.is_array() && v.empty()) || (v.is_string() && v.get<std::string>().empty());
  AERIE_CHECK(off, where, ": ", field, " = ", v.dump(), " is not supported (", why, ")");
}

struct AdapterConfig {
  int64_t rank = 0;
  double alpha = 0;
  bool rslora = false;
  std::array<bool, kLoraModules> targeted{};
};

AdapterConfig read_adapter_config(const fs::path& path, const LoraOptions& options) {
  const std::string where = path.string();
  const nlohmann::json config = read_json_file(path, " (a PEFT LoRA adapter folder holds adapter_config.json)");
  AERIE_CHECK(config.is_object(), where, ": not a JSON object");
  if (config.contains("peft_type"))
    AERIE_CHECK(config.at("peft_type") == "LORA", where, ": peft_type ", config.at("peft_type").dump(),
                " is not a LoRA adapter (expected \"LORA\")");
  AdapterConfig c;
  AERIE_CHECK(config.contains("r") && config.at("r").is_number_integer(), where, ": r (the rank) must be an integer");
  c.rank = config.at("r").get<int64_t>();
  AERIE_CHECK(c.rank >= 1 && c.rank <= options.max_rank, where, ": rank r = ", c.rank, " is outside [1, ",
              options.max_rank, "] (the limit is --max-lora-rank)");
  const nlohmann::json alpha = config.value("lora_alpha", nlohmann::json(8));  // PEFT's default
  AERIE_CHECK(alpha.is_number() && std::isfinite(alpha.get<double>()), where, ": lora_alpha must be a number");
  c.alpha = alpha.get<double>();
  c.rslora = config.value("use_rslora", false);
  AERIE_CHECK(config.contains("target_modules"), where, ": target_modules is missing");
  c.targeted = parse_target_modules(config.at("target_modules"), where);
  const std::string bias = config.value("bias", std::string("none"));
  AERIE_CHECK(bias == "none", where, ": bias = \"", bias,
              "\" is not supported (adapters with trained biases; \"none\" only)");
  refuse_unless_default(config, "modules_to_save", where, "fully trained copies of whole modules");
  refuse_unless_default(config, "layers_to_transform", where, "an adapter on some layers only");
  refuse_unless_default(config, "layers_pattern", where, "an adapter on some layers only");
  refuse_unless_default(config, "rank_pattern", where, "a rank per module");
  refuse_unless_default(config, "alpha_pattern", where, "an alpha per module");
  refuse_unless_default(config, "use_dora", where, "DoRA's magnitude vectors");
  refuse_unless_default(config, "exclude_modules", where, "modules left out of target_modules");
  refuse_unless_default(config, "layer_replication", where, "layers duplicated before adapting");
  refuse_unless_default(config, "target_parameters", where, "adapters on raw parameters rather than modules");
  refuse_unless_default(config, "fan_in_fan_out", where, "transposed Conv1D weights, as GPT-2 has; Llama's are not");
  return c;
}

// adapter_model.safetensors names a projection's factors
//   base_model.model.model.layers.<i>.<block>.<module>.lora_{A,B}[.<adapter name>].weight
// (PEFT drops the adapter name when saving; some tools keep ".default"). Returns the stem up to the module,
// "model.layers.<i>.<block>.<module>", and which factor, or false for any other name.
bool split_tensor_name(const std::string& name, std::string& module_path, char& factor) {
  static const std::string kPrefix = "base_model.model.";
  if (name.rfind(kPrefix, 0) != 0) return false;
  std::string rest = name.substr(kPrefix.size());
  for (const char* suffix : {".weight", ".default.weight"}) {
    for (char f : {'A', 'B'}) {
      const std::string tail = std::string(".lora_") + f + suffix;
      if (rest.size() > tail.size() && rest.compare(rest.size() - tail.size(), tail.size(), tail) == 0) {
        module_path = rest.substr(0, rest.size() - tail.size());
        factor = f;
        return true;
      }
    }
  }
  return false;
}

// The tensor as f32, or an error naming it when its dtype is not a float one PEFT saves or a value is not finite.
std::vector<float> to_f32(const Tensor& t, const std::string& where, const std::string& name) {
  std::vector<float> out(size_t(t.numel()));
  const size_t n = out.size();
  if (t.dtype == DType::kF32) {
    std::memcpy(out.data(), t.data, n * sizeof(float));
  } else if (t.dtype == DType::kBF16) {
    for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(t.as<uint16_t>()[i]);
  } else if (t.dtype == DType::kF16) {
    for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(t.as<uint16_t>()[i]);
  } else {
    throw Error(str_cat(where, ": tensor '", name, "' is ", dtype_name(t.dtype), " (expected F32, BF16 or F16)"));
  }
  for (size_t i = 0; i < n; ++i)
    AERIE_CHECK(std::isfinite(out[i]), where, ": tensor '", name, "' holds a non-finite value at ", i);
  return out;
}

// GGUF stores a Llama's q/k rows with each head's two RoPE halves interleaved: its row h*d + 2i + j is the
// published row h*d + j*d/2 + i (d = head_dim, i < d/2, j in {0, 1}). B's rows are the projection's output
// rows, so they take the same order. Example, d = 4: published rows [a0 a1 b0 b1] -> [a0 b0 a1 b1].
std::vector<float> interleave_head_rows(const std::vector<float>& b, int64_t n_out, int64_t rank, int64_t head_dim) {
  std::vector<float> out(b.size());
  const int64_t half = head_dim / 2;
  for (int64_t row = 0; row < n_out; ++row) {
    const int64_t h = row / head_dim, r = row % head_dim, i = r / 2, j = r % 2;
    const int64_t source = h * head_dim + j * half + i;
    std::memcpy(out.data() + row * rank, b.data() + source * rank, size_t(rank) * sizeof(float));
  }
  return out;
}

uint64_t hash_floats(uint64_t h, const std::vector<float>& v) {
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    h = mix64(h ^ bits);
  }
  return h;
}

}  // namespace

const char* lora_module_name(LoraModule module) {
  static const char* const kNames[kLoraModules] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                   "gate_proj", "up_proj", "down_proj"};
  return kNames[int(module)];
}

const char* lora_module_block(LoraModule module) { return int(module) <= int(LoraModule::kO) ? "self_attn" : "mlp"; }

uint64_t LoraAdapter::nbytes() const {
  uint64_t bytes = 0;
  for (const auto& layer : layers)
    for (const LoraPair& p : layer) bytes += (p.a.size() + p.b.size()) * sizeof(float);
  return bytes;
}

namespace {

// Every tensor of the file must be a factor of a targeted projection of an existing layer, with the
// projection's shape; each lands in adapter.layers as f32.
void read_factors(const WeightStore& store, const std::string& where, const AdapterConfig& config,
                  const LoraTargets& targets, LoraAdapter& adapter) {
  std::map<std::string, std::pair<int64_t, LoraModule>> paths;  // "model.layers.3.self_attn.q_proj" -> (3, kQ)
  for (int64_t il = 0; il < targets.n_layer; ++il)
    for (LoraModule m : kAllModules)
      paths[str_cat("model.layers.", il, ".", lora_module_block(m), ".", lora_module_name(m))] = {il, m};
  for (const std::string& tensor : store.names()) {
    std::string path;
    char factor = 0;
    AERIE_CHECK(split_tensor_name(tensor, path, factor), where, ": tensor '", tensor,
                "' is not a LoRA factor (base_model.model.<module>.lora_A.weight / lora_B.weight); embedding and "
                "DoRA tensors are not supported");
    const auto it = paths.find(path);
    AERIE_CHECK(it != paths.end(), where, ": tensor '", tensor, "' is for module '", path,
                "', which this model has not (", targets.n_layer, " layers of q/k/v/o_proj and gate/up/down_proj)");
    const auto [il, m] = it->second;
    AERIE_CHECK(config.targeted[size_t(m)], where, ": tensor '", tensor, "' is for ", lora_module_name(m),
                ", which is not among target_modules");
    const LoraProjectionShape shape = targets.shapes[size_t(m)];
    const Tensor& t = store.get(tensor);
    const Shape expected = factor == 'A' ? Shape{config.rank, shape.n_in} : Shape{shape.n_out, config.rank};
    AERIE_CHECK(t.shape == expected, where, ": tensor '", tensor, "' has shape ", t.shape.str(), ", expected ",
                expected.str(), factor == 'A' ? " [r, n_in]" : " [n_out, r]", " for ", lora_module_name(m));
    LoraPair& pair = adapter.layers[size_t(il)][size_t(m)];
    std::vector<float>& dst = factor == 'A' ? pair.a : pair.b;
    AERIE_CHECK(dst.empty(), where, ": two tensors hold lora_", factor, " of ", path);
    dst = to_f32(t, where, tensor);
  }
}

// Checks that every targeted module has both factors in every layer (PEFT adapts every matching module),
// puts q/k B rows in the model's order, makes the views, and returns the adapter's identity: a hash of its
// rank, scale and factors.
uint64_t bind_pairs(const std::string& where, const AdapterConfig& config, const LoraTargets& targets,
                    LoraAdapter& adapter) {
  uint32_t scale_bits;
  std::memcpy(&scale_bits, &adapter.scale, sizeof scale_bits);
  uint64_t identity = mix64(uint64_t(config.rank) ^ (uint64_t(scale_bits) << 20));
  for (int64_t il = 0; il < targets.n_layer; ++il) {
    for (LoraModule m : kAllModules) {
      LoraPair& pair = adapter.layers[size_t(il)][size_t(m)];
      if (!config.targeted[size_t(m)]) continue;
      const std::string path = str_cat("base_model.model.model.layers.", il, ".", lora_module_block(m), ".",
                                       lora_module_name(m));
      AERIE_CHECK(!pair.a.empty(), where, ": missing tensor '", path, ".lora_A.weight' (", lora_module_name(m),
                  " is a target module)");
      AERIE_CHECK(!pair.b.empty(), where, ": missing tensor '", path, ".lora_B.weight' (", lora_module_name(m),
                  " is a target module)");
      const LoraProjectionShape shape = targets.shapes[size_t(m)];
      if (targets.qk_rows_permuted && (m == LoraModule::kQ || m == LoraModule::kK))
        pair.b = interleave_head_rows(pair.b, shape.n_out, config.rank, targets.head_dim);
      pair.a_view = Tensor{DType::kF32, Shape{config.rank, shape.n_in}, pair.a.data()};
      pair.b_view = Tensor{DType::kF32, Shape{shape.n_out, config.rank}, pair.b.data()};
      identity = hash_floats(hash_floats(mix64(identity ^ uint64_t(il * kLoraModules + int(m))), pair.a), pair.b);
    }
  }
  return identity;
}

}  // namespace

LoraAdapter load_lora_adapter(const fs::path& dir, const LoraTargets& targets, const LoraOptions& options,
                              std::string name) {
  AERIE_CHECK(options.max_rank >= 1 && options.max_rank <= kMaxLoraRankLimit, "max LoRA rank ", options.max_rank,
              " is outside [1, ", kMaxLoraRankLimit, "]");
  AERIE_CHECK(targets.refusal.empty(), "LoRA adapter ", dir.string(), ": ", targets.refusal);
  const AdapterConfig config = read_adapter_config(dir / "adapter_config.json", options);
  const fs::path weights_path = dir / "adapter_model.safetensors";
  AERIE_CHECK(fs::exists(weights_path), weights_path.string(),
              ": missing (aerie reads PEFT adapters saved as safetensors; adapter_model.bin is not read)");
  LoraAdapter adapter;
  adapter.name = std::move(name);
  adapter.dir = dir.string();
  adapter.rank = config.rank;
  adapter.scale = float(config.rslora ? config.alpha / std::sqrt(double(config.rank))
                                      : config.alpha / double(config.rank));
  AERIE_CHECK(std::isfinite(adapter.scale), (dir / "adapter_config.json").string(), ": lora_alpha ", config.alpha,
              " gives a scale beyond float's range");
  for (LoraModule m : kAllModules)
    if (config.targeted[size_t(m)]) adapter.target_modules.push_back(lora_module_name(m));
  adapter.layers.resize(size_t(targets.n_layer));
  read_factors(WeightStore::open_file(weights_path), weights_path.string(), config, targets, adapter);
  adapter.identity = bind_pairs(weights_path.string(), config, targets, adapter);
  return adapter;
}

int32_t LoraSet::index_of(std::string_view name) const {
  for (size_t i = 0; i < adapters.size(); ++i)
    if (adapters[i].name == name) return int32_t(i);
  return -1;
}

std::shared_ptr<const LoraSet> load_lora_set(std::span<const std::pair<std::string, std::string>> specs,
                                             const LoraTargets& targets, const LoraOptions& options) {
  auto set = std::make_shared<LoraSet>();
  for (const auto& [name, dir] : specs) {
    AERIE_CHECK(!name.empty(), "LoRA adapter ", dir, ": the name is empty");
    AERIE_CHECK(set->index_of(name) < 0, "LoRA adapters: the name '", name, "' is given twice");
    set->adapters.push_back(load_lora_adapter(dir, targets, options, name));
  }
  return set;
}

void check_lora_fits(const LoraSet& set, const LoraTargets& targets) {
  if (set.adapters.empty()) return;
  AERIE_CHECK(targets.refusal.empty(), "LoRA adapters: ", targets.refusal);
  for (const LoraAdapter& a : set.adapters) {
    AERIE_CHECK(int64_t(a.layers.size()) == targets.n_layer, "LoRA adapter '", a.name, "' (", a.dir, ") has ",
                a.layers.size(), " layers; the model has ", targets.n_layer);
    for (const auto& layer : a.layers)
      for (LoraModule m : kAllModules) {
        const LoraPair& p = layer[size_t(m)];
        const LoraProjectionShape s = targets.shapes[size_t(m)];
        AERIE_CHECK(p.empty() || (p.a_view.dim(1) == s.n_in && p.b_view.dim(0) == s.n_out), "LoRA adapter '", a.name,
                    "' (", a.dir, "): ", lora_module_name(m), " is [", p.b_view.dim(0), ", ", p.a_view.dim(1),
                    "] and the model's is [", s.n_out, ", ", s.n_in, "]");
      }
  }
}

std::pair<std::string, std::string> parse_lora_module_spec(const std::string& spec) {
  if (!spec.empty() && spec.front() == '{') {
    const nlohmann::json j = parse_json_text(spec, "--lora-modules");
    AERIE_CHECK(j.is_object() && j.contains("name") && j.at("name").is_string() && j.contains("path") &&
                    j.at("path").is_string(),
                "--lora-modules '", spec, "': the JSON form needs string fields \"name\" and \"path\"");
    for (const auto& [key, value] : j.items())
      AERIE_CHECK(key == "name" || key == "path" || key == "base_model_name", "--lora-modules '", spec,
                  "': unknown field \"", key, "\"");
    AERIE_CHECK(!j.at("name").get<std::string>().empty(), "--lora-modules '", spec, "': the name is empty");
    return {j.at("name").get<std::string>(), j.at("path").get<std::string>()};
  }
  const size_t eq = spec.find('=');
  AERIE_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < spec.size(), "--lora-modules '", spec,
              "': expected name=DIR or {\"name\": ..., \"path\": ...}");
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

void LoraBatch::begin(const StepBatch& batch) {
  groups_.clear();
  ranges_.clear();
  set_ = batch.adapters;
  if (set_ == nullptr) return;
  // Adapters in index order, each with its sequences' row ranges in batch order. Sequences are few (at most
  // max_num_seqs), so a pass per adapter in use costs nothing next to the matmuls.
  for (int32_t a = 0; a < set_->size(); ++a) {
    Group group{a, ranges_.size(), 0, 0};
    for (const SequenceRows& seq : batch.sequences) {
      if (seq.adapter != a) continue;
      ranges_.push_back(RowRange{seq.row_begin, seq.n_rows});
      ++group.n_ranges;
      group.n_rows += seq.n_rows;
    }
    if (group.n_ranges > 0) groups_.push_back(group);
  }
}

void LoraBatch::add(int64_t layer, LoraModule module, const float* x, float* y, ThreadPool& pool) {
  for (const Group& group : groups_) {
    const LoraAdapter& adapter = set_->adapters[size_t(group.adapter)];
    const LoraPair& pair = adapter.layers[size_t(layer)][size_t(module)];
    if (pair.empty()) continue;
    const int64_t n_in = pair.a_view.dim(1), n_out = pair.b_view.dim(0), rank = adapter.rank;
    const std::span<const RowRange> ranges(ranges_.data() + group.first_range, group.n_ranges);
    // The group's rows of x, contiguous: in place when it is one run of rows, else gathered.
    const float* xg = x + ranges[0].begin * n_in;
    if (ranges.size() > 1) {
      float* gathered = gathered_.reserve(group.n_rows * n_in);  // [n_rows, n_in]
      int64_t at = 0;
      for (const RowRange& r : ranges) {
        std::memcpy(gathered + at * n_in, x + r.begin * n_in, size_t(r.n_rows * n_in) * sizeof(float));
        at += r.n_rows;
      }
      xg = gathered;
    }
    float* low = low_.reserve(group.n_rows * rank);       // [n_rows, rank]  x A^T
    float* delta = delta_.reserve(group.n_rows * n_out);  // [n_rows, n_out] (x A^T) B^T
    ops::matmul(xg, group.n_rows, pair.a_view, nullptr, low, pool);
    ops::matmul(low, group.n_rows, pair.b_view, nullptr, delta, pool);
    int64_t at = 0;
    for (const RowRange& r : ranges) {
      for (int64_t i = 0; i < r.n_rows; ++i) {
        float* yr = y + (r.begin + i) * n_out;
        const float* dr = delta + (at + i) * n_out;
        for (int64_t o = 0; o < n_out; ++o) yr[o] += adapter.scale * dr[o];
      }
      at += r.n_rows;
    }
  }
}

}  // namespace aerie
