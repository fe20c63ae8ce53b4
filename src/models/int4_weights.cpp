#include "models/int4_weights.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "io/config_reader.h"
#include "ops/int4.h"
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
    AERIE_CHECK(g[i] >= 0 && g[i] < n_groups, store.source(), ": tensor '", name, "' gives input ", i, " group ",
                g[i], ", outside [0, ", n_groups, ")");
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

// Repacks one projection `<base>.qweight` into `<base>.weight`, `_scale`, `_zero` (and `_perm`).
void convert_projection(WeightStore& store, const std::string& base, const Int4Format& f, ThreadPool* pool) {
  const std::string qweight_name = base + ".qweight", qzeros_name = base + ".qzeros", scales_name = base + ".scales";
  const Tensor& qweight = store.get(qweight_name);
  AERIE_CHECK(qweight.dtype == DType::kI32 && qweight.shape.ndim() == 2, store.source(), ": tensor '", qweight_name,
              "' is ", dtype_name(qweight.dtype), " ", qweight.shape.str(), ", expected a 2-D I32 tensor");
  const bool gptq = f.packing == Packing::kGptq;
  const int64_t n_in = gptq ? qweight.dim(0) * 8 : qweight.dim(0);
  const int64_t n_out = gptq ? qweight.dim(1) : qweight.dim(1) * 8;
  const int64_t group = f.group_size == -1 ? n_in : f.group_size;
  AERIE_CHECK(group > 0 && n_in % group == 0 && group % ops::kInt4Block == 0 && group <= ops::kInt4MaxGroup &&
                  n_out % 8 == 0,
              store.source(), ": '", qweight_name, "' (", n_out, " outputs, ", n_in, " inputs): group_size ", group,
              " must divide the inputs and be a multiple of ", ops::kInt4Block, ", and the outputs a multiple of 8");
  const int64_t n_groups = n_in / group;
  const Tensor& qzeros = get_i32(store, qzeros_name, Shape{n_groups, n_out / 8});
  const Tensor& scales = store.get(scales_name);
  AERIE_CHECK((scales.dtype == DType::kF16 || scales.dtype == DType::kBF16 || scales.dtype == DType::kF32) &&
                  scales.shape == Shape({n_groups, n_out}),
              store.source(), ": tensor '", scales_name, "' is ", dtype_name(scales.dtype), " ", scales.shape.str(),
              ", expected F16 [", n_groups, ", ", n_out, "]");
  std::vector<int32_t> perm;
  if (gptq && store.contains(base + ".g_idx"))
    perm = act_order(store, base + ".g_idx", get_i32(store, base + ".g_idx", Shape{n_in}), group, n_groups);

  const auto* qw = qweight.as<int32_t>();
  const auto* qz = qzeros.as<int32_t>();
  std::vector<uint8_t> q(size_t(n_out * n_in / 2)), zero(size_t(n_out * n_groups));
  std::vector<uint8_t> scale(size_t(n_out * n_groups) * sizeof(float));
  auto* sp = reinterpret_cast<float*>(scale.data());
  // Outputs [b, e): unpack each row in input order (or act order), then pack into ops/int4.h's blocks.
  const auto rows = [&](int64_t b, int64_t e) {
    std::vector<uint8_t> values(static_cast<size_t>(n_in));
    for (int64_t o = b; o < e; ++o) {
      for (int64_t j = 0; j < n_in; ++j) {
        const int64_t i = perm.empty() ? j : perm[size_t(j)];
        values[size_t(j)] = gptq ? nibble_of(qw[(i / 8) * n_out + o], int(i % 8))
                                 : nibble_of(qw[i * (n_out / 8) + o / 8], kAwqNibble[o % 8]);
      }
      ops::pack_int4_row(values.data(), n_in, q.data() + o * (n_in / 2));
      for (int64_t g = 0; g < n_groups; ++g) {
        const int32_t packed = qz[g * (n_out / 8) + o / 8];
        zero[size_t(o * n_groups + g)] = uint8_t(nibble_of(packed, gptq ? int(o % 8) : kAwqNibble[o % 8]) + f.zero_offset);
        sp[o * n_groups + g] = ops::ref::load_float(scales, g * n_out + o);
      }
    }
  };
  if (pool != nullptr) {
    pool->parallel_for(n_out, 64, [&](int64_t b, int64_t e) { rows(b, e); });
  } else {
    rows(0, n_out);
  }
  for (int64_t k = 0; k < n_out * n_groups; ++k)
    AERIE_CHECK(zero[size_t(k)] <= ops::kInt4MaxZero && std::isfinite(sp[k]), store.source(), ": '", qzeros_name,
                "' / '", scales_name, "' give output ", k / n_groups, " group ", k % n_groups, " zero point ",
                int(zero[size_t(k)]), " and scale ", sp[k], " (zero points must be at most ", ops::kInt4MaxZero,
                ", scales finite)");
  const std::string weight_name = base + ".weight";
  AERIE_CHECK(!store.contains(weight_name), store.source(), ": both '", qweight_name, "' and '", weight_name,
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
    AERIE_CHECK(format == "gptq" || format == "gptq_v2", source, ": unsupported quantization_config.checkpoint_format '",
                format, "' (gptq or gptq_v2)");
    f.zero_offset = format == "gptq" ? 1 : 0;
  } else {
    f.packing = Packing::kAwq;
    std::string version = r.string("version", "gemm");
    std::transform(version.begin(), version.end(), version.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    AERIE_CHECK(version == "gemm", source, ": unsupported AWQ quantization_config.version '", version,
                "' (the GEMM packing only)");
    AERIE_CHECK(r.boolean("zero_point", true), source, ": AWQ without zero points is not supported");
  }
  return f;
}

}  // namespace

