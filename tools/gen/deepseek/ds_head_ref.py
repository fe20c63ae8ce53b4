#!/usr/bin/python3
"""A float64 PyTorch reference of EAGLE-3 heads on a DeepSeek-V3 target, teacher-forced: the MLA head
(Eagle3DeepseekV2/V3ForCausalLM, as vLLM's deepseek_eagle3.py defines it) and the Llama-style MHA head
(LlamaForCausalLMEagle3) with its own rope (plain or YaRN). The target's hidden states come from
tools/gen/deepseek/deepseek_ref.py; the MLA attention is deepseek_ref.attention (expanded form) run on the
head's weights with the head's own rope parameters.

Alignment: for ids x_0..x_{n-1}, head row t (t = 0..n-2) sits at position t, reads the target's residual
streams entering the fused layers at position t (aerie convention: hidden i = input of layer i, i = L
the last layer's output) and the token x_{t+1}, and predicts x_{t+2}:
  f = concat_i(rms_norm(h_i[t]) * fc_norm_i)        (fc_norm only when the head has it)
  g = f @ fc^T                                      [H]
  a = concat(rms_norm(embed(x_{t+1})) * input_layernorm, rms_norm(g) * hidden_norm)    [2H]
  x = g + attention(a)      (residual rms_norm(g) * hidden_norm when norm_before_residual)
  x = x + mlp(rms_norm(x) * post_attention_layernorm)
  feature = x (rms_norm(x) * norm when norm_output);  logits = rms_norm(x) * norm @ lm_head^T
  (a head without lm_head.weight: the target's lm_head, full vocabulary)
MLA attention: q_a/kv_a (or q_proj) read the 2H input; the rest as the target's MLA (deepseek_ref.py
header), rope from the head config (rope_theta, rope_scaling yarn or null, rope_interleave).
MHA attention: GQA, q/k/v read 2H, rotate_half RoPE on the whole head with inv_freq from the head's
rope_theta and, for YaRN, the same ramp as DeepSeek's (deepseek_ref.rope_parameters on head_dim) with
cos/sin times the attention factor (get_mscale(factor) = 0.1 ln(factor) + 1 without mscale keys); softmax
scale head_dim^-0.5 (transformers' Llama).
The embedding table is the target's model.embed_tokens (a head's own copy when its width differs).

  ds_head_ref.py --target T --head D --ids 1,2,3 --layers 2,1,0 --out-logits L.npy --out-features F.npy
"""
import argparse
import os
import sys
import types

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "eagle"))
import deepseek_ref as dr  # noqa: E402
from head_io import load_head  # noqa: E402

F64 = torch.float64


def rms(x, w, eps):
    return dr.rms_norm(x, w, eps)


