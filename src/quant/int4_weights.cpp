#include "quant/int4_weights.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "io/config_reader.h"
#include "io/regex.h"
#include "ops/int4.h"
#include "ops/ops_fp8.h"
#include "ops/ref/ref_ops.h"

namespace aerie {
namespace {

enum class Packing { kGptq, kAwq };

struct Int4Format {
  Packing packing = Packing::kGptq;
  int64_t group_size = 0;   // -1: one group per output channel
  int64_t zero_offset = 0;  // added to every stored zero point (GPTQ v1: 1)
};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// What --weights int4 quantises: Llama's and DeepSeek's projections (MLA's kv_a_proj_with_mqa and kv_b_proj
// included; the MoE router `mlp.gate`, norms and embeddings are not projections) and lm_head.
bool is_projection(const std::string& name) {
  return ends_with(name, "_proj.weight") || ends_with(name, "_proj_with_mqa.weight") || name == "lm_head.weight";
}

// The 4 bits at `nibble` (0..7, from the least significant) of a packed int32.
uint8_t nibble_of(int32_t packed, int nibble) { return uint8_t((uint32_t(packed) >> (4 * nibble)) & 0x0F); }

// AWQ's order inside one int32 of 8 outputs: output 8j + k sits in nibble kAwqNibble[k].
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

const Tensor& get_i32(const WeightStore& store, const std::string& name, const Shape& shape) {
  const Tensor& t = store.get(name);
  AERIE_CHECK(t.dtype == DType::kI32 && t.shape == shape, store.source(), ": tensor '", name, "' is ",
              dtype_name(t.dtype), " ", t.shape.str(), ", expected I32 ", shape.str());
  return t;
}

// The act-order permutation from g_idx: inputs sorted by group (stably), each group exactly `group` inputs.
// Empty when g_idx is i / group throughout.
std::vector<int32_t> act_order(const WeightStore& store, const std::string& name, const Tensor& g_idx, int64_t group,
                               int64_t n_groups) {
  const auto* g = g_idx.as<int32_t>();
  const int64_t n_in = g_idx.dim(0);
  bool trivial = true;
  std::vector<int64_t> count(size_t(n_groups), 0);
  for (int64_t i = 0; i < n_in; ++i) {
    AERIE_CHECK(g[i] >= 0 && g[i] < n_groups, store.source(), ": tensor '", name, "' gives input ", i, " group ", g[i],
                ", outside [0, ", n_groups, ")");
    trivial = trivial && g[i] == i / group;
    ++count[size_t(g[i])];
  }
  if (trivial) return {};
  for (int64_t k = 0; k < n_groups; ++k)
    AERIE_CHECK(count[size_t(k)] == group, store.source(), ": tensor '", name, "' puts ", count[size_t(k)],
                " inputs in group ", k, ", expected ", group);
  std::vector<int32_t> perm(static_cast<size_t>(n_in));
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int32_t a, int32_t b) { return g[a] < g[b]; });
  return perm;
}

