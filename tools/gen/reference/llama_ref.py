#!/usr/bin/python3
"""An independent PyTorch reference of Hugging Face LlamaForCausalLM's forward, written from the model's
definition (not from transformers' code), reading a checkpoint folder (config.json + safetensors or .bin).

The math, top to bottom, for ids [n_tokens] at positions 0..n-1:
  x = embed_tokens[ids]                                             # [n_tokens, n_embd]
  per layer:  h = rms_norm(x) * input_layernorm
              q, k, v = h @ Wq^T, h @ Wk^T, h @ Wv^T                # [n, n_head|n_head_kv, head_dim]
              q, k = rope(q), rope(k)                               # half-split pairs (i, i + head_dim/2)
              each query head j attends with kv head j // (n_head / n_head_kv), causal, scale head_dim^-0.5
              x = x + attn @ Wo^T
              h = rms_norm(x) * post_attention_layernorm
              x = x + down(silu(gate(h)) * up(h))
  logits = rms_norm(x) * norm @ lm_head^T                           # lm_head = embed_tokens when tied
Hidden state i is the residual stream entering layer i (0 = embedding output, n_layer = the last layer's
output before the final norm); "final_norm" is after the final norm.

Compute modes: f32 (default) and f64 upcast the stored weights once; "stored" computes in the stored dtype
with the casts transformers makes (norm and softmax in float32, cast back before the weight multiply).
RoPE angles are always float32 (position * inv_freq in float32, cos/sin in float32) as in transformers.

  llama_ref.py --model DIR --ids 1,2,3 --out-logits L.npy [--hidden-layers 0,2,final_norm --hidden-prefix P]
               [--greedy N --out-greedy G.json] [--compute f32|f64|stored] [--lora ADAPTER] [--trace-dir T]
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from aerie_trace import NO_LAYER, Tracer  # noqa: E402
from checkpoint_io import load_state_dict, read_safetensors  # noqa: E402

FINAL_NORM = "final_norm"


class LlamaRef:
    """Config + weights of one checkpoint, in the compute dtype."""

    def __init__(self, folder, compute="f32"):
        with open(os.path.join(folder, "config.json")) as f:
            self.config = json.load(f)
        c = self.config
        if c.get("architectures") != ["LlamaForCausalLM"] or c.get("hidden_act", "silu") != "silu":
            raise ValueError(f"{folder}: not a LlamaForCausalLM with silu")
        if c.get("attention_bias") or c.get("mlp_bias") or c.get("pretraining_tp", 1) != 1:
            raise ValueError(f"{folder}: biases and pretraining_tp > 1 are not part of Llama 3")
        self.n_layer = c["num_hidden_layers"]
        self.n_head, self.n_head_kv = c["num_attention_heads"], c["num_key_value_heads"]
        self.head_dim = c.get("head_dim") or c["hidden_size"] // self.n_head
        self.eps = c["rms_norm_eps"]
        weights = load_state_dict(folder)
        stored = weights["model.embed_tokens.weight"].dtype
        self.dtype = {"f32": torch.float32, "f64": torch.float64, "stored": stored}[compute]
        if self.dtype == torch.float16 and not _half_matmul_works():
            raise SystemExit("--compute stored with float16 weights needs CPU half matmuls, which this torch "
                             "lacks (1.13); use --compute f32 or f64")
        self.w = {name: t.to(self.dtype) for name, t in weights.items()}
        if c.get("tie_word_embeddings", False):
            if "lm_head.weight" in self.w:
                raise ValueError(f"{folder}: tied embeddings but an lm_head.weight is stored")
            self.w["lm_head.weight"] = self.w["model.embed_tokens.weight"]
        self.inv_freq = rope_inv_freq(self.head_dim, c["rope_theta"], c.get("rope_scaling"))

    def add_lora(self, folder):
        """Merges a PEFT LoRA adapter into the weights, explicitly: W <- W + scale * B @ A for every
        targeted projection, scale = lora_alpha / r (/ sqrt(r) with use_rslora). Computed in the compute
        dtype (use f64 for a reference of the adapted model)."""
        with open(os.path.join(folder, "adapter_config.json")) as f:
            ac = json.load(f)
        r = ac["r"]
        scale = ac["lora_alpha"] / (math.sqrt(r) if ac.get("use_rslora") else r)
        factors = read_safetensors(os.path.join(folder, "adapter_model.safetensors"))
        prefix = "base_model.model."
        for name, a in factors.items():
            if not name.endswith(".lora_A.weight"):
                continue
            module = name[len(prefix):-len(".lora_A.weight")]
            b = factors[name.replace(".lora_A.", ".lora_B.")]
            w = self.w[module + ".weight"]
            self.w[module + ".weight"] = w + scale * (b.to(self.dtype) @ a.to(self.dtype))

    def layer(self, i, name):
        return self.w[f"model.layers.{i}.{name}.weight"]


def _half_matmul_works():
    try:
        torch.ones(2, 2, dtype=torch.float16) @ torch.ones(2, 2, dtype=torch.float16)
        return True
    except RuntimeError:
        return False


def rope_inv_freq(head_dim, theta, scaling):
    """[head_dim/2] float32 inverse frequencies, with Llama 3.1's frequency-dependent scaling when
    scaling is {"rope_type": "llama3", ...}: long wavelengths (> original_max / low_freq_factor) are
    divided by factor, short ones (< original_max / high_freq_factor) kept, the band between blended."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
    inv_freq = 1.0 / (theta ** exponents)  # float32, as transformers computes it
    if scaling is None:
        return inv_freq
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "default":
        return inv_freq
    if kind != "llama3":
        raise ValueError(f"rope_scaling type {kind!r} is not Llama 3's")
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = original / low, original / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return torch.where(medium, smoothed, scaled)


