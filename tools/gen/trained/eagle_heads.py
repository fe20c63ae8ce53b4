"""EAGLE-1 and EAGLE-3 draft heads in PyTorch for training (tools/gen/trained/train_heads.py), with parameter
names that are the published ones, and their export in the published layouts. The forward math is the one
tools/gen/eagle/eagle_ref.py states (and aerie runs); the chain of draft steps is unrolled as EAGLE-3's
training-time test.

Rows: for ids x_0..x_{n-1} and the target's features f_0..f_{n-1} (f_t from x_0..x_t), head row t reads
f_t and the token x_{t+1}, sits at position t of the head's cache and predicts x_{t+2} (the target's
distribution at row t+1). Draft step j >= 1 of the chain started at row t reads the previous step's output
feature and x_{t+j+1}, sits at position t+j, and attends to the step-0 keys of rows 0..t plus the keys its
own chain wrote at steps 1..j: exactly the head's KV cache when aerie drafts j tokens after row t.

EAGLE-1 (yuhuili/EAGLE-LLaMA3-Instruct-8B): fc [H, 2H] over concat(embed(x_{t+1}), f_t) with f_t the
target's final-norm output; one decoder layer without input_layernorm; logits = x @ the target's head.
EAGLE-3 (SpecForge midlayer.*): fc [H, 3H] over the target's residual streams entering three layers;
the layer's attention reads concat(rms(embed) * input_layernorm, rms(fc out) * hidden_norm) [2H], its
residual is the fc output; logits = rms(x) * norm @ lm_head [draft_vocab, H]; d2t/t2d map the draft
vocabulary to the target's. Later chain steps feed the layer's output x in place of the fc output.
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "eagle"))
from head_io import write_safetensors  # noqa: E402
from llama_model import Mlp, RMSNorm, rotate_half  # noqa: E402
from make_checkpoint import TRANSFORMERS_VERSION  # noqa: E402


def rms(x, weight, eps):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def chain_attend(q, k, v, step, cache):
    """Attention over the chain for scaled queries q [b, h, n, d] and keys/values [b, h, n, d | d_v] of draft
    step `step` (appended to cache): step 0 causal over its own rows, step j > 0 over the step-0 keys of rows
    <= t and the diagonal keys of steps 1..j. -> [b, h, n, d_v]."""
    n = q.shape[2]
    cache.append((k, v))
    k0, v0 = cache[0]
    scores = q @ k0.transpose(-1, -2)  # [b, h, n, n]: step-0 keys of rows s <= t
    scores = scores + torch.full((n, n), float("-inf")).triu(1)
    if step == 0:
        return torch.softmax(scores, dim=-1) @ v0
    diag = torch.stack([(q * ki).sum(-1) for ki, _ in cache[1:]], dim=-1)  # [b, h, n, step]
    probs = torch.softmax(torch.cat([scores, diag], dim=-1), dim=-1)
    out = probs[..., :n] @ v0
    for i, (_, vi) in enumerate(cache[1:]):
        out = out + probs[..., n + i:n + i + 1] * vi
    return out


class ChainAttention(nn.Module):
    """GQA + RoPE attention over the chain: step 0 causal over its own rows, step j > 0 over the step-0
    keys of rows <= t and the diagonal keys of steps 1..j."""

    def __init__(self, c, n_in):
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(n_in, c.num_heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(n_in, c.num_kv_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(n_in, c.num_kv_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_heads * c.head_dim, c.hidden_size, bias=False)

    def forward(self, h, step, cache, cos, sin):
        """h [b, n, n_in] at positions step..step+n-1; cache: list of (k, v) [b, n_head, n, d] of earlier steps
        (filled here)."""
        c, (b, n, _) = self.c, h.shape
        group = c.num_heads // c.num_kv_heads
        q = self.q_proj(h).view(b, n, c.num_heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(b, n, c.num_kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(b, n, c.num_kv_heads, c.head_dim).transpose(1, 2)
        cs, sn = cos[step:step + n], sin[step:step + n]
        q = (q * cs + rotate_half(q) * sn) * c.head_dim ** -0.5
        k = (k * cs + rotate_half(k) * sn).repeat_interleave(group, dim=1)
        out = chain_attend(q, k, v.repeat_interleave(group, dim=1), step, cache)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, c.num_heads * c.head_dim))


class Eagle1Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = ChainAttention(c, c.hidden_size)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = Mlp(c)


class Eagle1Head(nn.Module):
    kind = "eagle1"

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.fc = nn.Linear(2 * c.hidden_size, c.hidden_size, bias=False)
        self.layers = nn.ModuleList([Eagle1Layer(c)])

    def step(self, emb, feature, step, cache, cos, sin):
        """-> the head's output feature (its prediction of the target's next final-norm feature)."""
        x = self.fc(torch.cat([emb, feature], dim=-1))
        layer = self.layers[0]
        x = x + layer.self_attn(x, step, cache, cos, sin)
        return x + layer.mlp(layer.post_attention_layernorm(x))


class Eagle3Layer(nn.Module):
    def __init__(self, c, attention=None):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.hidden_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = attention if attention is not None else ChainAttention(c, 2 * c.hidden_size)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = Mlp(c)


class Eagle3Head(nn.Module):
    kind = "eagle3"

    def __init__(self, c, n_fused, draft_vocab, attention=None):
        """attention: the layer's chain attention over 2 x hidden inputs (default GQA ChainAttention; the MLA
        head passes mla_head.ChainMla)."""
        super().__init__()
        self.c = c
        self.fc = nn.Linear(n_fused * c.hidden_size, c.hidden_size, bias=False)
        self.midlayer = Eagle3Layer(c, attention)
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.lm_head = nn.Linear(c.hidden_size, draft_vocab, bias=False)

    def step(self, emb, g, step, cache, cos, sin):
        """g: fc(target features) at step 0, the previous step's output after -> output feature x."""
        m = self.midlayer
        a = torch.cat([m.input_layernorm(emb), m.hidden_norm(g)], dim=-1)
        x = g + m.self_attn(a, step, cache, cos, sin)
        return x + m.mlp(m.post_attention_layernorm(x))

    def logits(self, x):
        return self.lm_head(self.norm(x))