// Writes `<base>.weight` U8, `_scale` F32, `_zero` U8 (and `_perm` I32) from one projection's values read
// through `value(o, i)` (0..15, input i in checkpoint order), `zero(o, g)` and `scale(o, g)`, columns in
// act order when `perm` is given. `packed_name`, `zero_name` and `scale_name` name the tensors in errors.
template <class Value, class Zero, class Scale>
void write_int4(WeightStore& store, const std::string& base, int64_t n_out, int64_t n_in, int64_t n_groups,
                std::vector<int32_t> perm, const std::string& packed_name, const std::string& zero_name,
                const std::string& scale_name, Value value, Zero zero_of, Scale scale_of, ThreadPool* pool) {
  std::vector<uint8_t> q(size_t(n_out * n_in / 2)), zero(size_t(n_out * n_groups));
  std::vector<uint8_t> scale(size_t(n_out * n_groups) * sizeof(float));
  auto* sp = reinterpret_cast<float*>(scale.data());
  // Outputs [b, e): unpack each row in input order (or act order), then pack into ops/int4.h's blocks.
  const auto rows = [&](int64_t b, int64_t e) {
    std::vector<uint8_t> values(static_cast<size_t>(n_in));
    for (int64_t o = b; o < e; ++o) {
      for (int64_t j = 0; j < n_in; ++j) values[size_t(j)] = value(o, perm.empty() ? j : perm[size_t(j)]);
      ops::pack_int4_row(values.data(), n_in, q.data() + o * (n_in / 2));
      for (int64_t g = 0; g < n_groups; ++g) {
        zero[size_t(o * n_groups + g)] = zero_of(o, g);
        sp[o * n_groups + g] = scale_of(o, g);
      }
    }
  };
  if (pool != nullptr) {
    pool->parallel_for(n_out, 64, [&](int64_t b, int64_t e) { rows(b, e); });
  } else {
    rows(0, n_out);
  }
  for (int64_t k = 0; k < n_out * n_groups; ++k)
    AERIE_CHECK(zero[size_t(k)] <= ops::kInt4MaxZero && std::isfinite(sp[k]), store.source(), ": '", zero_name, "' / '",
                scale_name, "' give output ", k / n_groups, " group ", k % n_groups, " zero point ",
                int(zero[size_t(k)]), " and scale ", sp[k], " (zero points must be at most ", ops::kInt4MaxZero,
                ", scales finite)");
  const std::string weight_name = base + ".weight";
  AERIE_CHECK(!store.contains(weight_name), store.source(), ": both '", packed_name, "' and '", weight_name,
              "' are present");
  store.replace_owned(weight_name, DType::kU8, Shape{n_out, n_in / 2}, std::move(q));
  store.replace_owned(weight_name + "_scale", DType::kF32, Shape{n_out, n_groups}, std::move(scale));
  store.replace_owned(weight_name + "_zero", DType::kU8, Shape{n_out, n_groups}, std::move(zero));
  if (!perm.empty()) {
    std::vector<uint8_t> bytes(perm.size() * sizeof(int32_t));
    std::memcpy(bytes.data(), perm.data(), bytes.size());
    store.replace_owned(weight_name + "_perm", DType::kI32, Shape{n_in}, std::move(bytes));
  }
}

// The scales of one projection: F16, BF16 or F32 of `shape`.
const Tensor& get_scales(const WeightStore& store, const std::string& name, const Shape& shape) {
  const Tensor& scales = store.get(name);
  AERIE_CHECK((scales.dtype == DType::kF16 || scales.dtype == DType::kBF16 || scales.dtype == DType::kF32) &&
                  scales.shape == shape,
              store.source(), ": tensor '", name, "' is ", dtype_name(scales.dtype), " ", scales.shape.str(),
              ", expected F16 ", shape.str());
  return scales;
}

// The group of `n_in` inputs (group_size -1: all of them), checked against ops/int4.h's blocks.
int64_t checked_group(const WeightStore& store, const std::string& name, int64_t group_size, int64_t n_out,
                      int64_t n_in) {
  const int64_t group = group_size == -1 ? n_in : group_size;
  AERIE_CHECK(group > 0 && n_in % group == 0 && group % ops::kInt4Block == 0 && group <= ops::kInt4MaxGroup &&
                  n_out % 8 == 0,
              store.source(), ": '", name, "' (", n_out, " outputs, ", n_in, " inputs): group_size ", group,
              " must divide the inputs and be a multiple of ", ops::kInt4Block, ", and the outputs a multiple of 8");
  return group;
}

