"""A Llama 3 decoder in PyTorch for training aerie's small models, written from the architecture (not
from transformers), with module names that make state_dict() keys the Hugging Face LlamaForCausalLM
names (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ..., model.norm.weight; no
lm_head.weight when the embeddings are tied). Also: config.json <-> LlamaConfig, loading an exported
folder, and export in the published layout (BF16 safetensors).

The math, for ids [batch, n_tokens] at positions 0..n-1 (the same as tools/gen/reference/llama_ref.py):
  x = embed_tokens[ids]
  per layer:  h = rms_norm(x) * input_layernorm                       # statistic in float32
              q, k, v = h Wq^T, h Wk^T, h Wv^T                        # [batch, n_head|n_head_kv, n, head_dim]
              q, k = q cos + rotate_half(q) sin, ...                  # HF convention: pairs (i, i + head_dim/2)
              query head j attends with kv head j // (n_head / n_head_kv), causal, scale head_dim^-0.5
              x = x + attn Wo^T
              x = x + down(silu(gate(rms_norm(x) * post_attention_layernorm)) * up(...))
  logits = rms_norm(x) * norm @ embed_tokens^T                        # tied head
"""
import dataclasses
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

_TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _TOOLS)
sys.path.insert(0, os.path.join(_TOOLS, "reference"))
from checkpoint_io import load_state_dict, to_storage_bits, write_safetensors  # noqa: E402
from make_checkpoint import TRANSFORMERS_VERSION, make_config  # noqa: E402


@dataclasses.dataclass
class LlamaConfig:
    vocab_size: int = 6144
    hidden_size: int = 256
    intermediate_size: int = 768
    num_layers: int = 6
    num_heads: int = 8
    num_kv_heads: int = 2
    max_position_embeddings: int = 512
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    bos_token_id: int = 6128
    eos_token_id: int = 6129

    @property
    def head_dim(self):
        return self.hidden_size // self.num_heads

    def to_hf(self):
        """config.json as a published Llama 3 checkpoint writes it (tools/gen/make_checkpoint.py's table)."""
        a = dict(hidden_size=self.hidden_size, intermediate_size=self.intermediate_size, num_heads=self.num_heads,
                 num_kv_heads=self.num_kv_heads, head_dim=self.head_dim, num_layers=self.num_layers,
                 vocab_size=self.vocab_size, tie=True, rope_theta=self.rope_theta, rope_scaling=False,
                 max_position_embeddings=self.max_position_embeddings, bos_token_id=self.bos_token_id,
                 eos_token_id=str(self.eos_token_id), rms_norm_eps=self.rms_norm_eps, dtype="bf16")
        return make_config(type("Args", (), a))

    @staticmethod
    def from_hf(c):
        if c.get("architectures") != ["LlamaForCausalLM"] or not c.get("tie_word_embeddings"):
            raise ValueError("expected a LlamaForCausalLM with tied embeddings")
        if c.get("rope_scaling") is not None:
            raise ValueError("rope_scaling is not used by these models")
        eos = c["eos_token_id"]
        return LlamaConfig(vocab_size=c["vocab_size"], hidden_size=c["hidden_size"],
                           intermediate_size=c["intermediate_size"], num_layers=c["num_hidden_layers"],
                           num_heads=c["num_attention_heads"], num_kv_heads=c["num_key_value_heads"],
                           max_position_embeddings=c["max_position_embeddings"], rope_theta=c["rope_theta"],
                           rms_norm_eps=c["rms_norm_eps"], bos_token_id=c["bos_token_id"],
                           eos_token_id=eos[0] if isinstance(eos, list) else eos)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        x_f = x.float()
        return self.weight * (x_f * torch.rsqrt(x_f.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


def rope_cos_sin(c, n_tokens, device=None):
    """cos, sin [n_tokens, head_dim] float32 for positions 0..n-1, each frequency on both halves."""
    inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.int64).float() / c.head_dim))
    angles = torch.arange(n_tokens, dtype=torch.float32, device=device)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(c.hidden_size, c.num_heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_kv_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_kv_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_heads * c.head_dim, c.hidden_size, bias=False)

    def forward(self, h, cos, sin, mask):
        c, (b, n, _) = self.c, h.shape
        q = self.q_proj(h).view(b, n, c.num_heads, c.head_dim).transpose(1, 2)  # [b, n_head, n, head_dim]
        k = self.k_proj(h).view(b, n, c.num_kv_heads, c.head_dim).transpose(1, 2)  # [b, n_head_kv, n, head_dim]
        v = self.v_proj(h).view(b, n, c.num_kv_heads, c.head_dim).transpose(1, 2)
        q = (q * cos + rotate_half(q) * sin) * (c.head_dim ** -0.5)  # the score scale, applied to q
        k = k * cos + rotate_half(k) * sin
        # Grouped-query attention without copying k and v: the `group` query heads that share kv head g
        # (heads g*group .. g*group+group-1) are stacked along the rows, [b, n_head_kv, group * n, head_dim].
        group = c.num_heads // c.num_kv_heads
        q = q.reshape(b, c.num_kv_heads, group * n, c.head_dim)
        scores = q @ k.transpose(-1, -2)  # [b, n_head_kv, group * n, n]
        scores += mask.repeat(group, 1)  # -inf above the diagonal of each head's [n, n] block
        probs = torch.softmax(scores, dim=-1)
        out = (probs @ v).view(b, c.num_heads, n, c.head_dim)  # back to one row block per query head
        return self.o_proj(out.transpose(1, 2).reshape(b, n, c.num_heads * c.head_dim))


class Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, h):
        return self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = Mlp(c)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(c) for _ in range(c.num_layers)])
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class LlamaForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.model = LlamaModel(c)

    def init_weights(self, seed, std=0.02):
        """N(0, std^2) matrices and embeddings; the projections that write into the residual stream
        (o_proj, down_proj) scaled by 1/sqrt(2 n_layer) so the stream's variance does not grow with depth."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("layernorm.weight") or name == "model.norm.weight":
                    p.fill_(1.0)
                else:
                    scale = 1 / math.sqrt(2 * self.config.num_layers) if name.endswith(("o_proj.weight", "down_proj.weight")) else 1
                    p.copy_(torch.randn(p.shape, generator=g) * std * scale)

    def forward(self, ids, hidden_layers=()):
        """ids [b, n] -> logits [b, n, vocab] (and, when asked, the residual stream entering each layer in
        hidden_layers, n_layer = after the last layer, as {layer: [b, n, hidden]})."""
        n = ids.shape[1]
        cos, sin = rope_cos_sin(self.config, n, ids.device)
        mask = torch.full((n, n), float("-inf"), device=ids.device).triu(1)  # additive causal mask
        x, hidden = self.model.embed_tokens(ids), {}
        for i, layer in enumerate(self.model.layers):
            if i in hidden_layers:
                hidden[i] = x
            x = layer(x, cos, sin, mask)
        if self.config.num_layers in hidden_layers:
            hidden[self.config.num_layers] = x
        logits = self.model.norm(x) @ self.model.embed_tokens.weight.T
        return (logits, hidden) if hidden_layers else logits


def export(model, folder, generation_extra=None):
    """Writes config.json, generation_config.json and model.safetensors (BF16, HF names, sorted as the
    safetensors library writes them; no lm_head.weight: tied)."""
    os.makedirs(folder, exist_ok=True)
    c = model.config
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(c.to_hf(), f, indent=2)
        f.write("\n")
    generation = {"bos_token_id": c.bos_token_id, "do_sample": True, "eos_token_id": c.eos_token_id,
                  "temperature": 0.6, "top_p": 0.9, "transformers_version": TRANSFORMERS_VERSION}
    generation.update(generation_extra or {})
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump(generation, f, indent=2)
        f.write("\n")
    state = {k: v.detach().float().contiguous().numpy() for k, v in model.state_dict().items()}
    names = sorted(state)
    write_safetensors(os.path.join(folder, "model.safetensors"), [(n, state[n].shape) for n in names], "bf16",
                      lambda n: [to_storage_bits(state[n].reshape(-1), "bf16")])


def load(folder):
    """An exported folder -> LlamaForCausalLM in float32 holding the stored (BF16) values exactly."""
    with open(os.path.join(folder, "config.json")) as f:
        c = LlamaConfig.from_hf(json.load(f))
    model = LlamaForCausalLM(c)
    stored = {k: v.float() for k, v in load_state_dict(folder).items()}
    model.load_state_dict(stored, strict=True)
    return model.eval()


def round_to_bf16_(model):
    """Rounds every parameter to the nearest BF16 value (what export stores), in place."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    return model


def param_count(model):
    return sum(p.numel() for p in model.parameters())


__all__ = ["LlamaConfig", "LlamaForCausalLM", "export", "load", "round_to_bf16_", "param_count", "np"]