def rope_cos_sin(inv_freq, n_tokens, dtype):
    """cos, sin [n_tokens, head_dim] for positions 0..n-1; each frequency repeated for both halves."""
    angles = torch.arange(n_tokens, dtype=torch.float32)[:, None] * inv_freq[None, :]  # float32
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_half(x):
    """(x1, x2) -> (-x2, x1) on the two halves of the last dim: pairs are (i, i + head_dim/2)."""
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def rms_norm(x, weight, eps):
    """weight * x / sqrt(mean(x^2) + eps), the statistic in float32 (or float64), cast back first."""
    x_f = x.float() if x.dtype != torch.float64 else x
    normed = x_f * torch.rsqrt(x_f.pow(2).mean(-1, keepdim=True) + eps)
    return weight * normed.to(x.dtype)


def attention(m, i, h, cos, sin, trace=Tracer(None)):
    """Causal grouped-query self-attention of layer i on h [n, n_embd] -> [n, n_embd]."""
    n, d = h.shape[0], m.head_dim
    q = (h @ m.layer(i, "self_attn.q_proj").T).view(n, m.n_head, d).transpose(0, 1)  # [n_head, n, d]
    k = (h @ m.layer(i, "self_attn.k_proj").T).view(n, m.n_head_kv, d).transpose(0, 1)  # [n_head_kv, n, d]
    v = (h @ m.layer(i, "self_attn.v_proj").T).view(n, m.n_head_kv, d).transpose(0, 1)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    if trace:
        for name, t in (("q", q), ("k", k), ("v", v)):
            trace("target", i, name, t.transpose(0, 1).reshape(n, -1))  # [n, heads * head_dim]
    group = m.n_head // m.n_head_kv  # query heads per kv head: kv head g serves heads g*group..
    k = k.repeat_interleave(group, dim=0)  # [n_head, n, d]
    v = v.repeat_interleave(group, dim=0)
    scores = (q @ k.transpose(1, 2)) * (d ** -0.5)  # [n_head, n_query, n_key]
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    softmax_dtype = torch.float64 if scores.dtype == torch.float64 else torch.float32
    probs = torch.softmax(scores.to(softmax_dtype), dim=-1).to(q.dtype)
    out = (probs @ v).transpose(0, 1).reshape(n, m.n_head * d)  # [n, n_head * head_dim]
    out = out @ m.layer(i, "self_attn.o_proj").T
    trace("target", i, "attn_out", out)
    return out