// Repacks one GPTQ or AWQ projection `<base>.qweight` (with qzeros, scales, g_idx) as the header says.
void convert_projection(WeightStore& store, const std::string& base, const Int4Format& f, ThreadPool* pool) {
  const std::string qweight_name = base + ".qweight", qzeros_name = base + ".qzeros", scales_name = base + ".scales";
  const Tensor& qweight = store.get(qweight_name);
  AERIE_CHECK(qweight.dtype == DType::kI32 && qweight.shape.ndim() == 2, store.source(), ": tensor '", qweight_name,
              "' is ", dtype_name(qweight.dtype), " ", qweight.shape.str(), ", expected a 2-D I32 tensor");
  const bool gptq = f.packing == Packing::kGptq;
  const int64_t n_in = gptq ? qweight.dim(0) * 8 : qweight.dim(0);
  const int64_t n_out = gptq ? qweight.dim(1) : qweight.dim(1) * 8;
  const int64_t group = checked_group(store, qweight_name, f.group_size, n_out, n_in);
  const int64_t n_groups = n_in / group;
  const Tensor& qzeros = get_i32(store, qzeros_name, Shape{n_groups, n_out / 8});
  const Tensor& scales = get_scales(store, scales_name, Shape{n_groups, n_out});
  std::vector<int32_t> perm;
  if (gptq && store.contains(base + ".g_idx"))
    perm = act_order(store, base + ".g_idx", get_i32(store, base + ".g_idx", Shape{n_in}), group, n_groups);
  const auto* qw = qweight.as<int32_t>();
  const auto* qz = qzeros.as<int32_t>();
  write_int4(
      store, base, n_out, n_in, n_groups, std::move(perm), qweight_name, qzeros_name, scales_name,
      [&](int64_t o, int64_t i) {
        return gptq ? nibble_of(qw[(i / 8) * n_out + o], int(i % 8))
                    : nibble_of(qw[i * (n_out / 8) + o / 8], kAwqNibble[o % 8]);
      },
      [&](int64_t o, int64_t g) {
        const int32_t packed = qz[g * (n_out / 8) + o / 8];
        return uint8_t(nibble_of(packed, gptq ? int(o % 8) : kAwqNibble[o % 8]) + f.zero_offset);
      },
      [&](int64_t o, int64_t g) { return ops::ref::load_float(scales, g * n_out + o); }, pool);
}

