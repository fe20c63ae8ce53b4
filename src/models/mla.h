// Multi-head latent attention (DeepSeek-V2/V3), over a cache that holds only the latent and the rope key:
// kv_lora_rank + qk_rope_head_dim values per position per layer (KvCache::latent).
//
// For each token x (already normalised), with dn = qk_nope_head_dim, dr = qk_rope_head_dim, dv = v_head_dim:
//   q      = q_b(rms_norm(q_a(x)))  or q_proj(x)           [n_head, dn + dr]: q_nope | q_pe
//   kv_a   = kv_a_proj_with_mqa(x)                         [kv_lora + dr]:   latent | k_pe
//   latent = rms_norm(latent) (kv_a_layernorm);  q_pe, k_pe rotated (RoPE, cos/sin x rope_factor)
//   cache[pos] = latent | k_pe
// Expanded form (long prefill chunks): kv_b(latent) gives per head k_nope [dn] and v [dv]; keys are
// k_nope | k_pe, and ordinary attention with softmax scale `scale`.
// Absorbed form (decode, verification): per head h with kv_b's rows split into W_k [dn, kv_lora] and
// W_v [dv, kv_lora],
//   q_lat = (q_nope W_k) | q_pe                 [kv_lora + dr]: attends straight over cache rows
//   o_lat = sum_t softmax(scale * q_lat . cache[t]) cache[t][:kv_lora]
//   out_h = W_v o_lat                           [dv]
// which is the same function (q_nope . (W_k latent) = (q_nope W_k) . latent) reading only the latent cache.
// Finally out = o_proj(concat_h out_h).
// llama.cpp's GGUF files hold kv_b split per head instead (attn_k_b = W_k[h]^T [kv_lora, dn], attn_v_b =
// W_v[h] [dv, kv_lora]), possibly block-quantised: q_lat and out_h are then one linear() per head on views
// of those rows, the weights read in place. Without W_k in kv_b's orientation such weights take the
// absorbed form for every row (as llama.cpp does for these files).
// Checked against deepseek-ai/DeepSeek-V3 inference/model.py (MLA, attn_impl "naive" and "absorb") and
// transformers' modeling_deepseek_v3.py.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "models/linear.h"
#include "models/model.h"
#include "models/scratch.h"

namespace aerie {

struct MlaWeights {
  LinearWeight q;                     // q_proj [n_head * (dn + dr), n_in], when q_lora_rank is null
  LinearWeight q_a;                   // q_a_proj [q_lora_rank, n_in]
  const Tensor* q_a_norm = nullptr;   // q_a_layernorm [q_lora_rank]
  LinearWeight q_b;                   // q_b_proj [n_head * (dn + dr), q_lora_rank]
  LinearWeight kv_a;                  // kv_a_proj_with_mqa [kv_lora + dr, n_in]
  const Tensor* kv_a_norm = nullptr;  // kv_a_layernorm [kv_lora]
  LinearWeight kv_b;                  // kv_b_proj [n_head * (dn + dv), kv_lora]; null with k_b / v_b
  // Or kv_b split per head as llama.cpp stores it (GGUF attn_k_b / attn_v_b), stacked heads viewed 2-D:
  LinearWeight k_b;                   // [n_head * kv_lora, dn]: rows [h kv_lora, (h + 1) kv_lora) = W_k[h]^T
  LinearWeight v_b;                   // [n_head * dv, kv_lora]: rows [h dv, (h + 1) dv) = W_v[h]
  LinearWeight o;                     // o_proj [n_out, n_head * dv]
  bool has_q_lora() const { return q_a.weight != nullptr; }
  bool has_split_kv_b() const { return k_b.weight != nullptr; }
  // Bytes of every projection and norm (what one token's decode step reads).
  uint64_t nbytes() const;
};

struct MlaShape {
  int64_t n_head = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  float eps = 1e-6f;           // q_a_layernorm, kv_a_layernorm
  float scale = 0.0f;          // softmax scale: 1/sqrt(dn + dr) x yarn mscale^2
  float rope_factor = 1.0f;    // multiplies cos and sin (YaRN attention_factor)
  bool rope_interleave = true; // rope slice holds pairs (x0, x1), (x2, x3), ...; else halves (rotate_half)
  int64_t cache_width() const { return kv_lora_rank + qk_rope_head_dim; }
};

// Which form a sequence's rows use. kAuto: absorbed for chunks of at most kMlaAbsorbedMaxRows rows
// (decode, verification of drafts), expanded for longer prompt chunks. Weights with k_b / v_b take the
// absorbed form whatever the path, and so does every row under ops::BatchInvariantScope (--deterministic:
// a position's bits must not depend on the size of the chunk it was computed in).
enum class MlaPath { kAuto, kAbsorbed, kExpanded };
inline constexpr int64_t kMlaAbsorbedMaxRows = 16;

struct MlaScratch {
  ScratchBuffer q, q_a, kv_a, q_lat, o_lat, attn;              // every row
  ScratchBuffer head_in, head_out;  // k_b / v_b: one head's inputs and outputs of the absorbed rows [rows, *]
  ScratchBuffer latent, kv_full, q_full, k_full, v_full, o_full;  // one expanded sequence
  std::vector<int64_t> absorbed_rows;   // rows of the sequences that take the absorbed form, ascending
  std::vector<uint8_t> seq_absorbed;    // [n_seqs] 1 when that sequence takes the absorbed form
};

// x: [n_tokens, n_in] f32 (normalised; n_tokens may be 0); positions: [n_tokens]; out: [n_tokens, n_out] f32.
// Writes each row's latent | k_pe into its sequence's cache at its position; does not advance the caches.
void mla_attention(const float* x, int64_t n_tokens, std::span<const SequenceRows> sequences,
                   const int64_t* positions, int64_t layer, const MlaWeights& w, const MlaShape& shape,
                   const float* inv_freq, MlaPath path, MlaScratch& scratch, float* out, ThreadPool& pool);

// Traces (io/trace.h, under the caller's trace::Where) what mla_attention left in `scratch`: q_latent
// (normed q_a, with q_lora), kv_latent (normed), k_rope and q_rope (after RoPE).
void trace_mla(const MlaWeights& w, const MlaShape& s, MlaScratch& scratch, int64_t n_tokens);

}  // namespace aerie
