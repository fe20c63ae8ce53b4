#!/usr/bin/python3
"""Cross-checks llama_ref.py against a second, independently written formulation, so a mistake would have
to be made twice in two different ways to survive:
  1. inv_freq: llama_ref's torch version vs a per-frequency float64 loop over the Llama 3.1 rule; also
     reports how many frequencies the scaling kept, divided and smoothed (a golden case meant to exercise
     the scaling must have frequencies changed and at least one smoothed).
  2. forward: llama_ref (batched matmuls, rotate_half, repeat_interleave of kv heads, masked softmax) vs
     loops in float64: RoPE as complex multiplication of (x_i + i x_{i+d/2}) by e^{i pos f}, attention per
     query head and per query position over keys 0..t only (no mask), kv head chosen as head // group,
     softmax and silu written out.
  3. causality: the logits of every prefix ids[:t+1], run alone, equal row t of the full run.
  4. precision: llama_ref in float32 vs float64 (the size of the float32 error a C++ port should expect).

  check_ref.py DIR [DIR ...] --ids 1,2,3
"""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_ref import FINAL_NORM, LlamaRef, forward, rope_inv_freq  # noqa: E402


def inv_freq_loop(head_dim, theta, scaling):
    """Returns ([inverse frequencies] float64, [kind per frequency]) written independently of llama_ref."""
    freqs, kinds = [], []
    for i in range(head_dim // 2):
        f = 1.0 / theta ** (2 * i / head_dim)
        if scaling is None:
            freqs.append(f), kinds.append("kept")
            continue
        wavelen = 2 * math.pi / f
        original = scaling["original_max_position_embeddings"]
        if wavelen < original / scaling["high_freq_factor"]:
            freqs.append(f), kinds.append("kept")
        elif wavelen > original / scaling["low_freq_factor"]:
            freqs.append(f / scaling["factor"]), kinds.append("divided")
        else:
            # ratio of the context to the wavelength, mapped to 0 at low_freq_factor and 1 at high.
            t = (original / wavelen - scaling["low_freq_factor"]) / (
                scaling["high_freq_factor"] - scaling["low_freq_factor"])
            freqs.append((1 - t) * f / scaling["factor"] + t * f), kinds.append("smoothed")
    return torch.tensor(freqs, dtype=torch.float64), kinds


def norm_loop(x, w, eps):
    return w * x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


def rope_complex(x, pos, freqs):
    """x [head_dim] float64 at position pos -> rotated, pairs (i, i + d/2) as one complex number."""
    half = x.shape[0] // 2
    z = torch.complex(x[:half], x[half:]) * torch.polar(torch.ones_like(freqs), pos * freqs)
    return torch.cat([z.real, z.imag])


def forward_loops(m, ids, freqs):
    """logits [n, n_vocab] float64, by loops; m must hold float64 weights."""
    n, d, group = len(ids), m.head_dim, m.n_head // m.n_head_kv
    x = torch.stack([m.w["model.embed_tokens.weight"][t] for t in ids])
    for i in range(m.n_layer):
        h = norm_loop(x, m.layer(i, "input_layernorm"), m.eps)
        q, k, v = (h @ m.layer(i, f"self_attn.{p}_proj").T for p in "qkv")
        out = torch.zeros(n, m.n_head * d, dtype=torch.float64)
        for head in range(m.n_head):
            kv = head // group
            for t in range(n):
                qt = rope_complex(q[t, head * d:(head + 1) * d], t, freqs)
                keys = [rope_complex(k[s, kv * d:(kv + 1) * d], s, freqs) for s in range(t + 1)]
                scores = torch.stack([qt.dot(key) / math.sqrt(d) for key in keys])
                e = torch.exp(scores - scores.max())
                p = e / e.sum()
                out[t, head * d:(head + 1) * d] = sum(p[s] * v[s, kv * d:(kv + 1) * d] for s in range(t + 1))
        x = x + out @ m.layer(i, "self_attn.o_proj").T
        h = norm_loop(x, m.layer(i, "post_attention_layernorm"), m.eps)
        g = h @ m.layer(i, "mlp.gate_proj").T
        x = x + (g / (1 + torch.exp(-g)) * (h @ m.layer(i, "mlp.up_proj").T)) @ m.layer(i, "mlp.down_proj").T
    return norm_loop(x, m.w["model.norm.weight"], m.eps) @ m.w["lm_head.weight"].T


def rel(a, b):
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def check(folder, ids):
    """Runs the four checks on one checkpoint; returns a dict of figures, raises AssertionError on failure."""
    m64 = LlamaRef(folder, "f64")
    c = m64.config
    freqs, kinds = inv_freq_loop(m64.head_dim, c["rope_theta"], c.get("rope_scaling"))
    assert rel(m64.inv_freq, freqs) < 1e-6, "inv_freq differs from the loop formulation"
    logits64, hidden64 = forward(m64, ids)
    loops = forward_loops(m64, ids, m64.inv_freq.double())
    assert rel(logits64, loops) < 1e-6, f"batched vs loop forward: {rel(logits64, loops)}"
    for t in range(len(ids)):
        prefix, _ = forward(m64, ids[:t + 1])
        assert rel(prefix[-1], logits64[t]) < 1e-6, f"row {t} depends on later tokens"
    logits32, hidden32 = forward(LlamaRef(folder, "f32"), ids)
    figures = {
        "rope": {k: kinds.count(k) for k in ("kept", "divided", "smoothed")},
        "loop_vs_batched": rel(logits64, loops),
        "f32_vs_f64_logits": rel(logits32, logits64),
        "f32_vs_f64_final_norm": rel(hidden32[FINAL_NORM], hidden64[FINAL_NORM]),
        "argmax_agree_f32_f64": bool((logits32.argmax(-1) == logits64.argmax(-1)).all()),
    }
    # The unscaled frequencies, to show the scaling changes them (when configured).
    plain = rope_inv_freq(m64.head_dim, c["rope_theta"], None)
    figures["rope_changed"] = int((plain != m64.inv_freq).sum())
    return figures


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", nargs="+")
    p.add_argument("--ids", default="1,5,9,33,100,7,200,18,4,42")
    a = p.parse_args(argv)
    for folder in a.folders:
        print(folder, check(folder, [int(x) for x in a.ids.split(",")]))


if __name__ == "__main__":
    main(sys.argv[1:])