Int4Format parse_format(const nlohmann::json& qc, const std::string& source, const std::string& method) {
  const ConfigReader r(qc, source, "quantization_config.");
  Int4Format f;
  const int64_t bits = r.has("bits") ? r.integer("bits") : r.integer("w_bit", 0);
  AERIE_CHECK(bits == 4, source, ": quantization_config.bits is ", bits, ": only 4-bit ", method,
              " checkpoints are supported");
  f.group_size = r.has("group_size") ? r.integer("group_size") : r.integer("q_group_size", 0);
  AERIE_CHECK(f.group_size == -1 || f.group_size > 0, source, ": quantization_config.group_size is ", f.group_size,
              " (expected -1 or a positive count)");
  if (method == "gptq") {
    const std::string format = r.string("checkpoint_format", "gptq");
    AERIE_CHECK(format == "gptq" || format == "gptq_v2", source,
                ": unsupported quantization_config.checkpoint_format '", format, "' (gptq or gptq_v2)");
    f.zero_offset = format == "gptq" ? 1 : 0;
  } else {
    f.packing = Packing::kAwq;
    std::string version = r.string("version", "gemm");
    std::transform(version.begin(), version.end(), version.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    AERIE_CHECK(version == "gemm", source, ": unsupported AWQ quantization_config.version '", version,
                "' (the GEMM packing only)");
    AERIE_CHECK(r.boolean("zero_point", true), source, ": AWQ without zero points is not supported");
  }
  return f;
}

// compressed-tensors "pack-quantized" W4A16: the one weight scheme of config_groups, and the ignore list.
struct PackedFormat {
  int64_t group_size = 0;  // -1: strategy "channel"
  bool symmetric = true;
  std::vector<std::string> ignore_names;  // modules left as stored, by name
  // and by "re:" patterns, matched from the name's start (PCRE2, bounded; shared: a format is copied)
  std::vector<std::shared_ptr<const Regex>> ignore_patterns;
};

PackedFormat parse_weight_scheme(const nlohmann::json& group, const std::string& source, const std::string& key) {
  AERIE_CHECK(group.is_object(), source, ": ", key, " must be an object");
  AERIE_CHECK(!group.contains("input_activations") || group["input_activations"].is_null(), source, ": ", key,
              ".input_activations is set: only weight-only (W4A16) pack-quantized checkpoints are supported");
  const ConfigReader g(group, source, key + ".");
  AERIE_CHECK(g.string("format", "pack-quantized") == "pack-quantized", source, ": unsupported ", key, ".format '",
              g.string("format", ""), "' (pack-quantized)");
  g.require("weights");
  const ConfigReader w(group["weights"], source, key + ".weights.");
  const int64_t bits = w.integer("num_bits");
  AERIE_CHECK(bits == 4, source, ": ", w.name("num_bits"), " is ", bits,
              ": only 4-bit pack-quantized weights are supported");
  const std::string type = w.string("type", "int");
  AERIE_CHECK(type == "int", source, ": unsupported ", w.name("type"), " '", type, "' (int)");
  const std::string strategy = w.string("strategy", "group");
  AERIE_CHECK(strategy == "group" || strategy == "channel", source, ": unsupported ", w.name("strategy"), " '",
              strategy, "' (group or channel)");
  PackedFormat f;
  f.group_size = strategy == "channel" ? -1 : w.positive_integer("group_size");
  f.symmetric = w.boolean("symmetric", true);
  return f;
}

PackedFormat parse_packed_format(const nlohmann::json& qc, const std::string& source) {
  AERIE_CHECK(qc.contains("config_groups") && qc["config_groups"].is_object() && !qc["config_groups"].empty(), source,
              ": quantization_config.config_groups must be a non-empty object");
  std::optional<PackedFormat> f;
  for (const auto& [name, group] : qc["config_groups"].items()) {
    const PackedFormat g = parse_weight_scheme(group, source, "quantization_config.config_groups." + name);
    AERIE_CHECK(!f || (f->group_size == g.group_size && f->symmetric == g.symmetric), source,
                ": quantization_config.config_groups." + name,
                " quantises weights unlike the groups before it: one weight scheme per checkpoint is supported");
    f = g;
  }
  if (qc.contains("ignore") && !qc["ignore"].is_null()) {
    AERIE_CHECK(qc["ignore"].is_array(), source, ": quantization_config.ignore must be a list of module names");
    for (const nlohmann::json& m : qc["ignore"]) {
      AERIE_CHECK(m.is_string(), source, ": quantization_config.ignore must be a list of module names");
      const std::string entry = m.get<std::string>();
      if (entry.rfind("re:", 0) != 0) {
        f->ignore_names.push_back(entry);
        continue;
      }
      try {
        f->ignore_patterns.push_back(std::make_shared<const Regex>(entry.substr(3)));
      } catch (const Error& e) {
        throw Error(
            str_cat(source, ": quantization_config.ignore entry '", entry, "' is not a valid regex: ", e.what()));
      }
    }
  }
  return *f;
}

// Whether `module` is named by the ignore list (compressed-tensors: "re:" patterns match from the start).
bool ignored(const PackedFormat& f, const std::string& module) {
  for (const std::string& name : f.ignore_names)
    if (name == module) return true;
  thread_local Regex::Matcher matcher;
  for (const std::shared_ptr<const Regex>& pattern : f.ignore_patterns) {
    matcher.start_budget(module.size());  // linear work in the name, whatever the pattern (Regex::Matcher)
    size_t begin = 0, end = 0;
    if (matcher.find(*pattern, module, 0, &begin, &end) && begin == 0) return true;  // Python's re.match
  }
  return false;
}

// Repacks one compressed-tensors projection `<base>.weight_packed` I32 [n_out, n_in / 8] (input i in bits
// 4 (i % 8) of word i / 8, stored as the signed value + 8), `weight_scale` [n_out, n_groups], with
// `weight_zero_point` I32 [n_out / 8, n_groups] (output o in bits 4 (o % 8) of row o / 8, signed + 8) when
// asymmetric, `weight_shape` [2] = {n_out, n_in} and act order's `weight_g_idx` I32 [n_in] optional.
// w = (q - zero) * scale over the stored (unsigned) values, so a symmetric zero point is 8.
void convert_packed(WeightStore& store, const std::string& base, const PackedFormat& f, ThreadPool* pool) {
  const std::string packed_name = base + ".weight_packed", scale_name = base + ".weight_scale";
  const std::string zero_name = base + ".weight_zero_point", shape_name = base + ".weight_shape";
  AERIE_CHECK(!ignored(f, base), store.source(), ": '", packed_name, "' is packed but quantization_config.ignore ",
              "names its module '", base, "'");
  const Tensor& packed = store.get(packed_name);
  AERIE_CHECK(packed.dtype == DType::kI32 && packed.shape.ndim() == 2, store.source(), ": tensor '", packed_name,
              "' is ", dtype_name(packed.dtype), " ", packed.shape.str(), ", expected a 2-D I32 tensor");
  const int64_t n_out = packed.dim(0), n_in = packed.dim(1) * 8;
  if (const Tensor* shape = store.find(shape_name)) {
    AERIE_CHECK((shape->dtype == DType::kI64 || shape->dtype == DType::kI32) && shape->shape == Shape{2},
                store.source(), ": tensor '", shape_name, "' is ", dtype_name(shape->dtype), " ", shape->shape.str(),
                ", expected I64 [2]");
    const int64_t rows = shape->dtype == DType::kI64 ? shape->as<int64_t>()[0] : shape->as<int32_t>()[0];
    const int64_t cols = shape->dtype == DType::kI64 ? shape->as<int64_t>()[1] : shape->as<int32_t>()[1];
    AERIE_CHECK(rows == n_out && cols == n_in, store.source(), ": tensor '", shape_name, "' says [", rows, ", ", cols,
                "] but '", packed_name, "' ", packed.shape.str(), " holds [", n_out, ", ", n_in, "]");
  }
  const int64_t group = checked_group(store, packed_name, f.group_size, n_out, n_in);
  const int64_t n_groups = n_in / group;
  AERIE_CHECK(store.contains(scale_name), store.source(), ": missing tensor '", scale_name, "' (the scales of '",
              packed_name, "')");
  const Tensor& scales = get_scales(store, scale_name, Shape{n_out, n_groups});
  const Tensor* zeros = store.find(zero_name);
  AERIE_CHECK(zeros != nullptr || f.symmetric, store.source(), ": missing tensor '", zero_name,
              "' (the config's weights are asymmetric)");
  if (zeros != nullptr) get_i32(store, zero_name, Shape{n_out / 8, n_groups});
  std::vector<int32_t> perm;
  if (store.contains(base + ".weight_g_idx"))
    perm = act_order(store, base + ".weight_g_idx", get_i32(store, base + ".weight_g_idx", Shape{n_in}), group,
                     n_groups);
  const auto* qw = packed.as<int32_t>();
  const int32_t* qz = zeros != nullptr ? zeros->as<int32_t>() : nullptr;
  write_int4(
      store, base, n_out, n_in, n_groups, std::move(perm), packed_name,
      zeros != nullptr ? zero_name : std::string("symmetric zero point 8"), scale_name,
      [&](int64_t o, int64_t i) { return nibble_of(qw[o * (n_in / 8) + i / 8], int(i % 8)); },
      [&](int64_t o, int64_t g) {
        return qz != nullptr ? nibble_of(qz[(o / 8) * n_groups + g], int(o % 8)) : uint8_t(8);
      },
      [&](int64_t o, int64_t g) { return ops::ref::load_float(scales, o * n_groups + g); }, pool);
}

// Every `<base><suffix>` of the store through `convert(base)`; how many.
template <class Convert>
int64_t convert_each(const WeightStore& store, const std::string& suffix, Convert convert) {
  int64_t count = 0;
  for (const std::string& name : store.names()) {
    if (!ends_with(name, suffix)) continue;
    convert(name.substr(0, name.size() - suffix.size()));
    ++count;
  }
  return count;
}

}  // namespace

