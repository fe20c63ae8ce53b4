// Run-time dispatch of the kernel API, and the element-wise ops. Hot loops of the element-wise ops are
// compiled for several ISAs with target_clones (GCC picks one at load time through the CPU's features).
#include "ops/ops.h"
#include "ops/tree_attention.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_scratch.h"
#include "ops/cpu/kernels.h"
#include "ops/ggml_blocks.h"
#include "ops/ref/ref_ops.h"

#define AERIE_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace aerie::ops {
namespace {

Bf16Activations initial_bf16_mode() {
  const char* env = std::getenv("AERIE_BF16_ACTIVATIONS");
  return env != nullptr && std::string_view(env) == "split" ? Bf16Activations::kSplit : Bf16Activations::kRounded;
}

Bf16Activations g_bf16_mode = initial_bf16_mode();

bool is_float_dtype(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

AERIE_CLONES float dot(const float* a, const float* b, int64_t n) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

AERIE_CLONES void axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

AERIE_CLONES void scale_in_place(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

AERIE_CLONES double sum_squares(const float* x, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += x[i + j] * x[i + j];
  double total = 0;
  for (float a : acc) total += a;
  for (; i < n; ++i) total += double(x[i]) * x[i];
  return total;
}

// Weights of one row as f32 (a norm's weight vector).
void weight_row(const Tensor& w, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = ref::load_float(w, i);
}

thread_local bool t_batch_invariant = false;  // BatchInvariantScope's, per thread

}  // namespace

bool batch_invariant() { return t_batch_invariant; }
BatchInvariantScope::BatchInvariantScope(bool on) : previous_(t_batch_invariant) {
  t_batch_invariant = on || previous_;
}
BatchInvariantScope::~BatchInvariantScope() { t_batch_invariant = previous_; }

void set_bf16_activations(Bf16Activations mode) { g_bf16_mode = mode; }
Bf16Activations bf16_activations() { return g_bf16_mode; }

const char* matmul_isa(DType weight_dtype) {
  if (dtype_is_block(weight_dtype)) return matmul_blocks_isa(weight_dtype);
  const CpuFeatures& f = cpu_features();
  if (weight_dtype == DType::kBF16 && f.avx512_bf16) return "avx512_bf16";
  if (f.has_avx2_tier()) return "avx2";
  return "scalar";
}

void matmul(const float* x, int64_t n_rows, const Tensor& w, const Tensor* bias, float* y, ThreadPool& pool) {
  if (dtype_is_block(w.dtype)) return matmul_blocks(x, n_rows, w, bias, y, pool);
  AERIE_CHECK(w.shape.ndim() == 2 && is_float_dtype(w.dtype), "matmul: weight must be a 2-D F32/BF16/F16 tensor, got ",
              dtype_name(w.dtype), " ", w.shape.str());
  const int64_t n_out = w.dim(0), n_in = w.dim(1);
  if (n_rows <= 0) return;
  const CpuFeatures& f = cpu_features();
  const bool split = g_bf16_mode == Bf16Activations::kSplit;
  cpu::OnednnRows gemm_rows{};
  if (gemm_rows_allowed(n_rows) && cpu::onednn_rows_bf16(x, n_rows, w, split, gemm_rows)) {
    // Two column ranges per thread: wide enough for oneDNN's blocking, and a second range that a thread
    // finishing early can take from one the OS descheduled.
    const int64_t grain = std::max<int64_t>(64, (n_out / (2 * pool.n_threads()) + 63) / 64 * 64);
    pool.parallel_for(n_out, grain,
                      [&](int64_t b, int64_t e) { cpu::matmul_onednn_bf16_columns(gemm_rows, w, b, e, y); });
    cpu::onednn_rows_finish(gemm_rows, n_out, y);
  } else if (w.dtype == DType::kBF16 && f.avx512_bf16) {
    thread_local std::vector<uint16_t> packed;
    const int parts = split ? 2 : 1;
    packed.resize(size_t(cpu::packed_rows_size(n_rows, n_in, parts)));
    cpu::pack_rows_avx512(x, n_rows, n_in, parts, packed.data());
    const cpu::PackedRows rows{packed.data(), n_rows, n_in, parts};
    pool.parallel_for(n_out, 64, [&](int64_t b, int64_t e) { cpu::matmul_bf16_avx512bf16(rows, w, b, e, y); });
  } else if (f.has_avx2_tier()) {
    pool.parallel_for(n_out, 32, [&](int64_t b, int64_t e) { cpu::matmul_avx2(x, n_rows, w, b, e, y); });
  } else {
    pool.parallel_for(n_out, 16, [&](int64_t b, int64_t e) { cpu::matmul_scalar(x, n_rows, w, b, e, y); });
  }
  if (bias != nullptr) {
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t o = 0; o < n_out; ++o) y[r * n_out + o] += ref::load_float(*bias, o);
  }
}

void rms_norm(const float* x, int64_t n_rows, int64_t n, const Tensor& weight, float eps, float* out,
              ThreadPool& pool) {
  thread_local std::vector<float> weight_f32;
  weight_f32.resize(size_t(n));
  weight_row(weight, n, weight_f32.data());
  const float* w = weight_f32.data();  // a plain pointer: a thread_local named in the lambda would be the worker's own
  pool.parallel_for(n_rows, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float scale = 1.0f / std::sqrt(float(sum_squares(x + r * n, n) / double(n)) + eps);
      for (int64_t i = 0; i < n; ++i) out[r * n + i] = x[r * n + i] * scale * w[i];
    }
  });
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out, ThreadPool& pool) {
  const bool avx512 = cpu_features().has_avx512_tier();
  pool.parallel_for(n, 4096, [&](int64_t b, int64_t e) {
    if (avx512) {
      cpu::silu_mul_avx512(gate + b, up + b, e - b, out + b);
    } else {
      for (int64_t i = b; i < e; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    }
  });
}

namespace {

// Queries up to which one sequence's attention over more than one context chunk is split by chunks
// (flash-decoding: decode and verification); prefills split by kv heads and reuse each head's transposed keys.
// A tree verification splits up to more rows: its rows share every chunk before the tree's.
constexpr int64_t kSplitMaxQueries = 16;
constexpr int64_t kSplitMaxTreeRows = 32;

}  // namespace

int attention_bf16_parts(int64_t head_dim, KvDType key_dtype) {
  // Opt-in until it is measured on the machines it is for: on the shared Intel host where it was written it
  // ran +4% to +14% at one query and -9% to -17% at five (docs/speed.md "Long contexts").
  static const bool wanted = [] {
    const char* env = std::getenv("AERIE_ATTENTION_BF16");
    return env != nullptr && std::string_view(env) == "1";
  }();
  const CpuFeatures& cpu = cpu_features();
  if (!wanted || !cpu.has_avx512_tier() || !cpu.avx512_bf16 || !cpu::attention_avx512_supported(head_dim) ||
      !cpu::attention_avx512bf16_supported(head_dim, key_dtype))
    return 0;
  return bf16_activations() == Bf16Activations::kSplit ? 2 : 1;
}

namespace {

// ops::attention, and with tree_parent ops::tree_attention: one implementation, so that a tree row gives
// exactly the bits of the chain of its path on every tier.
void attention_rows(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v, int64_t n_kv,
                    int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out, ThreadPool& pool,
                    const int32_t* tree_parent, int64_t tree_cached) {
  AERIE_CHECK(k.dtype == v.dtype || v.base == nullptr, "attention: keys and values of different KV dtypes");
  AERIE_CHECK(k.scales == nullptr || k.scale_width % head_dim == 0, "attention: FP8 scale groups of ", k.scale_width,
              " values split heads of ", head_dim);
  // The caller's per-thread scratch, sized before the job (bound to a reference: a thread_local named in
  // the lambda would be each worker's own).
  thread_local TaskScratch caller_scratch;
  TaskScratch& scratch = caller_scratch;
  // The tiled kernels (ops/cpu/attention_driver.h) on the best tier the machine has; else the per-row loop below.
  const CpuFeatures& cpu = cpu_features();
  const bool avx512 = cpu.has_avx512_tier() && cpu::attention_avx512_supported(head_dim);
  const bool avx2 = !avx512 && cpu.has_avx2_tier() && cpu::attention_avx2_supported(head_dim);
  if (avx512 || avx2) {
    const int bf16_parts = attention_bf16_parts(head_dim, k.dtype);
    const cpu::AttentionTier tier =
        avx512 ? cpu::attention_tier_avx512(bf16_parts > 0, bf16_parts == 2)
               : cpu::AttentionTier{cpu::attention_avx2, cpu::attention_split_chunks_avx2,
                                    cpu::attention_split_merge_avx2};
    const int64_t max_ctx = std::min(pos0 + n_q, n_kv);
    const int64_t max_split = tree_parent != nullptr ? kSplitMaxTreeRows : kSplitMaxQueries;
    if (n_q <= max_split && max_ctx > cpu::kAttentionChunkTokens) {
      // Few queries over a long context: tasks (kv head, context chunk), then a merge per (kv head, query).
      thread_local std::vector<float> caller_partials;
      std::vector<float>& partials = caller_partials;
      partials.resize(cpu::attention_split_partial_floats(n_q, pos0, n_kv, n_head, n_head_kv, head_dim));
      scratch.reserve(pool.n_threads(), cpu::attention_split_scratch_bytes(n_q, pos0, n_kv, n_head, n_head_kv, head_dim,
                                                                           tree_parent, tree_cached));
      const int64_t n_tasks = cpu::attention_split_tasks(n_q, pos0, n_kv, n_head, n_head_kv, tree_parent, tree_cached);
      pool.parallel_for(n_tasks, 1, [&](int64_t b, int64_t e) {
        tier.split_chunks(q, n_q, pos0, k, v, n_kv, n_head, n_head_kv, head_dim, scale, scratch.get(), partials.data(),
                          b, e, tree_parent, tree_cached);
      });
      pool.parallel_for(n_head_kv * n_q, 1, [&](int64_t b, int64_t e) {
        tier.split_merge(n_q, pos0, n_kv, n_head, n_head_kv, head_dim, partials.data(), out, scratch.get(), b, e,
                         tree_parent, tree_cached);
      });
      return;
    }
    scratch.reserve(pool.n_threads(),
                    cpu::attention_scratch_bytes(n_q, pos0, n_kv, n_head, n_head_kv, head_dim, tree_cached));
    pool.parallel_for(n_head_kv, 1, [&](int64_t b, int64_t e) {
      tier.attention(q, n_q, pos0, k, v, n_kv, n_head, n_head_kv, head_dim, scale, out, scratch.get(), b, e,
                     tree_parent, tree_cached);
    });
    return;
  }
  const int64_t group = n_head / n_head_kv;
  // One task per (query row, head); each sees keys [0, pos0 + row] (a tree row: [0, pos0) and its
  // ancestors' slots, taken as its path's chain would have them). f32 rows are read in place; bf16 / fp8
  // rows are widened one head row at a time into the task's scratch.
  const size_t n_scores = size_t(std::max<int64_t>(1, std::min(pos0 + n_q, n_kv)));
  const int64_t tree0 = pos0 - tree_cached;  // the slot of tree row 0; query qi is tree row tree_cached + qi
  scratch.reserve(pool.n_threads(),
                  sizeof(float) * (n_scores + size_t(head_dim)) + sizeof(int64_t) * size_t(n_q + tree_cached + 1));
  pool.parallel_for(n_q * n_head, 1, [&](int64_t b, int64_t e) {
    int64_t* path = reinterpret_cast<int64_t*>(scratch.get());               // [depth] a tree row's ancestor slots
    float* scores = reinterpret_cast<float*>(path + n_q + tree_cached + 1);  // [n_ctx]
    float* widened = scores + n_scores;                                      // [head_dim]
    for (int64_t t = b; t < e; ++t) {
      const int64_t qi = t / n_head, h = t % n_head, kvh = h / group;
      int64_t n_ctx = std::min(pos0 + qi + 1, n_kv), n_front = n_ctx;
      if (tree_parent != nullptr) {
        int64_t depth = 0;
        for (int64_t r = tree_cached + qi; r >= 0; r = tree_parent[r]) ++depth;
        for (int64_t r = tree_cached + qi, d = depth - 1; r >= 0; r = tree_parent[r], --d) path[d] = tree0 + r;
        n_front = tree0;
        n_ctx = tree0 + depth;
      }
      // This head's part of context row j: in place (f32) or widened into the scratch.
      auto head_row = [&](const PagedRows& rows, int64_t j) {
        const int64_t slot = j < n_front ? j : path[j - n_front];
        if (rows.dtype == KvDType::kF32) return rows.row<float>(slot) + kvh * head_dim;
        rows.load(slot, kvh * head_dim, head_dim, widened);
        return static_cast<const float*>(widened);
      };
      const float* qp = q + (qi * n_head + h) * head_dim;
      float mx = -INFINITY;
      for (int64_t j = 0; j < n_ctx; ++j) {
        scores[size_t(j)] = dot(qp, head_row(k, j), head_dim) * scale;
        mx = std::max(mx, scores[size_t(j)]);
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < n_ctx; ++j) sum += (scores[size_t(j)] = std::exp(scores[size_t(j)] - mx));
      float* op = out + (qi * n_head + h) * head_dim;
      std::memset(op, 0, size_t(head_dim) * sizeof(float));
      for (int64_t j = 0; j < n_ctx; ++j) axpy(scores[size_t(j)], head_row(v, j), op, head_dim);
      scale_in_place(op, 1.0f / sum, head_dim);
    }
  });
}

}  // namespace

void attention(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v, int64_t n_kv,
               int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out, ThreadPool& pool) {
  attention_rows(q, n_q, pos0, k, v, n_kv, n_head, n_head_kv, head_dim, scale, out, pool, nullptr, 0);
}

void tree_attention(const float* q, int64_t n_q, int64_t pos0, const int32_t* parent, const PagedRows& k,
                    const PagedRows& v, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out,
                    ThreadPool& pool, int64_t n_cached) {
  AERIE_CHECK(k.dtype == v.dtype, "tree_attention: keys and values of different KV dtypes");
  AERIE_CHECK(n_cached >= 0 && n_cached <= pos0, "tree_attention: ", n_cached, " cached tree rows before slot ", pos0);
  check_tree_parents(parent, n_cached + n_q, "tree_attention");
  attention_rows(q, n_q, pos0, k, v, pos0 + n_q, n_head, n_head_kv, head_dim, scale, out, pool, parent, n_cached);
}

void attention(const float* q, int64_t n_q, int64_t pos0, const float* k, const float* v, int64_t n_kv, int64_t n_head,
               int64_t n_head_kv, int64_t head_dim, float scale, float* out, ThreadPool& pool) {
  static const int32_t kOneBlock = 0;
  const int64_t width = n_head_kv * head_dim;
  const int64_t rows = std::max<int64_t>(n_kv, 1);
  attention(q, n_q, pos0, PagedRows{k, &kOneBlock, rows, width}, PagedRows{v, &kOneBlock, rows, width}, n_kv, n_head,
            n_head_kv, head_dim, scale, out, pool);
}

void embedding(const Tensor& table, const int64_t* ids, int64_t n_rows, float* out) {
  if (dtype_is_block(table.dtype)) {  // a GGUF token table: each requested row dequantised
    AERIE_CHECK(table.shape.ndim() == 2, "embedding: table must be 2-D, got ", table.shape.str());
    for (int64_t r = 0; r < n_rows; ++r) {
      AERIE_CHECK(ids[r] >= 0 && ids[r] < table.dim(0), "embedding: token id ", ids[r], " outside the table's ",
                  table.dim(0), " rows");
      dequantize_block_rows(table, ids[r], ids[r] + 1, out + r * table.dim(1));
    }
    return;
  }
  AERIE_CHECK(table.shape.ndim() == 2 && is_float_dtype(table.dtype), "embedding: table must be 2-D F32/BF16/F16");
  ref::embedding(table, ids, n_rows, out);
}

void add_inplace(float* x, const float* y, int64_t n) { axpy(1.0f, y, x, n); }

void softmax(float* x, int64_t n_rows, int64_t n) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float* p = x + r * n;
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, p[i]);
    for (int64_t i = 0; i < n; ++i) sum += (p[i] = std::exp(p[i] - mx));
    scale_in_place(p, 1.0f / sum, n);
  }
}

