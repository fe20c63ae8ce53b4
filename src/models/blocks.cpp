#include "models/blocks.h"

#include "io/trace.h"
#include "ops/ops.h"
#include "ops/tree_attention.h"

namespace aerie {

void gqa_attention(const float* x, int64_t n_tokens, std::span<const SequenceRows> sequences, const int64_t* positions,
                   int64_t layer, const AttentionWeights& w, const AttentionShape& shape, const float* inv_freq,
                   AttentionScratch& scratch, float* out, ThreadPool& pool, LoraAt lora) {
  const int64_t q_width = shape.n_head * shape.head_dim;      // n_head * head_dim
  const int64_t kv_width = shape.n_head_kv * shape.head_dim;  // n_head_kv * head_dim
  float* q = scratch.q.reserve(n_tokens * q_width);           // [n_tokens, n_head, head_dim]
  float* k = scratch.k.reserve(n_tokens * kv_width);          // [n_tokens, n_head_kv, head_dim]
  float* v = scratch.v.reserve(n_tokens * kv_width);          // [n_tokens, n_head_kv, head_dim]
  float* attn = scratch.attn.reserve(n_tokens * q_width);     // [n_tokens, n_head, head_dim]
  linear(x, n_tokens, w.q, q, pool, w.q_bias);
  linear(x, n_tokens, w.k, k, pool, w.k_bias);
  linear(x, n_tokens, w.v, v, pool, w.v_bias);
  lora.add(LoraModule::kQ, x, q, pool);  // before RoPE, as PEFT adapts the projection itself
  lora.add(LoraModule::kK, x, k, pool);
  lora.add(LoraModule::kV, x, v, pool);
  ops::rope(q, ops::rope_whole_heads(n_tokens, shape.n_head, shape.head_dim, shape.rope_layout), positions, inv_freq,
            1.0f, pool);
  ops::rope(k, ops::rope_whole_heads(n_tokens, shape.n_head_kv, shape.head_dim, shape.rope_layout), positions, inv_freq,
            1.0f, pool);

  for (const SequenceRows& seq : sequences) {
    KvCache& kv = *seq.kv;
    const int64_t pos0 = kv.length();  // the first row's slot (a tree row's position is its depth's)
    // Rows into the cache's blocks, converted to its dtype.
    kv.write_rows(layer, pos0, seq.n_rows, k + seq.row_begin * kv_width, v + seq.row_begin * kv_width);
    if (seq.tree_parent != nullptr) {  // draft tree rows: the prefix plus each row's ancestors
      ops::tree_attention(q + seq.row_begin * q_width, seq.n_rows, pos0, seq.tree_parent, kv.key_rows(layer),
                          kv.value_rows(layer), shape.n_head, shape.n_head_kv, shape.head_dim, shape.scale,
                          attn + seq.row_begin * q_width, pool, seq.tree_cached);
      continue;
    }
    ops::attention(q + seq.row_begin * q_width, seq.n_rows, pos0, kv.key_rows(layer), kv.value_rows(layer),
                   pos0 + seq.n_rows, shape.n_head, shape.n_head_kv, shape.head_dim, shape.scale,
                   attn + seq.row_begin * q_width, pool);
  }
  linear(attn, n_tokens, w.o, out, pool, w.o_bias);
  lora.add(LoraModule::kO, attn, out, pool);
}

void trace_attention(AttentionScratch& scratch, const AttentionShape& shape, int64_t n_tokens, const float* out,
                     int64_t n_out) {
  const int64_t q_width = shape.n_head * shape.head_dim, kv_width = shape.n_head_kv * shape.head_dim;
  trace::write("q", scratch.q.data(), n_tokens, q_width);
  trace::write("k", scratch.k.data(), n_tokens, kv_width);
  trace::write("v", scratch.v.data(), n_tokens, kv_width);
  trace::write("attn_out", out, n_tokens, n_out);
}

}  // namespace aerie