int64_t convert_int4_checkpoint(WeightStore& store, const nlohmann::json& config, ThreadPool* pool) {
  if (!config.contains("quantization_config") || config["quantization_config"].is_null()) return 0;
  const nlohmann::json& qc = config["quantization_config"];
  AERIE_CHECK(qc.is_object(), store.source(), ": 'quantization_config' must be an object or null");
  const ConfigReader r(qc, store.source(), "quantization_config.");
  const std::string method = r.string("quant_method", "");
  if (method == "compressed-tensors") {
    const std::string format = r.string("format", "int-quantized");
    if (format == "int-quantized") return 0;  // int8: quant/quantize.h
    AERIE_CHECK(format == "pack-quantized", store.source(), ": unsupported quantization_config.format '", format,
                "' for compressed-tensors (supported: int-quantized, pack-quantized)");
    const PackedFormat packed = parse_packed_format(qc, store.source());
    const int64_t count = convert_each(store, ".weight_packed",
                                       [&](const std::string& base) { convert_packed(store, base, packed, pool); });
    AERIE_CHECK(count > 0, store.source(), ": quantization_config says pack-quantized but no tensor is named ",
                "'*.weight_packed'");
    return count;
  }
  if (method != "gptq" && method != "awq") return 0;  // fp8 and the like load by dtype
  const Int4Format format = parse_format(qc, store.source(), method);
  const int64_t count = convert_each(store, ".qweight",
                                     [&](const std::string& base) { convert_projection(store, base, format, pool); });
  AERIE_CHECK(count > 0, store.source(), ": quantization_config says ", method, " but no tensor is named '*.qweight'");
  return count;
}