def mlp(m, i, h):
    gate = h @ m.layer(i, "mlp.gate_proj").T  # [n, n_ff]
    up = h @ m.layer(i, "mlp.up_proj").T
    return (torch.nn.functional.silu(gate) * up) @ m.layer(i, "mlp.down_proj").T


def forward(m, ids, trace=Tracer(None)):
    """logits [n, n_vocab] float32 and hidden states {0..n_layer, "final_norm": [n, n_embd] float32}.
    `trace` receives the named intermediates of aerie's tracing hook (aerie_trace.py)."""
    with torch.no_grad():
        x = m.w["model.embed_tokens.weight"][torch.tensor(ids, dtype=torch.int64)]
        cos, sin = rope_cos_sin(m.inv_freq, len(ids), m.dtype)
        hidden = {}
        trace("target", NO_LAYER, "embed", x)
        for i in range(m.n_layer):
            hidden[i] = x
            h = rms_norm(x, m.layer(i, "input_layernorm"), m.eps)
            trace("target", i, "attn_norm", h)
            x = x + attention(m, i, h, cos, sin, trace)
            h = rms_norm(x, m.layer(i, "post_attention_layernorm"), m.eps)
            trace("target", i, "ffn_norm", h)
            f = mlp(m, i, h)
            trace("target", i, "ffn_out", f)
            x = x + f
            trace("target", i, "out", x)
        hidden[m.n_layer] = x
        x = rms_norm(x, m.w["model.norm.weight"], m.eps)
        hidden[FINAL_NORM] = x
        trace("target", NO_LAYER, "final_norm", x)
        logits = x @ m.w["lm_head.weight"].T
        trace("target", NO_LAYER, "logits", logits)
    return logits.float(), {k: v.float() for k, v in hidden.items()}


def greedy(m, ids, n_new):
    """Greedy continuation by full re-forward each step: (tokens, top1 - top2 logit margin per step)."""
    ids, tokens, margins = list(ids), [], []
    for _ in range(n_new):
        logits, _ = forward(m, ids)
        top = torch.topk(logits[-1].double(), 2)
        tokens.append(int(top.indices[0]))
        margins.append(float(top.values[0] - top.values[1]))
        ids.append(tokens[-1])
    return tokens, margins


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
    p.add_argument("--out-greedy", help="JSON {ids, greedy, greedy_margins} (default: printed)")
    p.add_argument("--compute", choices=["f32", "f64", "stored"], default="f32")
    p.add_argument("--lora", help="a PEFT LoRA adapter folder, merged into the weights (W + scale * B @ A)")
    p.add_argument("--trace-dir", help="write the named intermediates of aerie's AERIE_TRACE_DIR here")
    a = p.parse_args(argv)
    m = LlamaRef(a.model, a.compute)
    if a.lora:
        m.add_lora(a.lora)
    ids = [int(x) for x in a.ids.split(",")]
    logits, hidden = forward(m, ids, Tracer(a.trace_dir))
    if a.out_logits:
        np.save(a.out_logits, logits.numpy())
    for layer in parse_layers(a.hidden_layers, m.n_layer):
        np.save(f"{a.hidden_prefix}{layer}.npy", hidden[layer].numpy())
    print(f"logits [{logits.shape[0]}, {logits.shape[1]}], argmax per row: {logits.argmax(-1).tolist()}")
    if a.greedy:
        tokens, margins = greedy(m, ids, a.greedy)
        result = {"ids": ids, "greedy": tokens, "greedy_margins": margins}
        if a.out_greedy:
            with open(a.out_greedy, "w") as f:
                json.dump(result, f, indent=1)
        print(f"greedy: {tokens}\nmin margin: {min(margins):.4g}")


if __name__ == "__main__":
    main(sys.argv[1:])