def head_config(c, kind, target_config, draft_vocab=None, aux_layers=None):
    """config.json as the published heads write it."""
    config = {"architectures": ["LlamaForCausalLM" if kind == "eagle1" else "LlamaForCausalLMEagle3"],
              "bos_token_id": target_config["bos_token_id"], "eos_token_id": target_config["eos_token_id"],
              "hidden_act": "silu", "hidden_size": c.hidden_size, "initializer_range": 0.02,
              "intermediate_size": c.intermediate_size, "max_position_embeddings": c.max_position_embeddings,
              "model_type": "llama", "num_attention_heads": c.num_heads, "num_hidden_layers": 1,
              "num_key_value_heads": c.num_kv_heads, "pretraining_tp": 1, "rms_norm_eps": c.rms_norm_eps,
              "rope_scaling": None, "rope_theta": c.rope_theta, "tie_word_embeddings": False,
              "torch_dtype": "bfloat16", "transformers_version": TRANSFORMERS_VERSION, "use_cache": True,
              "vocab_size": target_config["vocab_size"]}
    if kind == "eagle1":
        config["bias"] = False
    else:
        config["draft_vocab_size"] = draft_vocab
        config["target_hidden_size"] = target_config["hidden_size"]
        config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(aux_layers), "use_aux_hidden_state": True}
    return config


def export(head, folder, config, d2t=None, t2d=None):
    """EAGLE-1: pytorch_model.bin (torch.save of a BF16 state dict, as yuhuili/EAGLE-LLaMA3-Instruct-8B);
    EAGLE-3: model.safetensors (BF16 weights + int64 d2t + bool t2d, SpecForge names)."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in head.state_dict().items()}
    if head.kind == "eagle1":
        torch.save(state, os.path.join(folder, "pytorch_model.bin"))
    else:
        state["d2t"], state["t2d"] = d2t.to(torch.int64), t2d.to(torch.bool)
        write_safetensors(os.path.join(folder, "model.safetensors"), state)


def soft_cross_entropy(logits, target_probs):
    """sum over the vocabulary of -p log q, per row."""
    return -(target_probs * F.log_softmax(logits, dim=-1)).sum(-1)


__all__ = ["Eagle1Head", "Eagle3Head", "head_config", "export", "soft_cross_entropy", "rms"]