int64_t quantize_projections_int4(WeightStore& store, int64_t group, const std::string& tied_embedding,
                                  ThreadPool* pool) {
  // `scale_inv`: the F32 tile multipliers of an F8_E4M3 source (dequantised a row block at a time), else null.
  const auto quantize = [&](const std::string& base, const Tensor& source, const Tensor* scale_inv) {
    AERIE_CHECK(source.shape.ndim() == 2, store.source(), ": '", base, ".weight' is not a matrix");
    const int64_t n_out = source.dim(0), n_in = source.dim(1), g = group == 0 ? n_in : group;
    AERIE_CHECK(g % ops::kInt4Block == 0 && n_in % g == 0 && g <= ops::kInt4MaxGroup, store.source(), ": int4 group ",
                g, " for '", base, ".weight' (", n_in, " inputs) must be a multiple of ", ops::kInt4Block,
                " dividing the inputs (--int4-group)");
    std::vector<uint8_t> q(size_t(n_out * n_in / 2)), zero(size_t(n_out * (n_in / g)));
    std::vector<uint8_t> scale(zero.size() * sizeof(float));
    auto* sp = reinterpret_cast<float*>(scale.data());
    const auto rows = [&](int64_t b, int64_t e) {  // output rows [b, e) as a matrix of their own
      std::vector<float> dequantised;              // [e - b, n_in] for FP8 sources
      Tensor part{source.dtype, Shape{e - b, n_in},
                  static_cast<const std::byte*>(source.data) + size_t(b * n_in) * dtype_size(source.dtype)};
      if (scale_inv != nullptr) {
        dequantised.resize(size_t((e - b) * n_in));
        ops::dequantize_rows(source, scale_inv, b, e, dequantised.data());
        part = Tensor{DType::kF32, Shape{e - b, n_in}, reinterpret_cast<const std::byte*>(dequantised.data())};
      }
      ops::quantize_int4(part, g, q.data() + b * (n_in / 2), sp + b * (n_in / g), zero.data() + b * (n_in / g));
    };
    if (pool != nullptr) {
      pool->parallel_for(n_out, 64, [&](int64_t b, int64_t e) { rows(b, e); });
    } else {
      rows(0, n_out);
    }
    store.replace_owned(base + ".weight", DType::kU8, Shape{n_out, n_in / 2}, std::move(q));
    store.replace_owned(base + ".weight_scale", DType::kF32, Shape{n_out, n_in / g}, std::move(scale));
    store.replace_owned(base + ".weight_zero", DType::kU8, Shape{n_out, n_in / g}, std::move(zero));
  };
  int64_t count = 0;
  for (const std::string& name : store.names()) {
    const Tensor& w = store.get(name);
    const bool is_float = w.dtype == DType::kF32 || w.dtype == DType::kBF16 || w.dtype == DType::kF16;
    if (!(is_float || w.dtype == DType::kF8E4M3) || !is_projection(name)) continue;
    const Tensor* scale_inv = nullptr;
    if (w.dtype == DType::kF8E4M3) {
      scale_inv = store.find(name + "_scale_inv");
      const Shape tiles{(w.dim(0) + ops::kFp8Block - 1) / ops::kFp8Block,
                        (w.dim(1) + ops::kFp8Block - 1) / ops::kFp8Block};
      AERIE_CHECK(scale_inv != nullptr && scale_inv->dtype == DType::kF32 && scale_inv->shape == tiles, store.source(),
                  ": the FP8 '", name, "' needs '", name, "_scale_inv' F32 ", tiles.str());
    }
    quantize(name.substr(0, name.size() - std::strlen(".weight")), w, scale_inv);
    ++count;
  }
  if (!tied_embedding.empty() && !store.contains("lm_head.weight")) {
    quantize("lm_head", store.get(tied_embedding), nullptr);
    ++count;
  }
  return count;
}

}  // namespace aerie
