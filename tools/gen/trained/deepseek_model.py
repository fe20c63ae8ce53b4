"""A DeepSeek-V3 decoder with its MTP layer in PyTorch (float32, autograd) for training aerie's small
DeepSeek model: the architecture aerie runs (src/models/deepseek_v3.cpp, mla.cpp, moe.cpp,
src/spec/mtp_drafter.cpp) and tools/gen/deepseek/deepseek_ref.py computes in float64, whose rope, rms_norm
and rope parameters it imports. Module names make state_dict() keys the published DeepseekV3ForCausalLM
names (model.embed_tokens.weight, model.layers.N.self_attn.q_a_proj.weight, ...,
model.layers.N.mlp.gate.e_score_correction_bias, lm_head.weight; the MTP layer model.layers.L.* with its
embed_tokens and shared_head.head being the main embedding and lm_head, the same parameters, so the
state_dict carries the copies the published checkpoint stores).

The math, for ids [batch, n] at positions 0..n-1 (deepseek_ref.py's docstring has the full formulas):
  x = embed_tokens[ids]
  per layer i:  h = rms_norm(x) * input_layernorm
                q = q_b(rms_norm(q_a(h)) * q_a_layernorm)              # [b, n_head, n, nope + rope]
                c, k_pe = kv_a_proj_with_mqa(h) split [kv_lora | rope]; c = rms_norm(c) * kv_a_layernorm
                k_nope, v = kv_b(c) split per head [nope | v]
                q_pe, k_pe = rope(q_pe), rope(k_pe)                    # pairs (2j, 2j+1), no YaRN
                x = x + o_proj(softmax((q_nope.k_nope + q_pe.k_pe) * (nope + rope)^-0.5, causal) @ v)
                h = rms_norm(x) * post_attention_layernorm
                x = x + (dense SwiGLU if i < first_k_dense_replace else MoE(h))
  hidden_final = rms_norm(x) * norm;  logits = hidden_final @ lm_head^T
  MoE: s = sigmoid(gate(h)) [n_tokens, n_expert]; b = s + e_score_correction_bias (selection only);
       group score = sum of the 2 largest b in the group; keep topk_group groups; top num_experts_per_tok
       b among their experts; weights = s[chosen] / sum * routed_scaling_factor; out = sum w_e expert_e(h)
       + shared_experts(h).
  MTP row t (t = 0..n-2, position t, predicts ids[t + 2]):
       u = eh_proj([rms_norm(embed(ids[t + 1])) * enorm | rms_norm(hidden_final[t]) * hnorm])
       u = decoder_layer_L(u); mtp_logits = rms_norm(u) * shared_head.norm @ lm_head^T
       hidden_final is the target's state AFTER model.norm: what aerie's MTP drafter reads
       (target_layers() = {final_norm}) and deepseek_ref.mtp_forward is given, as vLLM and SGLang pass it.

Balancing (DeepSeek-V3 §2.1.2): the bias moves by gamma * sign(mean load - load_e) after each step
(update_router_biases, no gradient), and an optional sequence-wise balance loss
alpha * sum_e f_e P_e per sequence, f_e = n_expert / (top_k n) * (tokens routed to e), P_e = mean over the
sequence of s_e / sum_j s_j.
"""
import dataclasses
import json
import os
import sys
import types

import torch
import torch.nn as nn
import torch.nn.functional as F

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "deepseek"))
import deepseek_ref  # noqa: E402
import ds_io  # noqa: E402
from llama_model import RMSNorm, param_count, round_to_bf16_  # noqa: E402
from make_deepseek_checkpoint import TRANSFORMERS_VERSION, make_config  # noqa: E402


