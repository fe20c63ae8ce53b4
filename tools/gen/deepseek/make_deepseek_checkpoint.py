#!/usr/bin/python3
"""Writes a random DeepSeek-V3 checkpoint in the exact published Hugging Face layout of
deepseek-ai/DeepSeek-V3 (DeepseekV3ForCausalLM, model_type deepseek_v3): config.json,
generation_config.json and safetensors weights (one file, or --shards N with model.safetensors.index.json),
tensors named and shaped as published, optionally FP8 like the published checkpoint. Deterministic from
--seed: every tensor has its own generator seeded by (seed, crc32(name)), so values do not depend on
sharding, dtype or which other tensors exist.

Tensors (L = num_hidden_layers; "FP8" marks the ones the published checkpoint stores as F8_E4M3 with a
F32 `<name>_scale_inv` [ceil(out/128), ceil(in/128)]; everything else BF16, the router bias F32):
  model.embed_tokens.weight [vocab, H]; model.norm.weight [H]; lm_head.weight [vocab, H] (never tied)
  model.layers.i.input_layernorm.weight, post_attention_layernorm.weight [H]
  self_attn.q_a_proj.weight [q_lora, H] FP8, q_a_layernorm.weight [q_lora], q_b_proj.weight
      [heads*(nope+rope), q_lora] FP8      -- or, with q_lora_rank null, q_proj.weight [heads*(nope+rope), H] FP8
  self_attn.kv_a_proj_with_mqa.weight [kv_lora+rope, H] FP8, kv_a_layernorm.weight [kv_lora],
      kv_b_proj.weight [heads*(nope+v), kv_lora] FP8, o_proj.weight [H, heads*v] FP8
  dense layers (i < first_k_dense_replace, or i % moe_layer_freq != 0):
      mlp.{gate,up}_proj.weight [inter, H] FP8, mlp.down_proj.weight [H, inter] FP8
  MoE layers: mlp.gate.weight [experts, H] (BF16), mlp.gate.e_score_correction_bias [experts] (F32),
      mlp.experts.E.{gate,up}_proj.weight [moe_inter, H] FP8, mlp.experts.E.down_proj.weight FP8,
      mlp.shared_experts.{gate,up}_proj.weight [moe_inter*n_shared, H] FP8, down_proj FP8
  MTP (num_nextn_predict_layers 1), model.layers.L.: embed_tokens.weight (a copy of the main embedding,
      as published), enorm.weight, hnorm.weight [H], eh_proj.weight [H, 2H] (BF16 in the published
      checkpoint), a full decoder layer's tensors (MoE or dense by the same rule), shared_head.norm.weight
      [H], shared_head.head.weight [vocab, H] (a copy of lm_head, as published)

FP8 (--fp8): each FP8 weight is drawn as a float matrix and block-quantised (tools/gen/deepseek/ds_io.py):
scale_inv = tile max|W| / 448 rounded up to 4 significant bits, codes = E4M3 round-to-nearest-even of
W / scale_inv. --dequantize writes the same model with those weights dequantised (code * scale_inv) and
stored in BF16, which is exact (4 + 4 significant bits): the "same model dequantised" twin.
Tensors over 1M elements (the preset) skip the per-tile max: codes come from N(0, 112^2) through a
float16 -> E4M3 table and scale_inv is std / 112 for every tile (same distribution, bounded memory).

Initialisation: matrices ~ N(0, (gain / sqrt(in))^2); router gate N(0, (gate_gain / sqrt(H))^2);
e_score_correction_bias ~ N(0, bias_std^2); embed_tokens and lm_head N(0, embed_std^2); norm weights
1 + N(0, norm_noise^2).

Examples:
  tools/gen/deepseek/make_deepseek_checkpoint.py --out /tmp/ds --seed 1                 # tiny, BF16, MTP
  tools/gen/deepseek/make_deepseek_checkpoint.py --out /tmp/ds8 --seed 1 --fp8
  tools/gen/deepseek/make_deepseek_checkpoint.py --out /tmp/lite --preset deepseek-v2-lite-like --shards 8
"""
import argparse
import json
import os
import sys
import time
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ds_io  # noqa: E402

