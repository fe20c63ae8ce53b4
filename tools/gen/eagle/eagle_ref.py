#!/usr/bin/python3
"""An independent PyTorch reference of EAGLE-1 and EAGLE-3 draft heads, teacher-forced over a target's
features (the target from tools/gen/reference/llama_ref.py). Written from the heads' definitions, plain
torch ops, computing in float64 from the stored weights (or float32 with --compute f32).

Alignment: for ids x_0..x_{n-1}, head row t (t = 0..n-2) sits at position t of the head's cache (causal),
reads the target's feature f_t (from x_0..x_t) and the token x_{t+1}, and predicts x_{t+2}.

EAGLE-1 (H = target hidden size; f_t = target's last hidden state after its final norm):
  x = fc(concat(embed(x_{t+1}), f_t)) (+ fc.bias)              # [n-1, H], embedding first
  layer 0:  x = x + attn(x)                                     # no input_layernorm in layer 0
            x = x + mlp(rms_norm(x) * post_attention_layernorm)
  (layer i > 0 would norm its input with input_layernorm)
  feature = x;  logits = x @ target_lm_head^T                   # no norm before the target's head
EAGLE-3 (f_t = concat of the target's residual streams entering the fused layers, [n-1, 3 H_t]):
  g = f_t @ fc^T                                                # [n-1, H]
  a = concat(rms_norm(embed(x_{t+1})) * input_layernorm, rms_norm(g) * hidden_norm)   # [n-1, 2H]
  x = g + attn(a)                 (residual = rms_norm(g) * hidden_norm if norm_before_residual)
  x = x + mlp(rms_norm(x) * post_attention_layernorm)
  feature = x (pre-norm);  logits = rms_norm(x) * norm @ lm_head^T   # [n-1, draft_vocab]
                           (a head without lm_head.weight: the target's lm_head, full vocabulary)
Attention: GQA with RoPE (half-split pairs) at positions 0..n-2 with the HEAD's rope_theta (absent: 10000)
and rope_scaling; scale head_dim^-0.5; softmax in the compute dtype.

  eagle_ref.py --target T --head D --ids 1,2,3 --layers 0,1,2 --out-logits L.npy --out-features F.npy
"""
import argparse
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "reference"))
from head_io import load_head  # noqa: E402
from aerie_trace import NO_LAYER, Tracer  # noqa: E402
from llama_ref import FINAL_NORM, LlamaRef, forward, rope_inv_freq  # noqa: E402

FINAL_NORM_LAYER = -1  # aerie's kFinalNormLayer


def rms(x, weight, eps):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


