"""The EAGLE-3 MLA draft head of a DeepSeek-V3 target for training (tools/gen/trained/train_heads.py): the
Eagle3Head of eagle_heads.py with multi-head latent attention in its layer, as vLLM's deepseek_eagle3.py
defines the head (Eagle3DeepseekV3ForCausalLM) and tools/gen/deepseek/ds_head_ref.py computes it in float64.

The layer's attention reads a = [rms(embed) * input_layernorm | rms(g) * hidden_norm] (2H wide) through the
target's MLA shapes: q = q_b(rms(q_a(a)) * q_a_layernorm) (or q_proj(a) without q_lora_rank),
[c | k_pe] = kv_a_proj_with_mqa(a), c = rms(c) * kv_a_layernorm, [k_nope | v] = kv_b(c) per head; rope on
q_pe and the one shared k_pe with pairs (2j, 2j+1) (rope_interleave, the default), the head's own
rope_theta, no YaRN; softmax scale (nope + rope)^-0.5. Chain steps attend as eagle_heads.chain_attend.
"""
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "deepseek"))
import deepseek_ref  # noqa: E402
from eagle_heads import Eagle3Head, chain_attend  # noqa: E402
from llama_model import RMSNorm  # noqa: E402
from make_checkpoint import TRANSFORMERS_VERSION  # noqa: E402


class ChainMla(nn.Module):
    """MLA over the chain, expanded form (per-head keys and values through kv_b_proj)."""

    def __init__(self, c, n_in):
        super().__init__()
        self.c = c
        qk = c.qk_nope_head_dim + c.qk_rope_head_dim
        if c.q_lora_rank:
            self.q_a_proj = nn.Linear(n_in, c.q_lora_rank, bias=False)
            self.q_a_layernorm = RMSNorm(c.q_lora_rank, c.rms_norm_eps)
            self.q_b_proj = nn.Linear(c.q_lora_rank, c.num_heads * qk, bias=False)
        else:
            self.q_proj = nn.Linear(n_in, c.num_heads * qk, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(n_in, c.kv_lora_rank + c.qk_rope_head_dim, bias=False)
        self.kv_a_layernorm = RMSNorm(c.kv_lora_rank, c.rms_norm_eps)
        self.kv_b_proj = nn.Linear(c.kv_lora_rank, c.num_heads * (c.qk_nope_head_dim + c.v_head_dim), bias=False)
        self.o_proj = nn.Linear(c.num_heads * c.v_head_dim, c.hidden_size, bias=False)
        self.softmax_scale = qk ** -0.5

    def forward(self, h, step, cache, cos, sin):
        """h [b, n, n_in] at positions step..step+n-1; cos/sin [positions, rope / 2] (deepseek_model.rope_cos_sin)."""
        c, (b, n, _) = self.c, h.shape
        nope, rope = c.qk_nope_head_dim, c.qk_rope_head_dim
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(h))) if c.q_lora_rank else self.q_proj(h)
        q = q.view(b, n, c.num_heads, nope + rope).transpose(1, 2)  # [b, n_head, n, nope + rope]
        kv_a = self.kv_a_proj_with_mqa(h)
        latent = self.kv_a_layernorm(kv_a[..., :c.kv_lora_rank])
        cs, sn = cos[step:step + n], sin[step:step + n]
        k_pe = deepseek_ref.apply_rope(kv_a[..., c.kv_lora_rank:], cs, sn, True)  # [b, n, rope]
        q_pe = deepseek_ref.apply_rope(q[..., nope:], cs, sn, True)
        kv = self.kv_b_proj(latent).view(b, n, c.num_heads, nope + c.v_head_dim).transpose(1, 2)
        q = torch.cat([q[..., :nope], q_pe], dim=-1) * self.softmax_scale
        k = torch.cat([kv[..., :nope], k_pe[:, None].expand(b, c.num_heads, n, rope)], dim=-1)
        out = chain_attend(q, k, kv[..., nope:], step, cache)  # [b, n_head, n, v_head_dim]
        return self.o_proj(out.transpose(1, 2).reshape(b, n, c.num_heads * c.v_head_dim))


def make_mla_head(c, n_fused, draft_vocab):
    """c: the target's DeepseekConfig; the head's dense MLP has the target's intermediate_size."""
    return Eagle3Head(c, n_fused, draft_vocab, attention=ChainMla(c, 2 * c.hidden_size))


def mla_head_config(target_config, c, draft_vocab, aux_layers):
    """config.json as published MLA heads carry it: the target's config (MoE keys and all) with the
    EAGLE-3 architecture, one layer, the head's dense intermediate_size, draft_vocab_size and the fused
    layers (aerie convention: residual entering layer i; num_hidden_layers = the last layer's output)."""
    config = dict(target_config)
    for key in ("quantization_config", "auto_map", "num_nextn_predict_layers"):
        config.pop(key, None)
    config.update({"architectures": ["Eagle3DeepseekV3ForCausalLM"], "num_hidden_layers": 1,
                   "intermediate_size": c.intermediate_size, "q_lora_rank": c.q_lora_rank,
                   "draft_vocab_size": draft_vocab, "target_hidden_size": target_config["hidden_size"],
                   "torch_dtype": "bfloat16", "transformers_version": TRANSFORMERS_VERSION,
                   "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(aux_layers),
                                    "use_aux_hidden_state": True}})
    return config


__all__ = ["ChainMla", "make_mla_head", "mla_head_config"]