class Head:
    def __init__(self, folder):
        self.config, stored = load_head(folder)
        c = self.config
        self.w = {k: (v.to(F64) if v.is_floating_point() else v) for k, v in stored.items()}
        self.mla = c["architectures"][0] in ("Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM")
        self.prefix = next(p for p in ("midlayer.", "model.midlayer.", "layers.0.", "model.layers.0.")
                           if any(k.startswith(p) for k in stored))
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.norm_before_residual = bool(c.get("norm_before_residual", False))
        self.norm_output = bool(c.get("norm_output", False))

    def top(self, name):
        return self.w[name] if name in self.w else self.w["model." + name]

    def has_top(self, name):
        return name in self.w or "model." + name in self.w

    def p(self, name):
        return self.w[self.prefix + name]

    def mla_attention(self, a):
        c = self.config
        m = types.SimpleNamespace(n_head=c["num_attention_heads"], q_lora=c.get("q_lora_rank"),
                                  kv_lora=c["kv_lora_rank"], nope=c["qk_nope_head_dim"], rope=c["qk_rope_head_dim"],
                                  v_dim=c["v_head_dim"], eps=self.eps, interleave=c.get("rope_interleave", True),
                                  t=lambda name: self.w[name])
        m.inv_freq, m.rope_mscale, m.softmax_scale = dr.rope_parameters(c)
        return dr.attention(m, self.prefix, a, list(range(a.shape[0])))

    def mha_attention(self, a):
        c = self.config
        n, heads, kv_heads = a.shape[0], c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
        d = c.get("head_dim") or c["hidden_size"] // heads
        inv_freq, factor, _ = dr.rope_parameters({"qk_rope_head_dim": d, "qk_nope_head_dim": 0,
                                                  "rope_theta": c.get("rope_theta", 10000.0),
                                                  "rope_scaling": c.get("rope_scaling")})
        angles = torch.arange(n, dtype=torch.float32)[:, None] * inv_freq[None, :]  # float32 like HF
        cos, sin = (angles.cos() * factor).to(F64), (angles.sin() * factor).to(F64)
        q = (a @ self.p("self_attn.q_proj.weight").T).view(n, heads, d).transpose(0, 1)
        k = (a @ self.p("self_attn.k_proj.weight").T).view(n, kv_heads, d).transpose(0, 1)
        v = (a @ self.p("self_attn.v_proj.weight").T).view(n, kv_heads, d).transpose(0, 1)
        q, k = dr.apply_rope(q, cos, sin, False), dr.apply_rope(k, cos, sin, False)  # pairs (j, j + d/2)
        k, v = k.repeat_interleave(heads // kv_heads, dim=0), v.repeat_interleave(heads // kv_heads, dim=0)
        scores = (q @ k.transpose(1, 2)) * d ** -0.5
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        out = (torch.softmax(scores, dim=-1) @ v).transpose(0, 1).reshape(n, heads * d)
        return out @ self.p("self_attn.o_proj.weight").T

    def forward(self, parts, emb, target_lm_head=None):
        """parts: list of [m, H_t]; emb [m, H] -> (logits [m, draft_vocab], features [m, H])."""
        if self.has_top("fc_norm.0.weight"):
            parts = [rms(x, self.top(f"fc_norm.{i}.weight"), self.eps) for i, x in enumerate(parts)]
        g = torch.cat(parts, dim=-1) @ self.top("fc.weight").T
        normed = rms(g, self.p("hidden_norm.weight"), self.eps)
        a = torch.cat([rms(emb, self.p("input_layernorm.weight"), self.eps), normed], dim=-1)
        x = (normed if self.norm_before_residual else g) + (self.mla_attention(a) if self.mla else self.mha_attention(a))
        h = rms(x, self.p("post_attention_layernorm.weight"), self.eps)
        gate, up = h @ self.p("mlp.gate_proj.weight").T, h @ self.p("mlp.up_proj.weight").T
        x = x + (torch.nn.functional.silu(gate) * up) @ self.p("mlp.down_proj.weight").T
        y = rms(x, self.top("norm.weight"), self.eps)
        head = self.w.get("lm_head.weight", target_lm_head)  # no lm_head of its own: the target's
        return y @ head.T, (y if self.norm_output else x)


def teacher_forced(target_dir, head_dir, ids, layers):
    """(logits [n-1, draft_vocab] f32, features [n-1, H] f32)."""
    target = dr.DeepseekRef(target_dir)
    head = Head(head_dir)
    _, hidden = dr.forward(target, ids)
    parts = [hidden[dr.FINAL_NORM if layer == -1 else layer][:-1] for layer in layers]
    table = target.t("model.embed_tokens.weight")
    if head.has_top("embed_tokens.weight") and head.top("embed_tokens.weight").shape[1] != table.shape[1]:
        table = head.top("embed_tokens.weight")
    emb = table[torch.tensor(ids[1:], dtype=torch.int64)]
    with torch.no_grad():
        logits, feats = head.forward(parts, emb, target.t("lm_head.weight"))
    return logits.float().numpy(), feats.float().numpy()


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True)
    p.add_argument("--head", required=True)
    p.add_argument("--ids", required=True)
    p.add_argument("--layers", required=True, help="fused target layers, aerie convention")
    p.add_argument("--out-logits")
    p.add_argument("--out-features")
    a = p.parse_args(argv)
    logits, feats = teacher_forced(a.target, a.head, [int(x) for x in a.ids.split(",")],
                                   [int(x) for x in a.layers.split(",")])
    if a.out_logits:
        np.save(a.out_logits, logits)
    if a.out_features:
        np.save(a.out_features, feats)
    print(f"logits {list(logits.shape)}, argmax per row {logits.argmax(-1).tolist()}")


if __name__ == "__main__":
    main(sys.argv[1:])
