#!/usr/bin/python3
"""An independent float64 PyTorch reference of DeepseekV3ForCausalLM (and its MTP layer), written from the
published formulas and checked against, not copied from, transformers' modeling_deepseek_v3.py,
DeepSeek's modeling_deepseek.py / inference/model.py and vLLM's deepseek_mtp.py. Reads a checkpoint folder
(config.json + safetensors, BF16 or FP8 with 128x128 weight_scale_inv tiles, dequantised exactly).

For ids [n] at positions 0..n-1 (all in float64 unless said otherwise):
  x = embed_tokens[ids]
  per layer i:
    h = rms_norm(x) * input_layernorm
    q = q_b(rms_norm(q_a(h)) * q_a_layernorm)        or q_proj(h) when q_lora_rank is null
        -> [n, heads, nope + rope]: q_nope = q[..., :nope], q_pe = q[..., nope:]
    kv_a = kv_a_proj_with_mqa(h) -> latent c = kv_a[:, :kv_lora], k_pe = kv_a[:, kv_lora:] (one rope key,
        shared by all heads);  c = rms_norm(c) * kv_a_layernorm
    kv = kv_b(c) -> [n, heads, nope + v]: k_nope = kv[..., :nope], v = kv[..., nope:]
    q_pe, k_pe = rope(q_pe), rope(k_pe)            (see ROPE below; cos/sin carry the YaRN "_mscale")
    score[h, t, s] = (q_nope[t,h] . k_nope[s,h] + q_pe[t,h] . k_pe[s]) * softmax_scale, causal s <= t
    x = x + o_proj(softmax(score) @ v)             (heads concatenated, [n, heads * v])
    h = rms_norm(x) * post_attention_layernorm
    x = x + mlp(h)   dense SwiGLU down(silu(gate(h)) * up(h)), or MoE (see ROUTER): the weighted sum of
                     the selected experts' SwiGLU outputs + the shared experts' SwiGLU (one MLP of width
                     moe_intermediate * n_shared)
  logits = (rms_norm(x) * norm) @ lm_head^T
Layer i is MoE when n_routed_experts > 0, i >= first_k_dense_replace and i % moe_layer_freq == 0
(DeepSeek's modeling_deepseek.py; transformers' port tests only first_k_dense_replace, the same thing for
moe_layer_freq 1). Hidden state i = the residual stream entering layer i (0 = embedding, L = last layer's
output before the final norm); "final_norm" = after model.norm. All RMSNorms use rms_norm_eps (transformers
builds q_a_layernorm / kv_a_layernorm with its default 1e-6: equal for every published config).

ROPE (on the qk_rope_head_dim slice only): inv_freq[j] = theta^(-2j/d), j < d/2, d = qk_rope_head_dim,
  with YaRN when rope_scaling.type == "yarn" (transformers' _compute_yarn_parameters = DeepSeek's
  DeepseekV3YarnRotaryEmbedding):
    cdim(r) = d * ln(original_max / (2 pi r)) / (2 ln theta); low = max(floor(cdim(beta_fast)), 0),
    high = min(ceil(cdim(beta_slow)), d - 1); ramp[j] = clamp((j - low) / (high - low), 0, 1) (high += 0.001
    when equal); inv_freq[j] = inv_freq[j] / factor * ramp[j] + inv_freq[j] * (1 - ramp[j])
    (j < low: kept, j >= high: divided by factor, between: blended).
    _mscale = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim), get_mscale(s, m) =
    0.1 m ln(s) + 1 for s > 1 else 1: cos and sin are multiplied by it (so q_pe . k_pe by _mscale^2).
    softmax_scale = (nope + rope)^-0.5 * get_mscale(factor, mscale_all_dim)^2 when mscale_all_dim is set.
  inv_freq, angles (pos * inv_freq) and cos/sin * _mscale are float32, as transformers computes them.
  Layout: rope_interleave true (transformers' default, and the key is absent from the published config):
  dims (2j, 2j+1) form pair j, rotated by angle pos * inv_freq[j]:
      out[2j] = x[2j] cos - x[2j+1] sin,  out[2j+1] = x[2j+1] cos + x[2j] sin.
  transformers gets this by de-interleaving (x[0], x[2], .., x[1], x[3], ..) then rotate_half; DeepSeek's
  inference/model.py by view_as_complex on consecutive pairs: the same dot products (the de-interleave
  permutes q_pe and k_pe alike). rope_interleave false: pairs (j, j + d/2) (Llama's rotate_half).

ROUTER (noaux_tc, sigmoid), per token: s = sigmoid(gate @ h) [experts]; b = s + e_score_correction_bias
  (for selection only); group g's score = sum of the 2 largest b in the group (experts g*E/G..); keep the
  topk_group best groups; among their experts pick num_experts_per_tok largest b; ties go to the lower
  index (groups and experts). weights = s[selected] (unbiased), / their sum when norm_topk_prob, then
  * routed_scaling_factor. (transformers fills the dropped groups with 0.0, DeepSeek's inference/model.py
  with -inf: they differ only when fewer than top_k kept experts have b > 0; `route` checks this never
  happens on the golden data.)

MTP (num_nextn_predict_layers 1, weights model.layers.L.*), as vLLM's deepseek_mtp.py runs it:
  for t = 0..m-1: e_t = rms_norm(embed(token[t+1])) * enorm, g_t = rms_norm(target_hidden[t]) * hnorm,
  u_t = eh_proj(concat(e_t, g_t)) (embedding first), then a full decoder layer (its own attention over
  u_0..u_t at positions 0..t, MoE or dense by the rule above), then rms_norm * shared_head.norm @
  shared_head.head. target_hidden is the target's hidden_final_norm (what vLLM and SGLang pass: the
  model's output after model.norm). vLLM zeroes the embedding at position 0; this reference does not.

  deepseek_ref.py --model DIR --ids 1,2,3 [--out-logits L.npy] [--hidden-layers 0,2,final_norm
                  --hidden-prefix P] [--greedy N] [--out-mtp M.npy]
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ds_io  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from aerie_trace import NO_LAYER, Tracer  # noqa: E402

FINAL_NORM = "final_norm"
F64 = torch.float64


class DeepseekRef:
    """Config + float64 weights (FP8 dequantised) of one checkpoint."""

    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            self.config = c = json.load(f)
        check_config(c, folder)
        self.n_layer = c["num_hidden_layers"]
        self.n_head = c["num_attention_heads"]
        self.q_lora = c.get("q_lora_rank")
        self.kv_lora = c["kv_lora_rank"]
        self.nope, self.rope, self.v_dim = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        self.eps = c["rms_norm_eps"]
        self.interleave = c.get("rope_interleave", True)
        self.n_mtp = c.get("num_nextn_predict_layers", 0) or 0
        self.w, self.stored_dtypes = ds_io.load_float64(folder, c.get("quantization_config", {}).get(
            "weight_block_size", [ds_io.BLOCK])[0])
        self.inv_freq, self.rope_mscale, self.softmax_scale = rope_parameters(c)

    def t(self, name):
        return self.w[name]

    def is_moe(self, i):
        c = self.config
        return (c.get("n_routed_experts") or 0) > 0 and i >= c["first_k_dense_replace"] and \
            i % c.get("moe_layer_freq", 1) == 0


def check_config(c, folder):
    """Refuses what this reference does not implement (the values DeepSeek-V3 does not use)."""
    problems = []
    if c.get("architectures") != ["DeepseekV3ForCausalLM"] or c.get("model_type") != "deepseek_v3":
        problems.append("not a DeepseekV3ForCausalLM / deepseek_v3")
    if c.get("hidden_act", "silu") != "silu" or c.get("attention_bias"):
        problems.append("hidden_act must be silu, no attention bias")
    if c.get("scoring_func", "sigmoid") != "sigmoid" or c.get("topk_method", "noaux_tc") != "noaux_tc":
        problems.append("router must be scoring_func sigmoid, topk_method noaux_tc")
    if c.get("tie_word_embeddings"):
        problems.append("tie_word_embeddings must be false")
    if c.get("num_key_value_heads", c["num_attention_heads"]) != c["num_attention_heads"]:
        problems.append("num_key_value_heads must equal num_attention_heads (MLA)")
    q = c.get("quantization_config")
    if q and (q.get("quant_method") != "fp8" or q.get("fmt", "e4m3") != "e4m3" or
              q.get("weight_block_size") != [128, 128]):
        problems.append(f"quantization_config {q} is not DeepSeek's fp8 e4m3 [128, 128]")
    r = c.get("rope_scaling")
    if r is not None and r.get("rope_type", r.get("type")) != "yarn":
        problems.append(f"rope_scaling {r} is not yarn")
    if problems:
        raise ValueError(f"{folder}: " + "; ".join(problems))


def yarn_get_mscale(scale, mscale):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_parameters(c):
    """(inv_freq float32 [rope/2], cos/sin multiplier, softmax scale) from the config."""
    d, theta = c["qk_rope_head_dim"], float(c["rope_theta"])
    base = theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d)  # float32
    inv_freq = 1.0 / base
    scale = (c["qk_nope_head_dim"] + d) ** -0.5
    r = c.get("rope_scaling")
    if r is None:
        return inv_freq, 1.0, scale
    factor = float(r["factor"])
    original = r["original_max_position_embeddings"]

    def correction_dim(rotations):
        return d * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(correction_dim(r.get("beta_fast", 32))), 0)
    high = min(math.ceil(correction_dim(r.get("beta_slow", 1))), d - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(d // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    inv_freq = (1.0 / (factor * base)) * ramp + inv_freq * (1 - ramp)
    mscale, mscale_all = r.get("mscale", 1), r.get("mscale_all_dim", 0)
    if mscale and mscale_all:
        cos_scale = yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all)
    else:
        cos_scale = yarn_get_mscale(factor, 1)
    if mscale_all:
        scale = scale * yarn_get_mscale(factor, mscale_all) ** 2
    return inv_freq, float(cos_scale), scale


def yarn_kinds(c):
    """{"kept", "blended", "divided"} counts of the YaRN frequencies (for the golden's checks)."""
    r = c.get("rope_scaling")
    if r is None:
        return None
    d, theta = c["qk_rope_head_dim"], float(c["rope_theta"])
    plain = [theta ** (-2 * j / d) for j in range(d // 2)]
    inv, _, _ = rope_parameters(c)
    kinds = {"kept": 0, "blended": 0, "divided": 0}
    for p, f in zip(plain, inv.double().tolist()):
        if abs(f - p) <= 1e-6 * p:
            kinds["kept"] += 1
        elif abs(f - p / r["factor"]) <= 1e-6 * p:
            kinds["divided"] += 1
        else:
            kinds["blended"] += 1
    return kinds


def rope_cos_sin(m, positions):
    """cos, sin [n, rope/2] float64 (computed in float32, times the YaRN _mscale in float32)."""
    angles = torch.tensor(positions, dtype=torch.float32)[:, None] * m.inv_freq[None, :]
    return (angles.cos() * m.rope_mscale).to(F64), (angles.sin() * m.rope_mscale).to(F64)


def apply_rope(x, cos, sin, interleave):
    """x [..., n, rope] with cos/sin [n, rope/2]: rotates pairs (2j, 2j+1) (interleave) or (j, j+d/2)."""
    half = x.shape[-1] // 2
    if interleave:
        a, b = x[..., 0::2], x[..., 1::2]
    else:
        a, b = x[..., :half], x[..., half:]
    ra, rb = a * cos - b * sin, b * cos + a * sin
    if interleave:
        return torch.stack([ra, rb], dim=-1).flatten(-2)
    return torch.cat([ra, rb], dim=-1)


def trace(m, pre, name, value):
    """Hands a named intermediate of layer `pre` ("model.layers.<i>.", or "" for none) to m.trace (an
    aerie_trace.Tracer, when set) under aerie's AERIE_TRACE_DIR names."""
    tracer = getattr(m, "trace", None)
    if tracer:
        layer = int(pre.split(".")[2]) if pre.startswith("model.layers.") else NO_LAYER
        tracer("target", layer, name, value)


def rms_norm(x, weight, eps):
    return weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def mla_projections(m, pre, h, positions):
    """(q_nope [heads, n, nope], q_pe [heads, n, rope] roped, latent c [n, kv_lora] normed, k_pe [n, rope]
    roped) of one layer."""
    n = h.shape[0]
    if m.q_lora:
        qa = rms_norm(h @ m.t(pre + "self_attn.q_a_proj.weight").T, m.t(pre + "self_attn.q_a_layernorm.weight"), m.eps)
        trace(m, pre, "q_latent", qa)
        q = qa @ m.t(pre + "self_attn.q_b_proj.weight").T
    else:
        q = h @ m.t(pre + "self_attn.q_proj.weight").T
    q = q.view(n, m.n_head, m.nope + m.rope).transpose(0, 1)
    kv_a = h @ m.t(pre + "self_attn.kv_a_proj_with_mqa.weight").T
    c = rms_norm(kv_a[:, :m.kv_lora], m.t(pre + "self_attn.kv_a_layernorm.weight"), m.eps)
    cos, sin = rope_cos_sin(m, positions)
    q_pe = apply_rope(q[..., m.nope:], cos, sin, m.interleave)
    k_pe = apply_rope(kv_a[:, m.kv_lora:], cos, sin, m.interleave)
    trace(m, pre, "kv_latent", c)
    trace(m, pre, "k_rope", k_pe)
    trace(m, pre, "q_rope", q_pe.transpose(0, 1).reshape(n, -1))  # [n, heads * rope]
    return q[..., :m.nope], q_pe, c, k_pe


def attention(m, pre, h, positions):
    """Expanded MLA (per-head keys and values through kv_b_proj), causal over the given rows."""
    n = h.shape[0]
    q_nope, q_pe, c, k_pe = mla_projections(m, pre, h, positions)
    kv = (c @ m.t(pre + "self_attn.kv_b_proj.weight").T).view(n, m.n_head, m.nope + m.v_dim).transpose(0, 1)
    k_nope, v = kv[..., :m.nope], kv[..., m.nope:]
    scores = (q_nope @ k_nope.transpose(1, 2) + q_pe @ k_pe.T[None]) * m.softmax_scale
    scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    out = (torch.softmax(scores, dim=-1) @ v).transpose(0, 1).reshape(n, m.n_head * m.v_dim)
    out = out @ m.t(pre + "self_attn.o_proj.weight").T
    trace(m, pre, "attn_out", out)
    return out


def attention_absorbed(m, pre, h, positions):
    """The same attention in the absorbed form reading only the latent cache (c, k_pe): the key part of
    kv_b folded into the query, the value part applied after the softmax. Equal to `attention`."""
    n = h.shape[0]
    q_nope, q_pe, c, k_pe = mla_projections(m, pre, h, positions)
    wkv = m.t(pre + "self_attn.kv_b_proj.weight").view(m.n_head, m.nope + m.v_dim, m.kv_lora)
    w_k, w_v = wkv[:, :m.nope], wkv[:, m.nope:]  # [heads, nope, kv_lora], [heads, v, kv_lora]
    q_lat = q_nope @ w_k  # [heads, n, kv_lora]
    scores = (q_lat @ c.T[None] + q_pe @ k_pe.T[None]) * m.softmax_scale
    scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    ctx = torch.softmax(scores, dim=-1) @ c[None]  # [heads, n, kv_lora]
    out = (ctx @ w_v.transpose(1, 2)).transpose(0, 1).reshape(n, m.n_head * m.v_dim)
    out = out @ m.t(pre + "self_attn.o_proj.weight").T
    trace(m, pre, "attn_out", out)
    return out


def swiglu(m, pre, h):
    gate = h @ m.t(pre + "gate_proj.weight").T
    return (torch.nn.functional.silu(gate) * (h @ m.t(pre + "up_proj.weight").T)) @ m.t(pre + "down_proj.weight").T


def route(scores, bias, n_group, topk_group, top_k, norm_topk_prob, scaling, check_fill=True, gaps=None):
    """One token's routing. scores: sigmoid outputs [E] (float64), bias [E]. Returns (expert ids sorted
    ascending, their weights, kept group ids sorted). Ties: lower index first (groups and experts).
    gaps: a list that receives the smallest margin of the decision (last kept group score minus the
    best dropped one; last chosen biased score minus the best unchosen candidate)."""
    scores, bias = [float(x) for x in scores], [float(x) for x in bias]
    n_exp = len(scores)
    per_group = n_exp // n_group
    if n_exp % n_group or per_group < 2 or not 1 <= topk_group <= n_group or top_k > topk_group * per_group:
        raise ValueError("router shapes do not fit")
    biased = [s + b for s, b in zip(scores, bias)]
    group_score = []
    for g in range(n_group):
        members = sorted(biased[g * per_group:(g + 1) * per_group], reverse=True)
        group_score.append(members[0] + members[1])
    groups = sorted(range(n_group), key=lambda g: (-group_score[g], g))[:topk_group]
    candidates = [e for g in groups for e in range(g * per_group, (g + 1) * per_group)]
    ranked = sorted(candidates, key=lambda e: (-biased[e], e))
    chosen = ranked[:top_k]
    if gaps is not None:
        order = sorted(range(n_group), key=lambda g: (-group_score[g], g))
        margin = [biased[ranked[top_k - 1]] - biased[ranked[top_k]]] if top_k < len(ranked) else []
        if topk_group < n_group:
            margin.append(group_score[order[topk_group - 1]] - group_score[order[topk_group]])
        gaps.append(min(margin) if margin else float("inf"))
    if check_fill and min(biased[e] for e in chosen) <= 0.0:
        # transformers' 0.0 fill of dropped groups could then pick a dropped expert: the data must avoid it
        raise ValueError(f"a selected expert has biased score <= 0 ({min(biased[e] for e in chosen)})")
    chosen.sort()
    weights = [scores[e] for e in chosen]
    if norm_topk_prob:
        total = sum(weights)
        weights = [w / total for w in weights]
    return chosen, [w * scaling for w in weights], sorted(groups)


def moe(m, pre, h, routes=None):
    """routes: an optional list receiving each token's experts; m.route_gaps (a list, when set) the
    router's decision margins."""
    c = m.config
    logits = h @ m.t(pre + "mlp.gate.weight").T
    scores = torch.sigmoid(logits)
    bias = m.t(pre + "mlp.gate.e_score_correction_bias")
    out = torch.zeros_like(h)
    chosen, chosen_weights = [], []
    for t in range(h.shape[0]):
        experts, weights, _ = route(scores[t].tolist(), bias.tolist(), c["n_group"], c["topk_group"],
                                    c["num_experts_per_tok"], c["norm_topk_prob"], c["routed_scaling_factor"],
                                    gaps=getattr(m, "route_gaps", None))
        if routes is not None:
            routes.append(experts)
        chosen.append(experts)
        chosen_weights.append(weights)
        for e, wgt in zip(experts, weights):
            out[t] += wgt * swiglu(m, f"{pre}mlp.experts.{e}.", h[t:t + 1])[0]
    trace(m, pre, "router_logits", logits)
    trace(m, pre, "experts", np.array(chosen, dtype=np.float32))  # [n, top_k], ascending per token
    trace(m, pre, "expert_weights", np.array(chosen_weights, dtype=np.float32))
    trace(m, pre, "routed_out", out)
    if (c.get("n_shared_experts") or 0) > 0:
        shared = swiglu(m, pre + "mlp.shared_experts.", h)
        trace(m, pre, "shared_out", shared)
        out = out + shared
    return out


def decoder_layer(m, i, x, positions, absorbed=False, routes=None):
    pre = f"model.layers.{i}."
    attn = attention_absorbed if absorbed else attention
    h = rms_norm(x, m.t(pre + "input_layernorm.weight"), m.eps)
    trace(m, pre, "attn_norm", h)
    x = x + attn(m, pre, h, positions)
    h = rms_norm(x, m.t(pre + "post_attention_layernorm.weight"), m.eps)
    trace(m, pre, "ffn_norm", h)
    f = moe(m, pre, h, routes) if m.is_moe(i) else swiglu(m, pre + "mlp.", h)
    trace(m, pre, "ffn_out", f)
    trace(m, pre, "out", x + f)
    return x + f


def forward(m, ids, absorbed=False, routes=None):
    """logits [n, vocab] float64 and hidden {0..L, "final_norm": [n, H] float64}."""
    with torch.no_grad():
        x = m.t("model.embed_tokens.weight")[torch.tensor(ids, dtype=torch.int64)]
        trace(m, "", "embed", x)
        positions = list(range(len(ids)))
        hidden = {}
        for i in range(m.n_layer):
            hidden[i] = x
            x = decoder_layer(m, i, x, positions, absorbed, routes)
        hidden[m.n_layer] = x
        x = rms_norm(x, m.t("model.norm.weight"), m.eps)
        hidden[FINAL_NORM] = x
        trace(m, "", "final_norm", x)
        logits = x @ m.t("lm_head.weight").T
        trace(m, "", "logits", logits)
        return logits, hidden


def mtp_forward(m, tokens, target_hidden):
    """MTP logits [len(tokens) - 1, vocab]: row t from target_hidden[t] and tokens[t + 1], position t."""
    if not m.n_mtp:
        raise ValueError("the checkpoint has no MTP layer (num_nextn_predict_layers 0)")
    L = m.n_layer
    pre = f"model.layers.{L}."
    with torch.no_grad():
        n = len(tokens) - 1
        emb = m.t(pre + "embed_tokens.weight")[torch.tensor(tokens[1:], dtype=torch.int64)]
        e = rms_norm(emb, m.t(pre + "enorm.weight"), m.eps)
        g = rms_norm(target_hidden[:n], m.t(pre + "hnorm.weight"), m.eps)
        u = torch.cat([e, g], dim=-1) @ m.t(pre + "eh_proj.weight").T
        u = decoder_layer(m, L, u, list(range(n)))
        u = rms_norm(u, m.t(pre + "shared_head.norm.weight"), m.eps)
        return u @ m.t(pre + "shared_head.head.weight").T


def greedy(m, ids, n_new):
    """Greedy continuation by full re-forward each step: (tokens, top1 - top2 logit margin per step)."""
    ids, tokens, margins = list(ids), [], []
    for _ in range(n_new):
        logits, _ = forward(m, ids)
        top = torch.topk(logits[-1], 2)
        tokens.append(int(top.indices[0]))
        margins.append(float(top.values[0] - top.values[1]))
        ids.append(tokens[-1])
    return tokens, margins


def router_case(logits, bias, n_group, topk_group, top_k, norm_topk_prob, scaling):
    """Router unit data from hand-made gate logits: {scores, experts, weights, groups}."""
    scores = [1.0 / (1.0 + math.exp(-x)) for x in logits]
    experts, weights, groups = route(scores, bias, n_group, topk_group, top_k, norm_topk_prob, scaling,
                                     check_fill=False)
    return {"scores": scores, "experts": experts, "weights": weights, "groups": groups}


def parse_layers(text, n_layer):
    layers = []
    for item in filter(None, text.split(",")):
        layers.append(FINAL_NORM if item == FINAL_NORM else int(item))
        if layers[-1] != FINAL_NORM and not 0 <= layers[-1] <= n_layer:
            raise SystemExit(f"hidden layer {item} outside 0..{n_layer}")
    return layers


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="checkpoint folder")
    p.add_argument("--ids", required=True, help="comma-separated token ids")
    p.add_argument("--out-logits", help="float32 [n, n_vocab] .npy")
    p.add_argument("--hidden-layers", default="", help="e.g. 0,2,final_norm")
    p.add_argument("--hidden-prefix", default="hidden_", help="hidden layer X goes to <prefix>X.npy")
    p.add_argument("--greedy", type=int, default=0, help="also generate N greedy tokens")
    p.add_argument("--out-mtp", help="float32 [n, n_vocab] MTP logits; the token after the prompt is the "
                                     "greedy one")
    p.add_argument("--trace-dir", help="write the named intermediates of aerie's AERIE_TRACE_DIR here")
    a = p.parse_args(argv)
    m = DeepseekRef(a.model)
    m.trace = Tracer(a.trace_dir)
    ids = [int(x) for x in a.ids.split(",")]
    logits, hidden = forward(m, ids)
    m.trace = None  # the MTP and greedy passes below are not part of the traced forward
    if a.out_logits:
        np.save(a.out_logits, logits.float().numpy())
    for layer in parse_layers(a.hidden_layers, m.n_layer):
        np.save(f"{a.hidden_prefix}{layer}.npy", hidden[layer].float().numpy())
    print(f"logits [{logits.shape[0]}, {logits.shape[1]}], argmax per row: {logits.argmax(-1).tolist()}")
    if a.greedy:
        tokens, margins = greedy(m, ids, a.greedy)
        print(f"greedy: {tokens}\nmin margin: {min(margins):.4g}")
    if a.out_mtp:
        nxt = int(logits[-1].argmax())
        np.save(a.out_mtp, mtp_forward(m, ids + [nxt], hidden[FINAL_NORM]).float().numpy())


if __name__ == "__main__":
    main(sys.argv[1:])