int64_t convert_int4_checkpoint(WeightStore& store, const nlohmann::json& config, ThreadPool* pool) {
  if (!config.contains("quantization_config") || config["quantization_config"].is_null()) return 0;
  const nlohmann::json& qc = config["quantization_config"];
  AERIE_CHECK(qc.is_object(), store.source(), ": 'quantization_config' must be an object or null");
  const std::string method = ConfigReader(qc, store.source(), "quantization_config.").string("quant_method", "");
  if (method != "gptq" && method != "awq") return 0;  // compressed-tensors int8 and the like load by dtype
  const Int4Format format = parse_format(qc, store.source(), method);
  int64_t count = 0;
  for (const std::string& name : store.names()) {
    if (!ends_with(name, ".qweight")) continue;
    convert_projection(store, name.substr(0, name.size() - std::strlen(".qweight")), format, pool);
    ++count;
  }
  AERIE_CHECK(count > 0, store.source(), ": quantization_config says ", method, " but no tensor is named '*.qweight'");
  return count;
}

int64_t quantize_projections_int4(WeightStore& store, int64_t group, const std::string& tied_embedding,
                                  ThreadPool* pool) {
  const auto quantize = [&](const std::string& base, const Tensor& source) {
    AERIE_CHECK(source.shape.ndim() == 2, store.source(), ": '", base, ".weight' is not a matrix");
    const int64_t n_out = source.dim(0), n_in = source.dim(1), g = group == 0 ? n_in : group;
    AERIE_CHECK(g % ops::kInt4Block == 0 && n_in % g == 0 && g <= ops::kInt4MaxGroup, store.source(), ": int4 group ",
                g, " for '", base, ".weight' (", n_in, " inputs) must be a multiple of ", ops::kInt4Block,
                " dividing the inputs (--int4-group)");
    std::vector<uint8_t> q(size_t(n_out * n_in / 2)), zero(size_t(n_out * (n_in / g)));
    std::vector<uint8_t> scale(zero.size() * sizeof(float));
    auto* sp = reinterpret_cast<float*>(scale.data());
    const auto rows = [&](int64_t b, int64_t e) {  // output rows [b, e) as a matrix of their own
      const Tensor part{source.dtype, Shape{e - b, n_in},
                        static_cast<const std::byte*>(source.data) + size_t(b * n_in) * dtype_size(source.dtype)};
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
    if (!is_float || !(ends_with(name, "_proj.weight") || name == "lm_head.weight")) continue;
    quantize(name.substr(0, name.size() - std::strlen(".weight")), w);
    ++count;
  }
  if (!tied_embedding.empty() && !store.contains("lm_head.weight")) {
    quantize("lm_head", store.get(tied_embedding));
    ++count;
  }
  return count;
}

}  // namespace aerie