CHUNK = 1 << 22  # elements generated at a time
TRANSFORMERS_VERSION = "4.46.3"  # as in deepseek-ai/DeepSeek-V3's config.json
FAST_FP8_MIN = 1 << 20  # FP8 weights above this many elements take the fast path (never the test cases)
FAST_FP8_STD = 112.0  # codes ~ N(0, 112^2) in the fast path: a quarter of the E4M3 range per std

PRESETS = {
    # DeepSeek-V2-Lite's shapes (15.7B parameters, 2.4B active; q_lora_rank null, 64 experts of 1408,
    # 2 shared, 6 per token, 27 layers, first dense) in the DeepSeek-V3 architecture and FP8 format: V3's
    # sigmoid/noaux_tc router with 8 groups (keep 4) and one MTP layer. About 16.5B parameters in all.
    "deepseek-v2-lite-like": dict(
        hidden_size=2048, intermediate_size=10944, moe_intermediate_size=1408, num_layers=27, num_heads=16,
        q_lora_rank=0, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
        n_routed_experts=64, n_shared_experts=2, num_experts_per_tok=6, n_group=8, topk_group=4,
        norm_topk_prob=True, routed_scaling_factor=1.0, first_k_dense_replace=1, moe_layer_freq=1,
        vocab_size=102400, rope_theta=10000.0, yarn=True, yarn_factor=40.0, yarn_mscale=0.707,
        yarn_mscale_all_dim=0.707, yarn_original_max_pos=4096, yarn_beta_fast=32.0, yarn_beta_slow=1.0,
        mtp=1, bos_token_id=100000, eos_token_id=100001, fp8=True, embed_std=0.02, init_gain=1.0,
        gate_gain=1.0, bias_std=0.01),
}
# Defaults without a preset: a tiny model keeping every mechanism (q_lora, YaRN, groups, shared expert,
# a dense first layer, MTP).
SMALL = dict(
    hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_layers=3, num_heads=4,
    q_lora_rank=48, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
    n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=4, topk_group=2,
    norm_topk_prob=True, routed_scaling_factor=2.5, first_k_dense_replace=1, moe_layer_freq=1,
    vocab_size=256, rope_theta=10000.0, yarn=True, yarn_factor=40.0, yarn_mscale=1.0, yarn_mscale_all_dim=1.0,
    yarn_original_max_pos=4096, yarn_beta_fast=32.0, yarn_beta_slow=1.0, mtp=1, bos_token_id=0,
    eos_token_id=1, fp8=False, embed_std=0.5, init_gain=2.0, gate_gain=4.0, bias_std=0.1)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output folder (created)")
    p.add_argument("--preset", choices=sorted(PRESETS), help="large shapes; other flags override it")
    p.add_argument("--seed", type=int, default=0)
    for flag in ("hidden-size", "intermediate-size", "moe-intermediate-size", "num-layers", "num-heads",
                 "kv-lora-rank", "qk-nope-head-dim", "qk-rope-head-dim", "v-head-dim", "n-routed-experts",
                 "n-shared-experts", "num-experts-per-tok", "n-group", "topk-group", "first-k-dense-replace",
                 "moe-layer-freq", "vocab-size", "yarn-original-max-pos", "mtp", "bos-token-id",
                 "eos-token-id", "max-position-embeddings"):
        p.add_argument("--" + flag, type=int)
    p.add_argument("--q-lora-rank", type=int, help="0 writes q_lora_rank null (a plain q_proj)")
    for flag in ("routed-scaling-factor", "rope-theta", "yarn-factor", "yarn-mscale", "yarn-mscale-all-dim",
                 "yarn-beta-fast", "yarn-beta-slow", "embed-std", "init-gain", "gate-gain", "bias-std"):
        p.add_argument("--" + flag, type=float)
    p.add_argument("--norm-topk-prob", dest="norm_topk_prob", action="store_true", default=None)
    p.add_argument("--no-norm-topk-prob", dest="norm_topk_prob", action="store_false")
    p.add_argument("--yarn", dest="yarn", action="store_true", default=None, help="rope_scaling type yarn")
    p.add_argument("--no-yarn", dest="yarn", action="store_false", help="rope_scaling: null")
    p.add_argument("--rope-interleave", choices=["true", "false"],
                   help="write rope_interleave (the published config has no such key: transformers' "
                        "default, true, applies)")
    p.add_argument("--fp8", dest="fp8", action="store_true", default=None, help="FP8 block weights")
    p.add_argument("--bf16", dest="fp8", action="store_false", help="all weights BF16 (router bias F32)")
    p.add_argument("--dequantize", action="store_true",
                   help="with --fp8: draw and quantise as FP8, store the dequantised weights in BF16 "
                        "(exact) and write no quantization_config: the FP8 model's twin")
    p.add_argument("--rms-norm-eps", type=float, default=1e-6)
    p.add_argument("--norm-noise", type=float, default=0.1, help="norm weights = 1 + N(0, noise^2)")
    p.add_argument("--shards", type=int, default=1)
    a = p.parse_args(argv)
    base = PRESETS[a.preset] if a.preset else SMALL
    for key, value in base.items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    if a.dequantize and not a.fp8:
        p.error("--dequantize needs --fp8")
    if a.n_routed_experts % a.n_group or a.n_routed_experts // a.n_group < 2:
        p.error("n_routed_experts must be a multiple of n_group with at least 2 experts per group")
    if not 1 <= a.topk_group <= a.n_group or a.num_experts_per_tok > a.topk_group * a.n_routed_experts // a.n_group:
        p.error("topk_group must be in 1..n_group and the kept groups must hold num_experts_per_tok experts")
    if a.qk_rope_head_dim % 2 or a.shards < 1 or a.mtp not in (0, 1):
        p.error("qk_rope_head_dim must be even, shards >= 1, mtp 0 or 1")
    if a.max_position_embeddings is None:
        # transformers' YaRN derives the factor from max_position_embeddings / original when both exist,
        # the DeepSeek code uses rope_scaling.factor: keep them consistent (163840 = 40 * 4096 as published).
        a.max_position_embeddings = int(a.yarn_factor * a.yarn_original_max_pos) if a.yarn else 4096
    return a