class HeadRef:
    def __init__(self, folder, target_config, dtype):
        self.config, stored = load_head(folder)
        c = self.config
        self.w = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in stored.items()}
        self.eagle3 = "d2t" in stored or any(k.startswith("midlayer.") or k.endswith("hidden_norm.weight")
                                             for k in stored)
        self.prefix = "midlayer." if any(k.startswith("midlayer.") for k in stored) else "layers.0."
        self.n_head, self.n_head_kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
        self.head_dim = c.get("head_dim") or c["hidden_size"] // self.n_head
        self.eps = c.get("rms_norm_eps", 1e-6)
        theta = c.get("rope_theta", 10000.0)  # the head's own base; absent means 10000, not the target's
        self.inv_freq = rope_inv_freq(self.head_dim, theta, c.get("rope_scaling"))
        self.n_layer = c.get("num_hidden_layers", 1)
        self.norm_before_residual = bool(c.get("norm_before_residual", False))
        self.dtype = dtype
        self.trace = Tracer(None)  # aerie's AERIE_TRACE_DIR names, scope "head"

    def p(self, layer, name):
        prefix = self.prefix if self.eagle3 else f"layers.{layer}."
        return self.w[prefix + name + ".weight"]

    def attention(self, layer, h):
        m, d = h.shape[0], self.head_dim
        q = (h @ self.p(layer, "self_attn.q_proj").T).view(m, self.n_head, d).transpose(0, 1)
        k = (h @ self.p(layer, "self_attn.k_proj").T).view(m, self.n_head_kv, d).transpose(0, 1)
        v = (h @ self.p(layer, "self_attn.v_proj").T).view(m, self.n_head_kv, d).transpose(0, 1)
        angles = torch.arange(m, dtype=torch.float32)[:, None] * self.inv_freq[None, :]  # float32 like HF
        angles = torch.cat([angles, angles], dim=-1)
        cos, sin = angles.cos().to(self.dtype), angles.sin().to(self.dtype)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        group = self.n_head // self.n_head_kv
        k, v = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)
        scores = (q @ k.transpose(1, 2)) * d ** -0.5
        scores = scores.masked_fill(torch.ones(m, m, dtype=torch.bool).triu(1), float("-inf"))
        out = (torch.softmax(scores, dim=-1) @ v).transpose(0, 1).reshape(m, self.n_head * d)
        out = out @ self.p(layer, "self_attn.o_proj").T
        self.trace("head", layer, "attn_out", out)
        return out

    def mlp(self, layer, x):
        h = rms(x, self.p(layer, "post_attention_layernorm"), self.eps)
        gate, up = h @ self.p(layer, "mlp.gate_proj").T, h @ self.p(layer, "mlp.up_proj").T
        out = (torch.nn.functional.silu(gate) * up) @ self.p(layer, "mlp.down_proj").T
        self.trace("head", layer, "ffn_out", out)
        return out

    def forward(self, features, emb, target_lm_head):
        """features [m, width], emb [m, H] -> (logits [m, vocab], head features [m, H])."""
        if not self.eagle3:
            x = torch.cat([emb, features], dim=-1) @ self.w["fc.weight"].T
            if "fc.bias" in self.w:
                x = x + self.w["fc.bias"]
            self.trace("head", NO_LAYER, "fc", x)
            for i in range(self.n_layer):
                h = x if i == 0 else rms(x, self.p(i, "input_layernorm"), self.eps)
                x = x + self.attention(i, h)
                x = x + self.mlp(i, x)
                self.trace("head", i, "out", x)
            logits = x @ target_lm_head.T
            self.trace("head", NO_LAYER, "logits", logits)
            return logits, x
        g = features @ self.w["fc.weight"].T
        self.trace("head", NO_LAYER, "fc", g)
        normed = rms(g, self.p(0, "hidden_norm"), self.eps)
        a = torch.cat([rms(emb, self.p(0, "input_layernorm"), self.eps), normed], dim=-1)
        x = (normed if self.norm_before_residual else g) + self.attention(0, a)
        x = x + self.mlp(0, x)
        self.trace("head", 0, "out", x)
        head = self.w.get("lm_head.weight", target_lm_head)  # no lm_head of its own: the target's
        logits = rms(x, self.w["norm.weight"], self.eps) @ head.T
        self.trace("head", NO_LAYER, "logits", logits)
        return logits, x


def teacher_forced(target_dir, head_dir, ids, layers, compute="f64", trace_dir=None):
    """(logits [n-1, vocab] f32, head features [n-1, H] f32, target features used) for one prompt; the
    target's and the head's named intermediates into trace_dir when given (aerie_trace.py)."""
    target = LlamaRef(target_dir, compute)
    head = HeadRef(head_dir, target.config, target.dtype)
    head.trace = Tracer(trace_dir)
    _, hidden = forward(target, ids, head.trace)
    parts = [hidden[FINAL_NORM if layer == FINAL_NORM_LAYER else layer][:-1] for layer in layers]  # rows 0..n-2
    features = torch.cat(parts, dim=-1).to(target.dtype)
    table = target.w["model.embed_tokens.weight"]
    own = head.w.get("embed_tokens.weight")
    if own is not None and own.shape[1] != table.shape[1]:
        table = own  # a head narrower than its target embeds with its own table
    emb = table[torch.tensor(ids[1:], dtype=torch.int64)]
    with torch.no_grad():
        logits, feats = head.forward(features, emb, target.w["lm_head.weight"])
    return logits.float().numpy(), feats.float().numpy(), [p.float().numpy() for p in parts]


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True)
    p.add_argument("--head", required=True)
    p.add_argument("--ids", required=True)
    p.add_argument("--layers", required=True, help="fused target layers, aerie convention (-1: final norm)")
    p.add_argument("--out-logits")
    p.add_argument("--out-features")
    p.add_argument("--compute", choices=["f32", "f64"], default="f64")
    p.add_argument("--trace-dir", help="write the named intermediates of aerie's AERIE_TRACE_DIR here")
    a = p.parse_args(argv)
    logits, feats, _ = teacher_forced(a.target, a.head, [int(x) for x in a.ids.split(",")],
                                      [int(x) for x in a.layers.split(",")], a.compute, a.trace_dir)
    if a.out_logits:
        np.save(a.out_logits, logits)
    if a.out_features:
        np.save(a.out_features, feats)
    print(f"logits {list(logits.shape)}, argmax per row {logits.argmax(-1).tolist()}")


if __name__ == "__main__":
    main(sys.argv[1:])
