#include "ops/ref/ref_ops.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace aerie::ops::ref {

float load_float(const Tensor& t, int64_t i) {
  const auto* bytes = static_cast<const uint8_t*>(t.data);
  uint16_t h;
  float f;
  switch (t.dtype) {
    case DType::kF32:
      std::memcpy(&f, bytes + i * 4, 4);
      return f;
    case DType::kBF16:
      std::memcpy(&h, bytes + i * 2, 2);
      return bf16_to_f32(h);
    case DType::kF16:
      std::memcpy(&h, bytes + i * 2, 2);
      return f16_to_f32(h);
    default:
      throw Error(str_cat("ops: weights of dtype ", dtype_name(t.dtype), " are not supported here"));
  }
}

void matmul(const float* x, int64_t n_rows, const Tensor& w, const Tensor* bias, float* y) {
  const int64_t n_out = w.dim(0), n_in = w.dim(1);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t o = 0; o < n_out; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < n_in; ++i) acc += double(x[r * n_in + i]) * load_float(w, o * n_in + i);
      y[r * n_out + o] = float(acc) + (bias ? load_float(*bias, o) : 0.0f);
    }
}

void rms_norm(const float* x, int64_t n_rows, int64_t n, const Tensor& weight, float eps, float* out) {
  for (int64_t r = 0; r < n_rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
    const float scale = 1.0f / std::sqrt(float(ss / double(n)) + eps);
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = x[r * n + i] * scale * load_float(weight, i);
  }
}

void rope(float* v, const RopeSlice& slice, const int64_t* positions, const float* inv_freq, float attention_factor) {
  const int64_t half = slice.dim / 2;
  const bool interleaved = slice.layout == RopeLayout::kInterleaved;
  for (int64_t r = 0; r < slice.n_rows; ++r)
    for (int64_t h = 0; h < slice.n_head; ++h) {
      float* p = v + r * slice.row_stride + h * slice.head_stride + slice.offset;
      for (int64_t i = 0; i < half; ++i) {
        const float angle = float(positions[r]) * inv_freq[i];
        const float c = std::cos(angle) * attention_factor, s = std::sin(angle) * attention_factor;
        const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
        const float x1 = p[a], x2 = p[b];
        p[a] = x1 * c - x2 * s;
        p[b] = x2 * c + x1 * s;
      }
    }
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

namespace {

// Element d of kv head kvh of row j, as f32.
float kv_value(const PagedRows& rows, int64_t j, int64_t kvh, int64_t head_dim, int64_t d) {
  float x;
  rows.load(j, kvh * head_dim + d, 1, &x);
  return x;
}


// x as the kernel's bf16 parts take it: itself (0), rounded to bf16 (1), or bf16 hi + bf16(x - hi) (2).
double bf16_parts_value(float x, int parts) {
  if (parts == 0) return x;
  const float hi = bf16_to_f32(f32_to_bf16(x));
  return parts == 1 ? double(hi) : double(hi) + double(bf16_to_f32(f32_to_bf16(x - hi)));
}

}  // namespace

void attention(const float* q, int64_t n_q, int64_t pos0, const PagedRows& k, const PagedRows& v, int64_t n_kv,
               int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out, int bf16_parts) {
  const int64_t group = n_head / n_head_kv;
  std::vector<double> p, pw;
  std::vector<double> qv(static_cast<size_t>(head_dim));
  for (int64_t qi = 0; qi < n_q; ++qi)
    for (int64_t h = 0; h < n_head; ++h) {
      const int64_t n_ctx = std::min(pos0 + qi + 1, n_kv), kvh = h / group;
      const float* qp = q + (qi * n_head + h) * head_dim;
      for (int64_t d = 0; d < head_dim; ++d) qv[size_t(d)] = bf16_parts_value(qp[d], bf16_parts);
      p.assign(size_t(n_ctx), 0.0);
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n_ctx; ++j) {
        double s = 0;
        for (int64_t d = 0; d < head_dim; ++d) s += qv[size_t(d)] * kv_value(k, j, kvh, head_dim, d);
        p[size_t(j)] = s * scale;
        mx = std::max(mx, p[size_t(j)]);
      }
      for (double& x : p) sum += (x = std::exp(x - mx));
      pw.resize(p.size());
      for (size_t j = 0; j < p.size(); ++j) pw[j] = bf16_parts_value(float(p[j]), bf16_parts);
      for (int64_t d = 0; d < head_dim; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < n_ctx; ++j) acc += pw[size_t(j)] * kv_value(v, j, kvh, head_dim, d);
        out[(qi * n_head + h) * head_dim + d] = float(acc / sum);
      }
    }
}

void attention(const float* q, int64_t n_q, int64_t pos0, const float* k, const float* v, int64_t n_kv,
               int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, float* out) {
  static const int32_t kOneBlock = 0;
  const int64_t width = n_head_kv * head_dim, rows = std::max<int64_t>(n_kv, 1);
  attention(q, n_q, pos0, PagedRows{k, &kOneBlock, rows, width}, PagedRows{v, &kOneBlock, rows, width}, n_kv, n_head,
            n_head_kv, head_dim, scale, out);
}

void embedding(const Tensor& table, const int64_t* ids, int64_t n_rows, float* out) {
  const int64_t n = table.dim(1);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = load_float(table, ids[r] * n + i);
}

void softmax(float* x, int64_t n_rows, int64_t n) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float* p = x + r * n;
    double mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, double(p[i]));
    for (int64_t i = 0; i < n; ++i) sum += std::exp(double(p[i]) - mx);
    for (int64_t i = 0; i < n; ++i) p[i] = float(std::exp(double(p[i]) - mx) / sum);
  }
}

int64_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

}  // namespace aerie::ops::ref