@dataclasses.dataclass
class DeepseekConfig:
    vocab_size: int = 6144
    hidden_size: int = 256
    intermediate_size: int = 768       # the dense layers' SwiGLU
    moe_intermediate_size: int = 256   # each routed expert (the shared experts: times n_shared_experts)
    num_layers: int = 4
    num_heads: int = 8
    q_lora_rank: int = 128
    kv_lora_rank: int = 64
    qk_nope_head_dim: int = 32
    qk_rope_head_dim: int = 16
    v_head_dim: int = 32
    n_routed_experts: int = 8
    n_shared_experts: int = 1
    num_experts_per_tok: int = 2
    n_group: int = 4
    topk_group: int = 2
    routed_scaling_factor: float = 2.5
    norm_topk_prob: bool = True
    first_k_dense_replace: int = 1
    moe_layer_freq: int = 1
    num_nextn_predict_layers: int = 1
    max_position_embeddings: int = 512
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    bos_token_id: int = 6128
    eos_token_id: int = 6129

    def is_moe(self, i):
        """The rule of deepseek_ref.DeepseekRef.is_moe (the MTP layer L follows it too)."""
        return self.n_routed_experts > 0 and i >= self.first_k_dense_replace and i % self.moe_layer_freq == 0

    def to_hf(self):
        """config.json with the keys of deepseek-ai/DeepSeek-V3's (make_deepseek_checkpoint.py's table)."""
        a = types.SimpleNamespace(
            hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
            moe_intermediate_size=self.moe_intermediate_size, num_layers=self.num_layers, num_heads=self.num_heads,
            q_lora_rank=self.q_lora_rank, kv_lora_rank=self.kv_lora_rank, qk_nope_head_dim=self.qk_nope_head_dim,
            qk_rope_head_dim=self.qk_rope_head_dim, v_head_dim=self.v_head_dim,
            n_routed_experts=self.n_routed_experts, n_shared_experts=self.n_shared_experts,
            num_experts_per_tok=self.num_experts_per_tok, n_group=self.n_group, topk_group=self.topk_group,
            norm_topk_prob=self.norm_topk_prob, routed_scaling_factor=self.routed_scaling_factor,
            first_k_dense_replace=self.first_k_dense_replace, moe_layer_freq=self.moe_layer_freq,
            vocab_size=self.vocab_size, rope_theta=self.rope_theta, yarn=False, rope_interleave=None,
            mtp=self.num_nextn_predict_layers, bos_token_id=self.bos_token_id, eos_token_id=self.eos_token_id,
            max_position_embeddings=self.max_position_embeddings, rms_norm_eps=self.rms_norm_eps,
            fp8=False, dequantize=False)
        return make_config(a)

    @staticmethod
    def from_hf(c):
        deepseek_ref.check_config(c, "config.json")
        q = c.get("quantization_config")
        fp8_blocks_ok = q is None or (q.get("quant_method") == "fp8" and q.get("weight_block_size") == [128, 128])
        if c.get("rope_scaling") is not None or not fp8_blocks_ok or not c.get("q_lora_rank") \
                or not c.get("rope_interleave", True):
            raise ValueError("expected rope_scaling null, BF16 or 128x128-block FP8 weights, a q_lora_rank and "
                             "interleaved rope")
        fields = {f.name for f in dataclasses.fields(DeepseekConfig)}
        renamed = {"num_hidden_layers": "num_layers", "num_attention_heads": "num_heads"}
        return DeepseekConfig(**{renamed.get(k, k): v for k, v in c.items() if renamed.get(k, k) in fields})

    def as_ref_dict(self):
        return {"qk_rope_head_dim": self.qk_rope_head_dim, "qk_nope_head_dim": self.qk_nope_head_dim,
                "rope_theta": self.rope_theta, "rope_scaling": None}


def rope_cos_sin(c, n_tokens):
    """cos, sin [n_tokens, rope / 2] float32 (deepseek_ref.rope_parameters: inv_freq and angles in float32)."""
    inv_freq, _, _ = deepseek_ref.rope_parameters(c.as_ref_dict())
    angles = torch.arange(n_tokens, dtype=torch.float32)[:, None] * inv_freq[None, :]
    return angles.cos(), angles.sin()