def is_moe_layer(a, i):
    """MoE layer rule of DeepSeek's modeling_deepseek.py (transformers' port ignores moe_layer_freq,
    which is 1 in every published V3 config)."""
    return a.n_routed_experts > 0 and i >= a.first_k_dense_replace and i % a.moe_layer_freq == 0


def make_config(a):
    """config.json with the keys of deepseek-ai/DeepSeek-V3's config.json, in its (alphabetical) order."""
    rope_scaling = None
    if a.yarn:
        rope_scaling = {"beta_fast": a.yarn_beta_fast, "beta_slow": a.yarn_beta_slow, "factor": a.yarn_factor,
                        "mscale": a.yarn_mscale, "mscale_all_dim": a.yarn_mscale_all_dim,
                        "original_max_position_embeddings": a.yarn_original_max_pos, "type": "yarn"}
    c = {
        "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config",
                     "AutoModel": "modeling_deepseek.DeepseekV3Model",
                     "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM"},
        "aux_loss_alpha": 0.001, "bos_token_id": a.bos_token_id, "eos_token_id": a.eos_token_id, "ep_size": 1,
        "first_k_dense_replace": a.first_k_dense_replace, "hidden_act": "silu", "hidden_size": a.hidden_size,
        "initializer_range": 0.02, "intermediate_size": a.intermediate_size, "kv_lora_rank": a.kv_lora_rank,
        "max_position_embeddings": a.max_position_embeddings, "model_type": "deepseek_v3",
        "moe_intermediate_size": a.moe_intermediate_size, "moe_layer_freq": a.moe_layer_freq,
        "n_group": a.n_group, "n_routed_experts": a.n_routed_experts, "n_shared_experts": a.n_shared_experts,
        "norm_topk_prob": a.norm_topk_prob, "num_attention_heads": a.num_heads,
        "num_experts_per_tok": a.num_experts_per_tok, "num_hidden_layers": a.num_layers,
        "num_key_value_heads": a.num_heads, "num_nextn_predict_layers": a.mtp, "pretraining_tp": 1,
        "q_lora_rank": a.q_lora_rank or None, "qk_nope_head_dim": a.qk_nope_head_dim,
        "qk_rope_head_dim": a.qk_rope_head_dim,
    }
    if a.fp8 and not a.dequantize:
        c["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                    "weight_block_size": [ds_io.BLOCK, ds_io.BLOCK]}
    c.update({"rms_norm_eps": a.rms_norm_eps})
    if a.rope_interleave is not None:
        c["rope_interleave"] = a.rope_interleave == "true"
    c.update({
        "rope_scaling": rope_scaling, "rope_theta": a.rope_theta,
        "routed_scaling_factor": a.routed_scaling_factor, "scoring_func": "sigmoid", "seq_aux": True,
        "tie_word_embeddings": False, "topk_group": a.topk_group, "topk_method": "noaux_tc",
        "torch_dtype": "bfloat16", "transformers_version": TRANSFORMERS_VERSION, "use_cache": True,
        "v_head_dim": a.v_head_dim, "vocab_size": a.vocab_size,
    })
    return c


class Spec:
    """One tensor: name, shape, kind ("fp8": a linear weight FP8 in the published checkpoint; "bf16";
    "bias": F32), std, mean, and the name whose generator draws it (copies share it)."""

    def __init__(self, name, shape, kind, std, mean=0.0, source=None):
        self.name, self.shape, self.kind, self.std, self.mean = name, tuple(shape), kind, std, mean
        self.source = source or name


def layer_specs(a, i):
    h, pre, g = a.hidden_size, f"model.layers.{i}.", a.init_gain
    qk = a.qk_nope_head_dim + a.qk_rope_head_dim

    def lin(name, out_f, in_f):
        return Spec(pre + name, (out_f, in_f), "fp8", g / in_f ** 0.5)

    def norm(name, n):
        return Spec(pre + name, (n,), "bf16", a.norm_noise, 1.0)

    specs = [norm("input_layernorm.weight", h)]
    if a.q_lora_rank:
        specs += [lin("self_attn.q_a_proj.weight", a.q_lora_rank, h),
                  norm("self_attn.q_a_layernorm.weight", a.q_lora_rank),
                  lin("self_attn.q_b_proj.weight", a.num_heads * qk, a.q_lora_rank)]
    else:
        specs.append(lin("self_attn.q_proj.weight", a.num_heads * qk, h))
    specs += [lin("self_attn.kv_a_proj_with_mqa.weight", a.kv_lora_rank + a.qk_rope_head_dim, h),
              norm("self_attn.kv_a_layernorm.weight", a.kv_lora_rank),
              lin("self_attn.kv_b_proj.weight", a.num_heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank),
              lin("self_attn.o_proj.weight", h, a.num_heads * a.v_head_dim),
              norm("post_attention_layernorm.weight", h)]
    if is_moe_layer(a, i):
        specs += [Spec(pre + "mlp.gate.weight", (a.n_routed_experts, h), "bf16", a.gate_gain / h ** 0.5),
                  Spec(pre + "mlp.gate.e_score_correction_bias", (a.n_routed_experts,), "bias", a.bias_std)]
        for e in range(a.n_routed_experts):
            m = a.moe_intermediate_size
            specs += [lin(f"mlp.experts.{e}.gate_proj.weight", m, h), lin(f"mlp.experts.{e}.up_proj.weight", m, h),
                      lin(f"mlp.experts.{e}.down_proj.weight", h, m)]
        if a.n_shared_experts:
            m = a.moe_intermediate_size * a.n_shared_experts
            specs += [lin("mlp.shared_experts.gate_proj.weight", m, h), lin("mlp.shared_experts.up_proj.weight", m, h),
                      lin("mlp.shared_experts.down_proj.weight", h, m)]
    else:
        m = a.intermediate_size
        specs += [lin("mlp.gate_proj.weight", m, h), lin("mlp.up_proj.weight", m, h), lin("mlp.down_proj.weight", h, m)]
    return specs


def tensor_specs(a):
    """[Spec] in model order: embedding, layers, final norm, lm_head, then the MTP layer."""
    h = a.hidden_size
    specs = [Spec("model.embed_tokens.weight", (a.vocab_size, h), "bf16", a.embed_std)]
    for i in range(a.num_layers):
        specs += layer_specs(a, i)
    specs += [Spec("model.norm.weight", (h,), "bf16", a.norm_noise, 1.0),
              Spec("lm_head.weight", (a.vocab_size, h), "bf16", a.embed_std)]
    if a.mtp:
        pre = f"model.layers.{a.num_layers}."
        specs += [Spec(pre + "embed_tokens.weight", (a.vocab_size, h), "bf16", a.embed_std,
                       source="model.embed_tokens.weight"),
                  Spec(pre + "enorm.weight", (h,), "bf16", a.norm_noise, 1.0),
                  Spec(pre + "hnorm.weight", (h,), "bf16", a.norm_noise, 1.0),
                  Spec(pre + "eh_proj.weight", (h, 2 * h), "bf16", a.init_gain / (2 * h) ** 0.5)]
        specs += layer_specs(a, a.num_layers)
        specs += [Spec(pre + "shared_head.norm.weight", (h,), "bf16", a.norm_noise, 1.0),
                  Spec(pre + "shared_head.head.weight", (a.vocab_size, h), "bf16", a.embed_std,
                       source="lm_head.weight")]
    return specs


def _rng(seed, name):
    return np.random.Generator(np.random.PCG64([seed, zlib.crc32(name.encode())]))


def float_chunks(seed, spec):
    """The tensor's float32 values, flat, CHUNK elements at a time, from its own generator."""
    rng = _rng(seed, spec.source)
    remaining = int(np.prod(spec.shape, dtype=np.int64))
    while remaining:
        n = min(remaining, CHUNK)
        values = rng.standard_normal(n, dtype=np.float32)
        values *= np.float32(spec.std)
        values += np.float32(spec.mean)
        yield values
        remaining -= n


_F16_TO_E4M3 = None


def _fast_codes(values):
    """N(0, 112^2)-scaled float32 -> E4M3 codes through a float16-bits table (the preset's fast path)."""
    global _F16_TO_E4M3
    if _F16_TO_E4M3 is None:
        f16 = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
        f16 = np.where(np.isfinite(f16), f16, np.sign(np.nan_to_num(f16, nan=1.0)) * 1e9)
        _F16_TO_E4M3 = ds_io.encode_e4m3(f16)
    return _F16_TO_E4M3[np.clip(values, -60000, 60000).astype(np.float16).view(np.uint16)]


class Writer:
    """Produces each stored tensor's bits; FP8 weights are quantised once and their scale kept."""

    def __init__(self, a, specs):
        self.a = a
        self.by_name = {s.name: s for s in specs}
        self.scales = {}

    def stored(self, spec):
        """[(stored name, safetensors dtype, shape)] for one Spec."""
        a = self.a
        if spec.kind == "bias":
            return [(spec.name, "F32", spec.shape)]
        if spec.kind == "fp8" and a.fp8 and not a.dequantize:
            grid = tuple(-(-d // ds_io.BLOCK) for d in spec.shape)
            return [(spec.name, "F8_E4M3", spec.shape), (spec.name + "_scale_inv", "F32", grid)]
        return [(spec.name, "BF16", spec.shape)]

    def _fast(self, spec):
        return int(np.prod(spec.shape)) > FAST_FP8_MIN

    def chunks(self, name):
        a = self.a
        if name.endswith("_scale_inv"):
            spec = self.by_name[name[:-len("_scale_inv")]]
            if self._fast(spec):
                grid = tuple(-(-d // ds_io.BLOCK) for d in spec.shape)
                yield np.full(int(np.prod(grid)), spec.std / FAST_FP8_STD, dtype=np.float32)
            else:
                yield self._quantized(spec)[1].reshape(-1)
            return
        spec = self.by_name[name]
        if spec.kind == "bias":
            yield from float_chunks(a.seed, spec)
        elif spec.kind == "fp8" and a.fp8:
            if self._fast(spec):
                if a.dequantize:
                    raise SystemExit(f"--dequantize of {name}: too large (tensors up to {FAST_FP8_MIN} elements)")
                for values in float_chunks(a.seed, spec):
                    yield _fast_codes(values * np.float32(FAST_FP8_STD / spec.std))
                return
            codes, scale = self._quantized(spec)
            if a.dequantize:
                yield ds_io.float_to_bf16_bits(ds_io.dequantize_blocks(codes, scale).reshape(-1))
            else:
                yield codes.reshape(-1)
        else:
            for values in float_chunks(a.seed, spec):
                yield ds_io.float_to_bf16_bits(values)

    def _quantized(self, spec):
        if spec.name not in self.scales:
            w = np.concatenate(list(float_chunks(self.a.seed, spec))).reshape(spec.shape)
            self.scales[spec.name] = ds_io.quantize_blocks(w)
        return self.scales[spec.name]


def assign_shards(entries, n_shards):
    """Splits the stored tensors, in model order, into n_shards runs of about equal bytes; within a file
    tensors are sorted by name (as the safetensors library writes). A weight and its scale stay together."""
    size = {e[0]: int(np.prod(e[2], dtype=np.int64)) * ds_io.ST_DTYPES[e[1]][1] for e in entries}
    total, shards, done, k = sum(size.values()), [[] for _ in range(n_shards)], 0, 0
    for e in entries:
        if not e[0].endswith("_scale_inv"):
            k = min(n_shards - 1, done * n_shards // total)
        shards[k].append(e)
        done += size[e[0]]
    if any(not s for s in shards):
        raise SystemExit(f"cannot split {len(entries)} tensors into {n_shards} non-empty shards")
    return [sorted(s, key=lambda e: e[0]) for s in shards]


def write_weights(a, specs):
    writer = Writer(a, specs)
    entries = [e for s in specs for e in writer.stored(s)]
    shards = assign_shards(entries, a.shards)
    names = ["model.safetensors"] if a.shards == 1 else [
        f"model-{k + 1:05d}-of-{a.shards:05d}.safetensors" for k in range(a.shards)]
    weight_map = {}
    for file_name, shard in zip(names, shards):
        ds_io.write_safetensors(os.path.join(a.out, file_name), shard, writer.chunks)
        weight_map.update({e[0]: file_name for e in shard})
        writer.scales.clear()
    total = sum(int(np.prod(e[2], dtype=np.int64)) * ds_io.ST_DTYPES[e[1]][1] for e in entries)
    if a.shards > 1:
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)
            f.write("\n")
    return entries, total


def count_params(a, specs):
    """(all parameters, parameters read per token) excluding the MTP layer, as the DeepSeek figures count."""
    total = active = 0
    for s in specs:
        if s.name.startswith(f"model.layers.{a.num_layers}."):
            continue
        n = int(np.prod(s.shape))
        total += n
        if ".mlp.experts." in s.name:
            n = n * a.num_experts_per_tok // a.n_routed_experts
        active += n
    return total, active


def main(argv):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    config = make_config(a)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    generation = {"_from_model_config": True, "bos_token_id": a.bos_token_id, "do_sample": True,
                  "eos_token_id": a.eos_token_id, "temperature": 0.6, "top_p": 0.95,
                  "transformers_version": TRANSFORMERS_VERSION}
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump(generation, f, indent=2)
        f.write("\n")
    start = time.time()
    specs = tensor_specs(a)
    entries, total = write_weights(a, specs)
    params, active = count_params(a, specs)
    kind = "FP8" if a.fp8 and not a.dequantize else "BF16"
    print(f"{a.out}: {len(entries)} tensors, {total / 1e9:.3f} GB ({kind}) in {a.shards} file(s), "
          f"{params / 1e9:.3f}B parameters ({active / 1e9:.3f}B active) without MTP, "
          f"{time.time() - start:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