// Eight running maxima, lane j over the indices i = j (mod 8), instead of ref::argmax's one chain through
// x[best]: independent chains the core runs side by side (a 128k-id row, which every greedy row of a step
// reads, took ~8% of a batch-16 greedy run of a 128k-vocabulary model through the single chain: 174 -> 57 us
// per row). The merge keeps ref::argmax's answer exactly: the first index of the maximum, NaNs never
// chosen, and 0 when x[0] is NaN or nothing beats it.
int64_t argmax(const float* x, int64_t n) {
  constexpr int kLanes = 8;
  if (n < 4 * kLanes) return ref::argmax(x, n);
  float best_value[kLanes];
  int64_t best_index[kLanes];
  for (int j = 0; j < kLanes; ++j) {
    best_value[j] = -INFINITY;
    best_index[j] = -1;
  }
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j)
      if (x[i + j] > best_value[j]) {
        best_value[j] = x[i + j];
        best_index[j] = i + j;
      }
  for (; i < n; ++i)  // the tail, into the lane its index belongs to
    if (x[i] > best_value[i % kLanes]) {
      best_value[i % kLanes] = x[i];
      best_index[i % kLanes] = i;
    }
  int64_t best = 0;
  for (int j = 0; j < kLanes; ++j) {
    if (best_index[j] < 0) continue;
    if (best_value[j] > x[best] || (best_value[j] == x[best] && best_index[j] < best)) best = best_index[j];
  }
  return best;
}

}  // namespace aerie::ops