class Mla(nn.Module):
    """Multi-head latent attention, the expanded form (per-head keys and values through kv_b_proj)."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        qk = c.qk_nope_head_dim + c.qk_rope_head_dim
        self.q_a_proj = nn.Linear(c.hidden_size, c.q_lora_rank, bias=False)
        self.q_a_layernorm = RMSNorm(c.q_lora_rank, c.rms_norm_eps)
        self.q_b_proj = nn.Linear(c.q_lora_rank, c.num_heads * qk, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(c.hidden_size, c.kv_lora_rank + c.qk_rope_head_dim, bias=False)
        self.kv_a_layernorm = RMSNorm(c.kv_lora_rank, c.rms_norm_eps)
        self.kv_b_proj = nn.Linear(c.kv_lora_rank, c.num_heads * (c.qk_nope_head_dim + c.v_head_dim), bias=False)
        self.o_proj = nn.Linear(c.num_heads * c.v_head_dim, c.hidden_size, bias=False)
        self.softmax_scale = qk ** -0.5

    def forward(self, h, cos, sin, mask):
        c, (b, n, _) = self.c, h.shape
        nope, rope = c.qk_nope_head_dim, c.qk_rope_head_dim
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(h)))
        q = q.view(b, n, c.num_heads, nope + rope).transpose(1, 2)  # [b, n_head, n, nope + rope]
        kv_a = self.kv_a_proj_with_mqa(h)  # [b, n, kv_lora_rank + rope]
        latent = self.kv_a_layernorm(kv_a[..., :c.kv_lora_rank])  # [b, n, kv_lora_rank]
        k_pe = deepseek_ref.apply_rope(kv_a[..., c.kv_lora_rank:], cos, sin, True)  # [b, n, rope], one per token
        q_pe = deepseek_ref.apply_rope(q[..., nope:], cos, sin, True)  # [b, n_head, n, rope]
        kv = self.kv_b_proj(latent).view(b, n, c.num_heads, nope + c.v_head_dim).transpose(1, 2)
        k_nope, v = kv[..., :nope], kv[..., nope:]  # [b, n_head, n, nope], [b, n_head, n, v_head_dim]
        # One matmul for both parts: [q_nope | q_pe] . [k_nope | k_pe] = q_nope.k_nope + q_pe.k_pe.
        q = torch.cat([q[..., :nope], q_pe], dim=-1) * self.softmax_scale
        k = torch.cat([k_nope, k_pe[:, None].expand(b, c.num_heads, n, rope)], dim=-1)
        probs = torch.softmax(q @ k.transpose(-1, -2) + mask, dim=-1)  # [b, n_head, n, n]
        out = (probs @ v).transpose(1, 2).reshape(b, n, c.num_heads * c.v_head_dim)
        return self.o_proj(out)


class Mlp(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, h):
        return self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Gate(nn.Module):
    """mlp.gate.weight [n_expert, hidden] and mlp.gate.e_score_correction_bias [n_expert] (a buffer: it moves
    by the balancing rule, not by gradients)."""

    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(c.n_routed_experts, c.hidden_size))
        self.register_buffer("e_score_correction_bias", torch.zeros(c.n_routed_experts))


def route(c, scores, bias):
    """scores [T, n_expert] sigmoid outputs, bias [n_expert] -> (experts [T, top_k], weights [T, top_k]).
    Selection on scores + bias (no gradient), weights from the unbiased scores (differentiable)."""
    t, e = scores.shape
    with torch.no_grad():
        biased = scores + bias  # [T, n_expert]
        group_score = biased.view(t, c.n_group, e // c.n_group).topk(2, dim=-1).values.sum(-1)  # [T, n_group]
        kept = group_score.topk(c.topk_group, dim=-1).indices  # [T, topk_group]
        group_mask = torch.zeros_like(group_score, dtype=torch.bool).scatter_(1, kept, True)
        expert_mask = group_mask.repeat_interleave(e // c.n_group, dim=1)  # [T, n_expert]
        experts = biased.masked_fill(~expert_mask, float("-inf")).topk(c.num_experts_per_tok, dim=-1).indices
    weights = scores.gather(1, experts)
    if c.norm_topk_prob:
        weights = weights / weights.sum(-1, keepdim=True)
    return experts, weights * c.routed_scaling_factor


class Moe(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.gate = Gate(c)
        self.experts = nn.ModuleList([Mlp(c.hidden_size, c.moe_intermediate_size) for _ in range(c.n_routed_experts)])
        if c.n_shared_experts:
            self.shared_experts = Mlp(c.hidden_size, c.moe_intermediate_size * c.n_shared_experts)
        self.register_buffer("load", torch.zeros(c.n_routed_experts), persistent=False)  # tokens since update
        self.balance_loss = None

    def forward(self, h):
        c, (b, n, hidden) = self.c, h.shape
        x = h.reshape(b * n, hidden)  # [n_tokens, hidden]
        scores = torch.sigmoid(x @ self.gate.weight.T)  # [n_tokens, n_expert]
        experts, weights = route(c, scores, self.gate.e_score_correction_bias)  # [n_tokens, top_k] each
        flat = experts.reshape(-1)  # slot j = token j // top_k
        counts = torch.bincount(flat, minlength=c.n_routed_experts)
        if self.training:
            self.load += counts.float()
            self.balance_loss = self._sequence_balance(scores.view(b, n, -1), experts.view(b, n, -1))
        # Group the (token, slot) pairs by expert: order lists the slots of expert 0, then expert 1, ...
        order = flat.argsort()
        tokens, slot_weights = order // c.num_experts_per_tok, weights.reshape(-1)[order]
        out = torch.zeros_like(x)
        begin = 0
        for e, count in enumerate(counts.tolist()):
            if count:
                rows = tokens[begin:begin + count]
                out.index_add_(0, rows, self.experts[e](x[rows]) * slot_weights[begin:begin + count, None])
            begin += count
        if c.n_shared_experts:
            out = out + self.shared_experts(x)
        return out.view(b, n, hidden)

    def _sequence_balance(self, scores, experts):
        """sum_e f_e P_e per sequence, averaged over the batch (DeepSeek-V3 eq. 17-20)."""
        c, (b, n, e) = self.c, scores.shape
        chosen = torch.zeros(b, n, e).scatter_(2, experts, 1.0).sum(1)  # [b, n_expert] tokens per expert
        f = chosen * e / (c.num_experts_per_tok * n)
        p = (scores / scores.sum(-1, keepdim=True)).mean(1)  # [b, n_expert]
        return (f * p).sum(-1).mean()


class DecoderLayer(nn.Module):
    def __init__(self, c, i):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Mla(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = Moe(c) if c.is_moe(i) else Mlp(c.hidden_size, c.intermediate_size)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class SharedHead(nn.Module):
    def __init__(self, c, head):
        super().__init__()
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.head = head  # the main lm_head module (shared parameter; a copy in the published file)


class MtpLayer(DecoderLayer):
    """model.layers.L: enorm, hnorm, eh_proj, a decoder layer, shared_head; embed_tokens = the main one."""

    def __init__(self, c, embed_tokens, lm_head):
        super().__init__(c, c.num_layers)
        self.embed_tokens = embed_tokens
        self.enorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.hnorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.eh_proj = nn.Linear(2 * c.hidden_size, c.hidden_size, bias=False)
        self.shared_head = SharedHead(c, lm_head)

    def predict(self, next_ids, hidden_final, cos, sin, mask):
        """next_ids [b, m] (token t + 1), hidden_final [b, m, hidden] (after model.norm) -> logits [b, m, V]."""
        u = self.eh_proj(torch.cat([self.enorm(self.embed_tokens(next_ids)), self.hnorm(hidden_final)], dim=-1))
        u = super().forward(u, cos, sin, mask)
        return self.shared_head.head(self.shared_head.norm(u))


class DeepseekModel(nn.Module):
    def __init__(self, c, lm_head):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        layers = [DecoderLayer(c, i) for i in range(c.num_layers)]
        if c.num_nextn_predict_layers:
            layers.append(MtpLayer(c, self.embed_tokens, lm_head))
        self.layers = nn.ModuleList(layers)
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class DeepseekV3ForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        if c.num_nextn_predict_layers not in (0, 1):
            raise ValueError("num_nextn_predict_layers must be 0 or 1")
        self.config = c
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)  # registered first: named_parameters
        self.model = DeepseekModel(c, self.lm_head)  # then lists it as lm_head.weight, not the MTP copy

    def init_weights(self, seed, std=0.02):
        """N(0, std^2) matrices, embeddings and router gates; o_proj and down_proj (they write into the
        residual stream) scaled by 1/sqrt(2 (n_layer + 1)); norms 1, router biases 0."""
        g = torch.Generator().manual_seed(seed)
        depth = self.config.num_layers + self.config.num_nextn_predict_layers
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("norm.weight"):
                    p.fill_(1.0)
                else:
                    scale = (2 * depth) ** -0.5 if name.endswith(("o_proj.weight", "down_proj.weight")) else 1.0
                    p.copy_(torch.randn(p.shape, generator=g) * std * scale)
            for m in self.moe_layers():
                m.gate.e_score_correction_bias.zero_()

    def moe_layers(self):
        return [m for m in self.modules() if isinstance(m, Moe)]

    def forward(self, ids, with_mtp=True, hidden=None):
        """ids [b, n] -> (logits [b, n, V], mtp_logits [b, n - 1, V] or None, hidden_final [b, n, H]).
        mtp_logits row t predicts ids[t + 2] from hidden_final[t] and ids[t + 1]. hidden: an optional dict
        whose keys are layers i; filled with the residual stream entering layer i (i = num_layers: the last
        layer's output, before model.norm), [b, n, H] each, as aerie captures them."""
        c, n = self.config, ids.shape[1]
        cos, sin = rope_cos_sin(c, n)
        mask = torch.full((n, n), float("-inf")).triu(1)  # additive causal mask
        x = self.model.embed_tokens(ids)
        for i, layer in enumerate(self.model.layers[:c.num_layers]):
            if hidden is not None and i in hidden:
                hidden[i] = x
            x = layer(x, cos, sin, mask)
        if hidden is not None and c.num_layers in hidden:
            hidden[c.num_layers] = x
        hidden_final = self.model.norm(x)
        logits = self.lm_head(hidden_final)
        mtp_logits = None
        if with_mtp and c.num_nextn_predict_layers and n > 1:
            mtp = self.model.layers[c.num_layers]
            mtp_logits = mtp.predict(ids[:, 1:], hidden_final[:, :-1], cos[:n - 1], sin[:n - 1], mask[:n - 1, :n - 1])
        return logits, mtp_logits, hidden_final

    def balance_loss(self):
        """Sum over the MoE layers of the last training forward's sequence-wise balance loss."""
        losses = [m.balance_loss for m in self.moe_layers() if m.balance_loss is not None]
        return sum(losses) if losses else torch.zeros(())

    @torch.no_grad()
    def update_router_biases(self, gamma):
        """Aux-loss-free balancing: bias_e += gamma * sign(mean load - load_e) over the tokens routed since the
        last call; returns the max/mean load ratio of each MoE layer (1 = balanced)."""
        ratios = []
        for m in self.moe_layers():
            load = m.load
            if load.sum() > 0:
                m.gate.e_score_correction_bias += gamma * torch.sign(load.mean() - load)
                ratios.append(float(load.max() / load.mean()))
            load.zero_()
        return ratios


FP8_WEIGHTS = ("q_a_proj.weight", "q_b_proj.weight", "q_proj.weight", "kv_a_proj_with_mqa.weight", "kv_b_proj.weight",
               "o_proj.weight", "gate_proj.weight", "up_proj.weight", "down_proj.weight")


def is_fp8_weight(name):
    """The linear weights deepseek-ai/DeepSeek-V3 stores as F8_E4M3 with 128x128 weight_scale_inv tiles: the
    attention projections and every MLP / expert / shared-expert matrix (not embed_tokens, lm_head, the norms,
    the router gate, eh_proj or shared_head.head)."""
    return name.startswith("model.layers.") and name.endswith(FP8_WEIGHTS)


def fp8_blocks(state):
    """{name: (codes uint8, scale_inv float32)} for the FP8 weights of a state (tools/gen/deepseek/ds_io.py)."""
    return {n: ds_io.quantize_blocks(v) for n, v in state.items() if is_fp8_weight(n)}


def round_to_export_(model, fp8=False):
    """Every parameter to the value export stores: BF16, and with fp8 the FP8 weights' dequantised blocks."""
    round_to_bf16_(model)
    if fp8:
        with torch.no_grad():
            params = dict(model.named_parameters())
            for name, (codes, scale) in fp8_blocks(state_for_export(model)).items():
                params[name].copy_(torch.from_numpy(ds_io.dequantize_blocks(codes, scale)).float())
    return model


def state_for_export(model):
    """{published name: float32 numpy} with the MTP layer's embed_tokens / shared_head.head copies."""
    return {k: v.detach().float().contiguous().numpy() for k, v in model.state_dict().items()}


def export(model, folder, fp8=False):
    """config.json, generation_config.json and model.safetensors (BF16; e_score_correction_bias F32 as
    published; names sorted as the safetensors library writes them). fp8: the published checkpoint's format,
    is_fp8_weight() tensors F8_E4M3 with <name>_scale_inv F32 tiles and a quantization_config."""
    os.makedirs(folder, exist_ok=True)
    c = model.config
    hf = c.to_hf()
    if fp8:
        hf["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                     "weight_block_size": [ds_io.BLOCK, ds_io.BLOCK]}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf, f, indent=2)
        f.write("\n")
    generation = {"_from_model_config": True, "bos_token_id": c.bos_token_id, "do_sample": True,
                  "eos_token_id": c.eos_token_id, "temperature": 0.6, "top_p": 0.95,
                  "transformers_version": TRANSFORMERS_VERSION}
    with open(os.path.join(folder, "generation_config.json"), "w") as f:
        json.dump(generation, f, indent=2)
        f.write("\n")
    state = state_for_export(model)
    blocks = fp8_blocks(state) if fp8 else {}
    for name, (_, scale) in list(blocks.items()):
        state[name + "_scale_inv"] = scale

    def dtype(name):
        if name in blocks:
            return "F8_E4M3"
        return "F32" if name.endswith(("e_score_correction_bias", "_scale_inv")) else "BF16"

    def chunks(name):
        if name in blocks:
            yield blocks[name][0].reshape(-1)
            return
        flat = state[name].reshape(-1)
        yield flat if dtype(name) == "F32" else ds_io.float_to_bf16_bits(flat)

    entries = [(n, dtype(n), state[n].shape) for n in sorted(state)]
    ds_io.write_safetensors(os.path.join(folder, "model.safetensors"), entries, chunks)


def load(folder):
    """An exported folder -> DeepseekV3ForCausalLM in float32 holding the stored values exactly."""
    with open(os.path.join(folder, "config.json")) as f:
        c = DeepseekConfig.from_hf(json.load(f))
    model = DeepseekV3ForCausalLM(c)
    stored, _ = ds_io.load_float64(folder)
    L = c.num_layers
    for copy, main in ((f"model.layers.{L}.embed_tokens.weight", "model.embed_tokens.weight"),
                       (f"model.layers.{L}.shared_head.head.weight", "lm_head.weight")):
        if copy in stored and not torch.equal(stored[copy], stored[main]):
            raise ValueError(f"{folder}: {copy} differs from {main} (training shares them)")
    model.load_state_dict({k: v.float() for k, v in stored.items()}, strict=True)
    return model.eval()


def active_param_count(model):
    """Parameters read per token by the main model (routed experts counted top_k / n_expert), no MTP."""
    c, total = model.config, 0
    seen = set()
    for name, p in model.named_parameters():
        if name.startswith(f"model.layers.{c.num_layers}.") or id(p) in seen:
            continue
        seen.add(id(p))
        n = p.numel()
        total += n * c.num_experts_per_tok // c.n_routed_experts if ".mlp.experts." in name else n
    return total


__all__ = ["DeepseekConfig", "DeepseekV3ForCausalLM", "export", "load", "round_to_bf16_", "round_to_export_",
           "is_fp8_weight", "param_count",
           "active_param_count"]
