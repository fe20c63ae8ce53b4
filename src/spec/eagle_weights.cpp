// Binding an EAGLE-1 or EAGLE-3 (MHA) head's tensors by their published names, every shape checked
// against the head's config. Which kind a folder holds, whether it fits the target and which target
// layers it fuses are the drafter registry's decisions (spec/drafter_registry.cpp).
#include "core/error.h"
#include "spec/eagle_head.h"
#include "spec/head_names.h"

namespace aerie {
namespace {

void bind_layer(const WeightStore& store, const LlamaConfig& c, const std::string& p, int64_t n_in,
                EagleLayerWeights& layer) {
  const int64_t q_width = c.n_head * c.head_dim, kv_width = c.n_head_kv * c.head_dim;
  auto get = [&](const std::string& name, const Shape& shape) { return &store.get(p + name, shape); };
  auto linear = [&](const std::string& name, int64_t n_out, int64_t n_in_) {
    return bind_linear(store, p + name, n_out, n_in_, false);
  };
  layer.attn.q = linear("self_attn.q_proj", q_width, n_in);
  layer.attn.k = linear("self_attn.k_proj", kv_width, n_in);
  layer.attn.v = linear("self_attn.v_proj", kv_width, n_in);
  layer.attn.o = linear("self_attn.o_proj", c.n_embd, q_width);
  if (c.attention_bias) {
    layer.attn.q_bias = get("self_attn.q_proj.bias", {q_width});
    layer.attn.k_bias = get("self_attn.k_proj.bias", {kv_width});
    layer.attn.v_bias = get("self_attn.v_proj.bias", {kv_width});
    if (store.contains(p + "self_attn.o_proj.bias")) layer.attn.o_bias = get("self_attn.o_proj.bias", {c.n_embd});
  }
  AERIE_CHECK(!c.mlp_bias, store.source(), ": mlp_bias = true is not supported");
  layer.ffn_norm = get("post_attention_layernorm.weight", {c.n_embd});
  layer.mlp = bind_ffn(store, p + "mlp.", c.n_ff, c.n_embd, false);
}

}  // namespace

// d2t [n_draft_vocab] int64 -> draft_to_target; t2d [n_vocab] bool, when present, must agree with it.
std::vector<int64_t> bind_draft_vocab_map(const WeightStore& store, int64_t n_draft, int64_t n_vocab) {
  const Tensor* d2t = store.find("d2t");
  if (d2t == nullptr) {
    AERIE_CHECK(n_draft == n_vocab, store.source(), ": draft_vocab_size ", n_draft, " is smaller than vocab_size ",
                n_vocab, " but the head has no d2t tensor to map draft ids to target ids");
    return {};
  }
  AERIE_CHECK(d2t->dtype == DType::kI64 && d2t->shape == Shape{n_draft}, store.source(), ": d2t has shape ",
              d2t->shape.str(), " ", dtype_name(d2t->dtype), ", expected [", n_draft,
              "] I64 (one offset per draft id, draft_vocab_size = ", n_draft, ")");
  std::vector<int64_t> map(size_t(n_draft), 0);
  for (int64_t d = 0; d < n_draft; ++d) {
    map[size_t(d)] = d + d2t->as<int64_t>()[d];
    AERIE_CHECK(map[size_t(d)] >= 0 && map[size_t(d)] < n_vocab, store.source(), ": d2t maps draft id ", d,
                " to target id ", map[size_t(d)], ", outside the target vocabulary [0, ", n_vocab, ")");
  }
  if (const Tensor* t2d = store.find("t2d")) {
    AERIE_CHECK(t2d->dtype == DType::kBool && t2d->shape == Shape{n_vocab}, store.source(), ": t2d has shape ",
                t2d->shape.str(), " ", dtype_name(t2d->dtype), ", expected [", n_vocab, "] BOOL (vocab_size)");
    for (int64_t d = 0; d < n_draft; ++d)
      AERIE_CHECK(t2d->as<uint8_t>()[map[size_t(d)]] != 0, store.source(), ": t2d does not mark target id ",
                  map[size_t(d)], " that d2t maps draft id ", d, " to");
  }
  return map;
}

EagleWeights bind_eagle_weights(const WeightStore& store, const EagleConfig& config, EagleKind kind,
                                const Model& target, int64_t n_fused) {
  const LlamaConfig& c = config.llama;
  const std::string& src = store.source();
  const int64_t n_embd = c.n_embd, t_embd = config.target_n_embd;
  EagleWeights w;
  w.kind = kind;
  w.embed = &target.token_embedding();
  if (const Tensor* own = store.find(top_name(store, "embed_tokens.weight"))) {
    AERIE_CHECK(own->shape == (Shape{c.n_vocab, n_embd}), src, ": embed_tokens.weight has shape ", own->shape.str(),
                ", expected [", c.n_vocab, ", ", n_embd, "] (vocab_size, hidden_size)");
    if (n_embd != target.n_embd()) w.embed = own;  // a narrower head cannot use the target's table
  }
  AERIE_CHECK(w.embed->dim(1) == n_embd, src, ": the head's hidden_size ", n_embd, " differs from the target's ",
              target.n_embd(), " and the head has no embed_tokens.weight of its own");

  if (kind == EagleKind::kEagle1) {
    const Tensor& fc = store.get("fc.weight");
    AERIE_CHECK(fc.shape == (Shape{n_embd, 2 * n_embd}), src, ": fc.weight has shape ", fc.shape.str(), ", expected [",
                n_embd, ", ", 2 * n_embd, "] (EAGLE-1 fuses one embedding and one feature of size ", n_embd, ")");
    w.fc = float_linear(&fc);
    w.fc_bias = store.find("fc.bias") ? &store.get("fc.bias", {n_embd}) : nullptr;
    AERIE_CHECK(!config.fc_bias || *config.fc_bias == (w.fc_bias != nullptr), src,
                ": config says bias = ", *config.fc_bias ? "true" : "false", " but fc.bias is ",
                w.fc_bias ? "present" : "absent");
    w.layer_prefix = "layers.";
    for (int64_t i = 0; i < c.n_layer; ++i) {
      const std::string p = "layers." + std::to_string(i) + ".";
      EagleLayerWeights layer;
      bind_layer(store, c, p, n_embd, layer);
      if (i > 0) layer.attn_norm = &store.get(p + "input_layernorm.weight", {n_embd});
      w.layers.push_back(layer);
    }
    w.output = target.output_head();
    return w;
  }

  AERIE_CHECK(c.n_layer == 1, src,
              ": EAGLE-3 heads have one decoder layer, config says num_hidden_layers = ", c.n_layer);
  const Tensor& fc = store.get(top_name(store, "fc.weight"));
  AERIE_CHECK(fc.shape == (Shape{n_embd, n_fused * t_embd}), src, ": fc.weight has shape ", fc.shape.str(),
              ", expected [", n_embd, ", ", n_fused * t_embd, "]: fusing ", n_fused, " target layers of hidden size ",
              t_embd,
              (fc.shape.ndim() == 2 && fc.dim(1) % t_embd == 0
                   ? str_cat(" (the head was trained on ", fc.dim(1) / t_embd, " layers)")
                   : std::string()));
  w.fc = float_linear(&fc);
  w.layer_prefix = eagle3_layer_prefix(store);
  EagleLayerWeights layer;
  bind_layer(store, c, w.layer_prefix, 2 * n_embd, layer);
  layer.attn_norm = &store.get(w.layer_prefix + "input_layernorm.weight", {n_embd});
  layer.hidden_norm = &store.get(w.layer_prefix + "hidden_norm.weight", {n_embd});
  w.layers.push_back(layer);
  if (store.contains(top_name(store, "fc_norm.0.weight")))
    for (int64_t i = 0; i < n_fused; ++i)
      w.fc_norm.push_back(&store.get(top_name(store, "fc_norm." + std::to_string(i) + ".weight"), {t_embd}));
  w.norm = &store.get(top_name(store, "norm.weight"), {n_embd});
  bind_eagle3_output(store, config.n_draft_vocab, n_embd, target, w.output, w.draft_to_target);
  return w;
}

void bind_eagle3_output(const WeightStore& store, int64_t n_draft_vocab, int64_t n_embd, const Model& target,
                        LinearWeight& output, std::vector<int64_t>& draft_to_target) {
  const std::string& src = store.source();
  if (!store.contains("lm_head.weight")) {
    AERIE_CHECK(n_embd == target.n_embd(), src,
                ": the head has no lm_head.weight, so it scores through the "
                "target's, which needs its hidden_size (",
                target.n_embd(), "); the head's is ", n_embd);
    AERIE_CHECK(n_draft_vocab == target.n_vocab() && !store.contains("d2t"), src,
                ": the head has no "
                "lm_head.weight, so it scores through the target's over all ",
                target.n_vocab(), " tokens; draft_vocab_size ", n_draft_vocab,
                store.contains("d2t") ? " and a d2t map" : "", " say otherwise");
    output = target.output_head();
    draft_to_target.clear();
    return;
  }
  const Tensor& head = store.get("lm_head.weight");
  // Int4 (U8) rows hold two inputs a byte.
  const int64_t head_in = head.shape.ndim() == 2 ? head.dim(1) * (head.dtype == DType::kU8 ? 2 : 1) : -1;
  AERIE_CHECK(head.shape.ndim() == 2 && head.dim(0) == n_draft_vocab && head_in == n_embd, src,
              ": lm_head.weight has shape ", head.shape.str(), ", expected [", n_draft_vocab, ", ", n_embd,
              "] (draft_vocab_size, hidden_size)");
  output = bind_linear(store, "lm_head", n_draft_vocab, n_embd, false);  // int8 / int4 when quantised
  draft_to_target = bind_draft_vocab_map(store, n_draft_vocab, target.n_vocab());
}

}  // namespace aerie
