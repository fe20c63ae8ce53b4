#include "models/mla.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/thread_scratch.h"
#include "io/trace.h"
#include "ops/ops.h"
#include "ops/tree_attention.h"

namespace aerie {
namespace {

// The absorbed form's per-head products are small dense loops over kv_lora; compiled for several ISAs
// (GCC picks one at load time) and written with 16 partial sums so the reduction vectorises.
#define AERIE_MLA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

AERIE_MLA_CLONES float dot(const float* a, const float* b, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += a[i + j] * b[i + j];
  float total = 0.0f;
  for (float x : acc) total += x;
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
}

AERIE_MLA_CLONES void axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// Rows [row_begin, row_end) of kv_b as f32 [rows, kv_lora]: a view when stored as F32, else converted
// into `buffer` (the thread's own). kv_b is read slice by slice, never dequantised whole.
const float* kv_b_rows(const LinearWeight& kv_b, int64_t row_begin, int64_t row_end, float* buffer) {
  const int64_t n_in = kv_b.n_in();
  if (kv_b.weight->dtype == DType::kF32) return kv_b.weight->as<float>() + row_begin * n_in;
  linear_rows(kv_b, row_begin, row_end, buffer);
  return buffer;
}

// The caller's per-thread buffers for kv_b_rows of up to `rows` rows, grown before the job.
TaskScratch& kv_b_scratch(ThreadPool& pool, const LinearWeight& kv_b, int64_t rows) {
  thread_local TaskScratch scratch;
  scratch.reserve(pool.n_threads(), sizeof(float) * size_t(rows * kv_b.n_in()));
  return scratch;
}

// Absorbed form for the given rows (a batch's decode/verification rows):
//   q_lat[r, h] = (q_nope[r, h] W_k[h]) | q_pe[r, h]      q: [n_tokens, n_head, dn + dr]
//   q_lat: [n_tokens, n_head, kv_lora + dr]
void absorb_queries(const float* q, std::span<const int64_t> rows, const LinearWeight& kv_b, const MlaShape& s,
                    float* q_lat, ThreadPool& pool) {
  const int64_t dn = s.qk_nope_head_dim, dr = s.qk_rope_head_dim, dv = s.v_head_dim, c = s.kv_lora_rank;
  const int64_t width = s.cache_width(), q_head = dn + dr;
  TaskScratch& scratch = kv_b_scratch(pool, kv_b, dn);
  pool.parallel_for(s.n_head, 1, [&](int64_t h0, int64_t h1) {
    float* buffer = reinterpret_cast<float*>(scratch.get());
    for (int64_t h = h0; h < h1; ++h) {
      const float* w_k = kv_b_rows(kv_b, h * (dn + dv), h * (dn + dv) + dn, buffer);  // [dn, kv_lora]
      for (int64_t r : rows) {
        const float* qn = q + (r * s.n_head + h) * q_head;
        float* dst = q_lat + (r * s.n_head + h) * width;
        std::fill(dst, dst + c, 0.0f);
        for (int64_t d = 0; d < dn; ++d) axpy(qn[d], w_k + d * c, dst, c);
        std::memcpy(dst + c, qn + dn, size_t(dr) * sizeof(float));
      }
    }
  });
}

// attn[r, h, :] = W_v[h] o_lat[r, h, :kv_lora]     o_lat: [n_tokens, n_head, kv_lora + dr];
// attn: [n_tokens, n_head, dv]
void project_values(const float* o_lat, std::span<const int64_t> rows, const LinearWeight& kv_b, const MlaShape& s,
                    float* attn, ThreadPool& pool) {
  const int64_t dn = s.qk_nope_head_dim, dv = s.v_head_dim, c = s.kv_lora_rank, width = s.cache_width();
  TaskScratch& scratch = kv_b_scratch(pool, kv_b, dv);
  pool.parallel_for(s.n_head, 1, [&](int64_t h0, int64_t h1) {
    float* buffer = reinterpret_cast<float*>(scratch.get());
    for (int64_t h = h0; h < h1; ++h) {
      const float* w_v = kv_b_rows(kv_b, h * (dn + dv) + dn, (h + 1) * (dn + dv), buffer);  // [dv, kv_lora]
      for (int64_t r : rows) {
        const float* src = o_lat + (r * s.n_head + h) * width;
        float* dst = attn + (r * s.n_head + h) * dv;
        for (int64_t j = 0; j < dv; ++j) dst[j] = dot(w_v + j * c, src, c);
      }
    }
  });
}

// Rows [row_begin, row_begin + n_rows) of w as a projection [n_rows, n_in], viewed in place (`view` holds
// the header; any dtype, block types included: they are addressed by whole rows).
LinearWeight row_view(const LinearWeight& w, int64_t row_begin, int64_t n_rows, Tensor& view) {
  const Tensor& t = *w.weight;
  const size_t row_bytes = dtype_row_bytes(t.dtype, t.dim(1));
  view = Tensor{t.dtype, Shape{n_rows, t.dim(1)},
                static_cast<const std::byte*>(t.data) + size_t(row_begin) * row_bytes};
  return float_linear(&view);
}

// The per-head products of split weights (k_b, v_b: [n_head * n_out, n_in], head h's rows [h n_out, (h + 1)
// n_out)): for every head h and listed row r,
//   out[r, h, :n_out] = W_h in[r, h, :n_in]
// where `in` rows hold n_head heads of in_head floats (the head's first n_in used), `out` rows n_head heads
// of out_head floats. Each head is one linear() on its rows gathered into [rows, n_in].
void per_head_linear(const float* in, int64_t in_head, std::span<const int64_t> rows, const LinearWeight& stacked,
                     int64_t n_head, MlaScratch& scratch, float* out, int64_t out_head, ThreadPool& pool) {
  const int64_t n_in = stacked.n_in(), n_out = stacked.n_out() / n_head, n_rows = int64_t(rows.size());
  float* head_in = scratch.head_in.reserve(n_rows * n_in);     // [rows, n_in]
  float* head_out = scratch.head_out.reserve(n_rows * n_out);  // [rows, n_out]
  for (int64_t h = 0; h < n_head; ++h) {
    for (int64_t i = 0; i < n_rows; ++i)
      std::memcpy(head_in + i * n_in, in + (rows[size_t(i)] * n_head + h) * in_head, size_t(n_in) * sizeof(float));
    Tensor view;
    linear(head_in, n_rows, row_view(stacked, h * n_out, n_out, view), head_out, pool);
    for (int64_t i = 0; i < n_rows; ++i)
      std::memcpy(out + (rows[size_t(i)] * n_head + h) * out_head, head_out + i * n_out, size_t(n_out) * sizeof(float));
  }
}

// The absorbed form's two products, from kv_b or from k_b / v_b:
//   q_lat[r, h] = (q_nope[r, h] W_k[h]) | q_pe[r, h]     q: [n_tokens, n_head, dn + dr] -> q_lat: [.., kv_lora + dr]
//   attn[r, h]  = W_v[h] o_lat[r, h, :kv_lora]           o_lat: [n_tokens, n_head, kv_lora + dr] -> attn: [.., dv]
void absorbed_queries(const float* q, std::span<const int64_t> rows, const MlaWeights& w, const MlaShape& s,
                      MlaScratch& scratch, float* q_lat, ThreadPool& pool) {
  if (!w.has_split_kv_b()) return absorb_queries(q, rows, w.kv_b, s, q_lat, pool);
  const int64_t dn = s.qk_nope_head_dim, dr = s.qk_rope_head_dim, width = s.cache_width();
  per_head_linear(q, dn + dr, rows, w.k_b, s.n_head, scratch, q_lat, width, pool);
  for (int64_t r : rows)
    for (int64_t h = 0; h < s.n_head; ++h)
      std::memcpy(q_lat + (r * s.n_head + h) * width + s.kv_lora_rank, q + (r * s.n_head + h) * (dn + dr) + dn,
                  size_t(dr) * sizeof(float));
}

void absorbed_values(const float* o_lat, std::span<const int64_t> rows, const MlaWeights& w, const MlaShape& s,
                     MlaScratch& scratch, float* attn, ThreadPool& pool) {
  if (!w.has_split_kv_b()) return project_values(o_lat, rows, w.kv_b, s, attn, pool);
  per_head_linear(o_lat, s.cache_width(), rows, w.v_b, s.n_head, scratch, attn, s.v_head_dim, pool);
}

// Expanded form for one sequence: keys and values of all its positions through kv_b, ordinary attention.
// Heads are padded to D = max(dn + dr, dv) with zeros so one attention call takes q.k and v alike.
void expanded_attention(const float* q, const SequenceRows& seq, int64_t pos0, int64_t layer, const MlaWeights& w,
                        const MlaShape& s, MlaScratch& scratch, float* attn, ThreadPool& pool) {
  const int64_t dn = s.qk_nope_head_dim, dr = s.qk_rope_head_dim, dv = s.v_head_dim, c = s.kv_lora_rank;
  const int64_t h_n = s.n_head, q_head = dn + dr, D = std::max(dn + dr, dv);
  const int64_t n_kv = pos0 + seq.n_rows, n_q = seq.n_rows;
  const PagedRows cache = seq.kv->key_rows(layer);                         // rows of kv_lora + dr
  float* latent = scratch.latent.reserve(n_kv * c);                        // [n_kv, kv_lora]
  float* kv_full = scratch.kv_full.reserve(n_kv * h_n * (dn + dv));        // [n_kv, n_head, dn + dv]
  float* k_full = scratch.k_full.reserve(n_kv * h_n * D);                  // [n_kv, n_head, D]
  float* v_full = scratch.v_full.reserve(n_kv * h_n * D);                  // [n_kv, n_head, D]
  float* q_full = scratch.q_full.reserve(n_q * h_n * D);                   // [n_q, n_head, D]
  float* o_full = scratch.o_full.reserve(n_q * h_n * D);                   // [n_q, n_head, D]
  for (int64_t t = 0; t < n_kv; ++t) cache.load(t, 0, c, latent + t * c);  // widened from the cache's dtype
  linear(latent, n_kv, w.kv_b, kv_full, pool);
  std::fill(k_full, k_full + n_kv * h_n * D, 0.0f);
  std::fill(v_full, v_full + n_kv * h_n * D, 0.0f);
  std::fill(q_full, q_full + n_q * h_n * D, 0.0f);
  for (int64_t t = 0; t < n_kv; ++t) {
    for (int64_t h = 0; h < h_n; ++h) {
      const float* kv = kv_full + (t * h_n + h) * (dn + dv);
      float* k = k_full + (t * h_n + h) * D;
      std::memcpy(k, kv, size_t(dn) * sizeof(float));
      cache.load(t, c, dr, k + dn);  // the shared rope key
      std::memcpy(v_full + (t * h_n + h) * D, kv + dn, size_t(dv) * sizeof(float));
    }
  }
  for (int64_t r = 0; r < n_q; ++r)
    for (int64_t h = 0; h < h_n; ++h)
      std::memcpy(q_full + (r * h_n + h) * D, q + ((seq.row_begin + r) * h_n + h) * q_head,
                  size_t(q_head) * sizeof(float));
  ops::attention(q_full, n_q, pos0, k_full, v_full, n_kv, h_n, h_n, D, s.scale, o_full, pool);
  for (int64_t r = 0; r < n_q; ++r)
    for (int64_t h = 0; h < h_n; ++h)
      std::memcpy(attn + ((seq.row_begin + r) * h_n + h) * dv, o_full + (r * h_n + h) * D, size_t(dv) * sizeof(float));
}

}  // namespace

void mla_attention(const float* x, int64_t n_tokens, std::span<const SequenceRows> sequences, const int64_t* positions,
                   int64_t layer, const MlaWeights& w, const MlaShape& s, const float* inv_freq, MlaPath path,
                   MlaScratch& scratch, float* out, ThreadPool& pool) {
  if (n_tokens == 0) return;  // a data-parallel rank without rows this step
  const int64_t dn = s.qk_nope_head_dim, dr = s.qk_rope_head_dim, dv = s.v_head_dim, c = s.kv_lora_rank;
  const int64_t h_n = s.n_head, width = s.cache_width(), q_head = dn + dr;
  float* q = scratch.q.reserve(n_tokens * h_n * q_head);    // [n_tokens, n_head, dn + dr]
  float* kv_a = scratch.kv_a.reserve(n_tokens * width);     // [n_tokens, kv_lora + dr]
  float* attn = scratch.attn.reserve(n_tokens * h_n * dv);  // [n_tokens, n_head, dv]
  if (w.has_q_lora()) {
    const int64_t q_lora = w.q_a.n_out();
    float* q_a = scratch.q_a.reserve(n_tokens * q_lora);  // [n_tokens, q_lora_rank]
    linear(x, n_tokens, w.q_a, q_a, pool);
    ops::rms_norm(q_a, n_tokens, q_lora, *w.q_a_norm, s.eps, q_a, pool);
    linear(q_a, n_tokens, w.q_b, q, pool);
  } else {
    linear(x, n_tokens, w.q, q, pool);
  }
  linear(x, n_tokens, w.kv_a, kv_a, pool);
  for (int64_t r = 0; r < n_tokens; ++r)
    ops::rms_norm(kv_a + r * width, 1, c, *w.kv_a_norm, s.eps, kv_a + r * width, pool);
  // The rope parts: the last dr of each query head, and the shared rope key after the latent.
  const ops::RopeLayout layout = s.rope_interleave ? ops::RopeLayout::kInterleaved : ops::RopeLayout::kHalfSplit;
  const ops::RopeSlice q_pe{.n_rows = n_tokens,
                            .row_stride = h_n * q_head,
                            .n_head = h_n,
                            .head_stride = q_head,
                            .offset = dn,
                            .dim = dr,
                            .layout = layout};
  const ops::RopeSlice k_pe{.n_rows = n_tokens, .row_stride = width, .offset = c, .dim = dr, .layout = layout};
  ops::rope(q, q_pe, positions, inv_freq, s.rope_factor, pool);
  ops::rope(kv_a, k_pe, positions, inv_freq, s.rope_factor, pool);

  // Cache rows first: every form reads the sequence's positions [0, pos0 + n_rows) from the cache.
  // The row lists live in the scratch: clear() keeps their capacity, so a step allocates nothing.
  std::vector<int64_t>& absorbed_rows = scratch.absorbed_rows;
  std::vector<uint8_t>& seq_absorbed = scratch.seq_absorbed;
  absorbed_rows.clear();
  seq_absorbed.assign(sequences.size(), 0);
  for (size_t i = 0; i < sequences.size(); ++i) {
    const SequenceRows& seq = sequences[i];
    const int64_t pos0 = seq.kv->length();  // the first row's slot (a tree row's position is its depth's)
    // Rows into the cache's blocks, converted to its dtype.
    seq.kv->write_rows(layer, pos0, seq.n_rows, kv_a + seq.row_begin * width, nullptr);
    // Draft tree rows take the absorbed form, whose attention has a tree form (ops/tree_attention.h); so
    // does every row of split k_b / v_b weights (the expanded form needs kv_b's W_k).
    seq_absorbed[i] = seq.tree_parent != nullptr || path == MlaPath::kAbsorbed || w.has_split_kv_b() ||
                      (path == MlaPath::kAuto && (seq.n_rows <= kMlaAbsorbedMaxRows || ops::batch_invariant()));
    if (seq_absorbed[i])
      for (int64_t r = 0; r < seq.n_rows; ++r) absorbed_rows.push_back(seq.row_begin + r);
  }

  if (!absorbed_rows.empty()) {
    float* q_lat = scratch.q_lat.reserve(n_tokens * h_n * width);  // [n_tokens, n_head, kv_lora + dr]
    float* o_lat = scratch.o_lat.reserve(n_tokens * h_n * width);  // [n_tokens, n_head, kv_lora + dr]
    absorbed_queries(q, absorbed_rows, w, s, scratch, q_lat, pool);
    for (size_t i = 0; i < sequences.size(); ++i) {
      if (!seq_absorbed[i]) continue;
      const SequenceRows& seq = sequences[i];
      const int64_t pos0 = seq.kv->length();
      // The cache rows serve as keys and as "values" alike: one kv head of width kv_lora + dr (the rope
      // part of the output is ignored).
      const PagedRows cache = seq.kv->key_rows(layer);
      if (seq.tree_parent != nullptr) {  // draft tree rows: the prefix plus each row's ancestors
        ops::tree_attention(q_lat + seq.row_begin * h_n * width, seq.n_rows, pos0, seq.tree_parent, cache, cache, h_n,
                            1, width, s.scale, o_lat + seq.row_begin * h_n * width, pool, seq.tree_cached);
        continue;
      }
      ops::attention(q_lat + seq.row_begin * h_n * width, seq.n_rows, pos0, cache, cache, pos0 + seq.n_rows, h_n, 1,
                     width, s.scale, o_lat + seq.row_begin * h_n * width, pool);
    }
    absorbed_values(o_lat, absorbed_rows, w, s, scratch, attn, pool);
  }
  for (size_t i = 0; i < sequences.size(); ++i)
    if (!seq_absorbed[i])
      expanded_attention(q, sequences[i], positions[sequences[i].row_begin], layer, w, s, scratch, attn, pool);
  linear(attn, n_tokens, w.o, out, pool);
}

uint64_t MlaWeights::nbytes() const {
  uint64_t bytes = kv_a_norm->nbytes() + (q_a_norm != nullptr ? q_a_norm->nbytes() : 0);
  for (const LinearWeight* lw : {&q, &q_a, &q_b, &kv_a, &kv_b, &k_b, &v_b, &o})
    if (lw->weight != nullptr) bytes += lw->nbytes();
  return bytes;
}

void trace_mla(const MlaWeights& w, const MlaShape& s, MlaScratch& scratch, int64_t n_tokens) {
  const int64_t dn = s.qk_nope_head_dim, dr = s.qk_rope_head_dim, c = s.kv_lora_rank, width = s.cache_width();
  if (w.has_q_lora()) trace::write("q_latent", scratch.q_a.data(), n_tokens, w.q_a.n_out());
  trace::write("kv_latent", scratch.kv_a.data(), n_tokens, c, width);
  trace::write("k_rope", scratch.kv_a.data() + c, n_tokens, dr, width);
  // q_rope: each head's last dr values of q [n_tokens, n_head, dn + dr], gathered to [n_tokens, n_head * dr].
  std::vector<float> q_rope(size_t(n_tokens * s.n_head * dr));
  const float* q = scratch.q.data();
  for (int64_t r = 0; r < n_tokens; ++r)
    for (int64_t h = 0; h < s.n_head; ++h)
      std::memcpy(q_rope.data() + (r * s.n_head + h) * dr, q + (r * s.n_head + h) * (dn + dr) + dn,
                  size_t(dr) * sizeof(float));
  trace::write("q_rope", q_rope.data(), n_tokens, s.n_head * dr);
}

}  // namespace aerie
