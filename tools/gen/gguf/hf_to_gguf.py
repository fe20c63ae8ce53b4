#!/usr/bin/python3
"""Converts a Hugging Face checkpoint folder (LlamaForCausalLM or DeepseekV3ForCausalLM) to GGUF the way
llama.cpp's convert_hf_to_gguf.py does (architectures "llama" and "deepseek2"), optionally followed by what
llama-quantize does for Q4_0 / Q4_K_M / Q5_K_M / Q6_K: numpy only, an independent implementation.

  tools/gen/gguf/hf_to_gguf.py MODEL_DIR --outfile OUT.gguf [--outtype f32|f16|bf16|q8_0|q4_0|q4_k_m|q5_k_m|q6_k]
      [--tokenizer PATH] [--pre llama-bpe|deepseek-v3] [--split-max-tensors N] [--vocab-only] [--mtp]

Weights: model.safetensors or shards (BF16, F16, F32; DeepSeek-V3's F8_E4M3 + weight_scale_inv tiles are
dequantised). Tensor order: llama-quantize's (non-layer tensors by name, then layer by layer, names sorted).

Llama (LlamaModel in convert_hf_to_gguf.py):
  - q_proj and k_proj rows (and biases) are permuted from Hugging Face's rotate-half RoPE layout to ggml's
    adjacent-pair layout: w.reshape(n_head, 2, head_dim / 2, n_in).swapaxes(1, 2).reshape(w.shape), with
    n_head_kv heads for k_proj. Row h*head_dim + 2i + j of the GGUF is HF row h*head_dim + j*head_dim/2 + i.
  - rope_scaling.rope_type "llama3" becomes the F32 tensor rope_freqs.weight [head_dim / 2]: per frequency
    1 (wavelength < original_max_position_embeddings / high_freq_factor), factor (wavelength >
    original / low_freq_factor), else 1 / ((1 - s) / factor + s) with s = (original / wavelength - low) /
    (high - low); wavelength = 2 pi / freq, freq_i = rope_theta ** -(2i / head_dim), in float32 (llama.cpp
    divides each frequency by this factor). No rope.scaling.* key is written for llama3.
  - attention.key_length / value_length are written when config.json has head_dim (as the converter does).
  - output.weight is left out when tie_word_embeddings is true.
DeepSeek-V3 (DeepseekV2Model, arch "deepseek2"):
  - MLA written as current llama.cpp converts it: kv_b_proj is split per head into attn_k_b [n_head,
    kv_lora_rank, qk_nope] (the k part transposed) and attn_v_b [n_head, v_head_dim, kv_lora_rank], numpy
    order; no attn_kv_b. head_count_kv = 1, key_length = kv_lora_rank + qk_rope, value_length =
    kv_lora_rank (the latent MQA view), key_length_mla = qk_nope + qk_rope, value_length_mla = v_head_dim.
  - Routed experts stacked: ffn_{gate,up,down}_exps [n_expert, n_ff, n_embd] / [n_expert, n_embd, n_ff].
  - The MTP layer (model.layers.<num_hidden_layers>) is skipped, as llama.cpp's converter does
    (skip_mtp = True). --mtp keeps it the way llama.cpp's GLM-4.5 converter writes NextN layers (and the
    deepseek2 loader reads them): block_count = num_hidden_layers + 1, nextn_predict_layers = 1, its
    attention/MoE as blk.<L>.*, and blk.<L>.nextn.{eh_proj,enorm,hnorm,embed_tokens,shared_head_head,
    shared_head_norm}.
  - attention.q_lora_rank is 0 without q LoRA (q_proj): the converter omits the key, which llama.cpp's
    loader only accepts for DeepSeek-V2-Lite's layer counts.
  - RoPE rows are not permuted (DeepSeek-V3's default rope_interleave=true already pairs adjacent rows);
    with rope_interleave: false the q and kv_a rope rows are permuted like Llama's (llama.cpp ignores the
    flag). moe_layer_freq != 1 is refused: deepseek2 has no key for it.
Tokenizer: see hf_tokenizer.py. Without tokenizer files and without --tokenizer, a minimal byte-level
vocabulary of vocab_size tokens (hf_tokenizer.minimal_byte_vocab). Tensor types per --outtype: quant_mix.py;
rows that do not fit a block type fall back to Q8_0 (row a multiple of 32) or F16.
"""
import argparse
import math
import os
import re
import sys
import textwrap
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ggml_quantize  # noqa: E402
import hf_tokenizer  # noqa: E402
import quant_mix  # noqa: E402
from gguf_file import BOOL, F32, STRING, U32, GGUFWriter  # noqa: E402
from hf_checkpoint import Checkpoint  # noqa: E402

GGML_QUANT_VERSION = 2


def permute_rotate_half(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute: HF rotate-half rows -> ggml adjacent pairs, per head."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute_rotate_half(w, n_head):
    """The inverse of permute_rotate_half (GGUF rows -> Hugging Face rows)."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(config):
    """LlamaModel.generate_extra_tensors: float32 [head_dim / 2]."""
    rope = config["rope_scaling"]
    f = np.float32
    base = config.get("rope_theta", 10000.0)
    dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    freqs = (f(1) / (f(base) ** (np.arange(0, dim, 2, dtype=f) / f(dim)))).astype(f)
    factor = rope.get("factor", 8.0)
    low, high = rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0)
    old = rope.get("original_max_position_embeddings", 8192)
    low_wavelen, high_wavelen = old / low, old / high
    out = []
    for freq in freqs:
        wavelen = f(2 * math.pi) / freq
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (f(old) / wavelen - f(low)) / f(high - low)
            out.append(f(1) / ((f(1) - smooth) / f(factor) + smooth))
    return np.array(out, dtype=f)


class Plan:
    """Metadata [(key, vtype, value)] and tensors [(gguf name, numpy shape, loader -> float32)]."""

    def __init__(self):
        self.keys, self.tensors = [], []

    def key(self, key, vtype, value):
        self.keys.append((key, vtype, value))

    def tensor(self, name, shape, loader):
        self.tensors.append((name, tuple(shape), loader))


def base_parameters(plan, arch, config, block_count, ftype, head_count_kv):
    """TextModel.set_gguf_parameters (the keys both architectures share), in its order."""
    a = arch
    plan.key(f"{a}.block_count", U32, block_count)
    if config.get("max_position_embeddings") is not None:
        plan.key(f"{a}.context_length", U32, config["max_position_embeddings"])
    plan.key(f"{a}.embedding_length", U32, config["hidden_size"])
    if config.get("intermediate_size") is not None:
        plan.key(f"{a}.feed_forward_length", U32, config["intermediate_size"])
    plan.key(f"{a}.attention.head_count", U32, config["num_attention_heads"])
    plan.key(f"{a}.attention.head_count_kv", U32, head_count_kv)
    rope = dict(config.get("rope_scaling") or {})
    rope_type = rope.get("rope_type", rope.get("type"))
    if rope_type == "linear" and rope.get("factor") is not None:
        plan.key(f"{a}.rope.scaling.type", STRING, "linear")
        plan.key(f"{a}.rope.scaling.factor", F32, rope["factor"])
    elif rope_type == "yarn" and rope.get("factor") is not None:
        plan.key(f"{a}.rope.scaling.type", STRING, "yarn")
        plan.key(f"{a}.rope.scaling.factor", F32, rope["factor"])
        plan.key(f"{a}.rope.scaling.original_context_length", U32, rope["original_max_position_embeddings"])
        for hf_key, suffix in (("extrapolation_factor", "yarn_ext_factor"), ("attention_factor", "yarn_attn_factor"),
                               ("attn_factor", "yarn_attn_factor"), ("beta_fast", "yarn_beta_fast"),
                               ("beta_slow", "yarn_beta_slow")):
            if rope.get(hf_key) is not None:
                plan.key(f"{a}.rope.scaling.{suffix}", F32, rope[hf_key])
    elif rope_type not in (None, "default", "llama3"):
        raise SystemExit(f"rope_scaling type {rope_type!r} is not converted here")
    if config.get("rope_theta") is not None:
        plan.key(f"{a}.rope.freq_base", F32, config["rope_theta"])
    plan.key(f"{a}.attention.layer_norm_rms_epsilon", F32, config.get("rms_norm_eps", 1e-6))
    if config.get("n_routed_experts") is not None:
        plan.key(f"{a}.expert_count", U32, config["n_routed_experts"])
    if config.get("num_experts_per_tok") is not None:
        plan.key(f"{a}.expert_used_count", U32, config["num_experts_per_tok"])
    if config.get("n_group") is not None:
        plan.key(f"{a}.expert_group_count", U32, config["n_group"])
    if config.get("topk_group") is not None:
        plan.key(f"{a}.expert_group_used_count", U32, config["topk_group"])
    if config.get("scoring_func") is not None:
        gating = {"softmax": 1, "sigmoid": 2}.get(config["scoring_func"])
        if gating is None:
            raise SystemExit(f"scoring_func {config['scoring_func']!r} is not converted here")
        plan.key(f"{a}.expert_gating_func", U32, gating)
    if config.get("head_dim") is not None:
        plan.key(f"{a}.attention.key_length", U32, config["head_dim"])
        plan.key(f"{a}.attention.value_length", U32, config["head_dim"])
    plan.key("general.file_type", U32, ftype)


# ---------------------------------------------------------------------------------------------------------
# Llama
# ---------------------------------------------------------------------------------------------------------

LLAMA_LAYER_NAMES = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}


def plan_llama(ckpt, ftype):
    config = ckpt.config
    n_head = config["num_attention_heads"]
    n_head_kv = config.get("num_key_value_heads", n_head)
    plan = Plan()
    base_parameters(plan, "llama", config, config["num_hidden_layers"], ftype, n_head_kv)
    plan.key("llama.vocab_size", U32, config["vocab_size"])
    head_dim = config.get("head_dim") or config["hidden_size"] // n_head
    plan.key("llama.rope.dimension_count", U32, head_dim)
    rope = config.get("rope_scaling") or {}
    if rope.get("rope_type", rope.get("type")) == "llama3":
        factors = llama3_rope_factors(config)
        plan.tensor("rope_freqs.weight", factors.shape, lambda: factors)
    tied = bool(config.get("tie_word_embeddings", False))
    for hf in ckpt.names():
        if hf.endswith("rotary_emb.inv_freq"):
            continue
        load = (lambda n: lambda: ckpt.get(n))(hf)
        shape = ckpt.shape(hf)
        if hf == "model.embed_tokens.weight":
            plan.tensor("token_embd.weight", shape, load)
        elif hf == "model.norm.weight":
            plan.tensor("output_norm.weight", shape, load)
        elif hf == "lm_head.weight":
            if not tied:
                plan.tensor("output.weight", shape, load)
        else:
            m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)\.(weight|bias)", hf)
            if not m or m.group(2) not in LLAMA_LAYER_NAMES:
                raise SystemExit(f"cannot map tensor {hf}")
            layer, part, kind = m.groups()
            name = f"blk.{layer}.{LLAMA_LAYER_NAMES[part]}.{kind}"
            if part in ("self_attn.q_proj", "self_attn.k_proj"):
                heads = n_head if part == "self_attn.q_proj" else n_head_kv
                load = (lambda n, h: lambda: permute_rotate_half(ckpt.get(n), h))(hf, heads)
            plan.tensor(name, shape, load)
    return plan


# ---------------------------------------------------------------------------------------------------------
# DeepSeek-V3
# ---------------------------------------------------------------------------------------------------------

DEEPSEEK_LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_a_proj.weight": "attn_q_a.weight",
    "self_attn.q_a_layernorm.weight": "attn_q_a_norm.weight", "self_attn.q_b_proj.weight": "attn_q_b.weight",
    "self_attn.kv_a_proj_with_mqa.weight": "attn_kv_a_mqa.weight",
    "self_attn.kv_a_layernorm.weight": "attn_kv_a_norm.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight", "mlp.gate.weight": "ffn_gate_inp.weight",
    "mlp.gate.e_score_correction_bias": "exp_probs_b.bias",
    "mlp.shared_experts.gate_proj.weight": "ffn_gate_shexp.weight",
    "mlp.shared_experts.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_experts.down_proj.weight": "ffn_down_shexp.weight",
}
DEEPSEEK_MTP_NAMES = {
    "eh_proj.weight": "nextn.eh_proj.weight", "enorm.weight": "nextn.enorm.weight",
    "hnorm.weight": "nextn.hnorm.weight", "embed_tokens.weight": "nextn.embed_tokens.weight",
    "shared_head.head.weight": "nextn.shared_head_head.weight",
    "shared_head.norm.weight": "nextn.shared_head_norm.weight",
}


def deepseek_parameters(plan, config, ftype, block_count, mtp):
    base_parameters(plan, "deepseek2", config, block_count, ftype, head_count_kv=1)
    a = "deepseek2"
    has_moe = config.get("n_routed_experts") is not None
    first_dense = config.get("first_k_dense_replace")
    if first_dense is None:
        first_dense = config["num_hidden_layers"] if not has_moe else 0
    plan.key(f"{a}.leading_dense_block_count", U32, first_dense)
    kv_lora = config.get("kv_lora_rank", 512)
    plan.key(f"{a}.vocab_size", U32, config["vocab_size"])
    # Without q LoRA (q_lora_rank null) the converter writes no key, and llama.cpp's loader then accepts the
    # file only for DeepSeek-V2-Lite's layer counts; 0 loads everywhere (the loader tests q_lora_rank > 0).
    plan.key(f"{a}.attention.q_lora_rank", U32, config.get("q_lora_rank") or 0)
    plan.key(f"{a}.attention.kv_lora_rank", U32, kv_lora)
    plan.key(f"{a}.attention.key_length", U32, kv_lora + config["qk_rope_head_dim"])
    plan.key(f"{a}.attention.value_length", U32, kv_lora)
    plan.key(f"{a}.attention.key_length_mla", U32, config["qk_nope_head_dim"] + config["qk_rope_head_dim"])
    plan.key(f"{a}.attention.value_length_mla", U32, config["v_head_dim"])
    plan.key(f"{a}.expert_feed_forward_length", U32, config.get("moe_intermediate_size", config["intermediate_size"]))
    if has_moe:
        plan.key(f"{a}.expert_count", U32, config["n_routed_experts"])
    plan.key(f"{a}.expert_shared_count", U32, config.get("n_shared_experts", 0))
    if config.get("routed_scaling_factor") is not None:
        plan.key(f"{a}.expert_weights_scale", F32, config["routed_scaling_factor"])
    if config.get("norm_topk_prob"):
        plan.key(f"{a}.expert_weights_norm", BOOL, True)
    plan.key(f"{a}.rope.dimension_count", U32, config["qk_rope_head_dim"])
    rope = config.get("rope_scaling") or {}
    if rope.get("mscale_all_dim") is not None:
        # llama.cpp stores 0.1 * mscale_all_dim here for deepseek2 and divides by 0.1 when loading.
        plan.key(f"{a}.rope.scaling.yarn_log_multiplier", F32, 0.1 * rope["mscale_all_dim"])
    if mtp:
        plan.key(f"{a}.nextn_predict_layers", U32, config.get("num_nextn_predict_layers", 1))


def _rope_rows_to_pairs(w, block, rope):
    """Rows [n_blocks * block, ...] whose last `rope` rows per block are rotate-half -> adjacent pairs."""
    v = w.reshape(-1, block, *w.shape[1:]).copy()
    v[:, block - rope:] = permute_rotate_half(v[:, block - rope:].reshape(-1, *w.shape[1:]),
                                              v.shape[0]).reshape(v[:, block - rope:].shape)
    return v.reshape(w.shape)


def plan_deepseek(ckpt, ftype, mtp):
    config = ckpt.config
    n_layer = config["num_hidden_layers"]
    if config.get("moe_layer_freq", 1) != 1:
        raise SystemExit("moe_layer_freq != 1: llama.cpp's deepseek2 has no key for it (every layer after "
                         "leading_dense_block_count is MoE)")
    n_mtp = config.get("num_nextn_predict_layers", 0) if mtp else 0
    plan = Plan()
    deepseek_parameters(plan, config, ftype, n_layer + n_mtp, mtp and n_mtp > 0)
    n_head = config["num_attention_heads"]
    nope, rope, v_dim = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
    kv_lora = config.get("kv_lora_rank", 512)
    interleaved = config.get("rope_interleave", True)
    tied = bool(config.get("tie_word_embeddings", False))
    experts = {}  # (layer, proj) -> {expert: hf name}
    for hf in ckpt.names():
        load = (lambda n: lambda: ckpt.get(n))(hf)
        shape = ckpt.shape(hf)
        if hf == "model.embed_tokens.weight":
            plan.tensor("token_embd.weight", shape, load)
            continue
        if hf == "model.norm.weight":
            plan.tensor("output_norm.weight", shape, load)
            continue
        if hf == "lm_head.weight":
            if not tied:
                plan.tensor("output.weight", shape, load)
            continue
        m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", hf)
        if not m:
            raise SystemExit(f"cannot map tensor {hf}")
        layer, part = int(m.group(1)), m.group(2)
        if layer >= n_layer + n_mtp:
            continue  # the MTP layer without --mtp (llama.cpp's skip_mtp)
        e = re.fullmatch(r"mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight", part)
        if e:
            experts.setdefault((layer, e.group(2)), {})[int(e.group(1))] = hf
            continue
        prefix = f"blk.{layer}."
        if layer >= n_layer and part in DEEPSEEK_MTP_NAMES:
            plan.tensor(prefix + DEEPSEEK_MTP_NAMES[part], shape, load)
        elif part == "self_attn.kv_b_proj.weight":
            plan_kv_b(plan, prefix, ckpt, hf, n_head, nope, v_dim, kv_lora)
        elif part in DEEPSEEK_LAYER_NAMES:
            if not interleaved and part in ("self_attn.q_proj.weight", "self_attn.q_b_proj.weight"):
                load = (lambda n: lambda: _rope_rows_to_pairs(ckpt.get(n), nope + rope, rope))(hf)
            elif not interleaved and part == "self_attn.kv_a_proj_with_mqa.weight":
                load = (lambda n: lambda: _rope_rows_to_pairs(ckpt.get(n), kv_lora + rope, rope))(hf)
            plan.tensor(prefix + DEEPSEEK_LAYER_NAMES[part], shape, load)
        else:
            raise SystemExit(f"cannot map tensor {hf}")
    n_expert = config.get("n_routed_experts", 0)
    for (layer, proj), by_expert in sorted(experts.items()):
        if sorted(by_expert) != list(range(n_expert)):
            raise SystemExit(f"layer {layer} {proj}_proj: experts {sorted(by_expert)} of {n_expert}")
        names = [by_expert[i] for i in range(n_expert)]
        shape = (n_expert,) + ckpt.shape(names[0])
        load = (lambda ns: lambda: np.stack([ckpt.get(n) for n in ns]))(names)
        plan.tensor(f"blk.{layer}.ffn_{proj}_exps.weight", shape, load)
    return plan


def plan_kv_b(plan, prefix, ckpt, hf, n_head, nope, v_dim, kv_lora):
    """kv_b_proj [n_head * (nope + v), kv_lora] -> attn_k_b [n_head, kv_lora, nope], attn_v_b [n_head, v, kv_lora]."""
    if ckpt.shape(hf) != (n_head * (nope + v_dim), kv_lora):
        raise SystemExit(f"{hf}: shape {ckpt.shape(hf)}, expected {(n_head * (nope + v_dim), kv_lora)}")

    def k_b():
        return np.ascontiguousarray(ckpt.get(hf).reshape(n_head, nope + v_dim, kv_lora)[:, :nope].transpose(0, 2, 1))

    def v_b():
        return np.ascontiguousarray(ckpt.get(hf).reshape(n_head, nope + v_dim, kv_lora)[:, nope:])

    plan.tensor(prefix + "attn_k_b.weight", (n_head, kv_lora, nope), k_b)
    plan.tensor(prefix + "attn_v_b.weight", (n_head, v_dim, kv_lora), v_b)


# ---------------------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------------------

def tokenizer_keys(args, ckpt, arch):
    config = ckpt.config
    default_pre = "llama-bpe" if arch == "llama" else "deepseek-v3"
    source = args.tokenizer
    if source is None and os.path.exists(os.path.join(args.model, "tokenizer.json")):
        source = args.model
    if source is None:
        return hf_tokenizer.minimal_byte_vocab(config, config["vocab_size"], args.pre or default_pre)
    tok, tok_config, folder = hf_tokenizer.load_tokenizer(source)
    return hf_tokenizer.tokenizer_keys(tok, tok_config, folder, config, config["vocab_size"], args.pre)


def build_writer(args):
    ckpt = Checkpoint(args.model)
    archs = ckpt.config.get("architectures") or []
    ftype = quant_mix.OUTTYPES[args.outtype][0]
    if "LlamaForCausalLM" in archs:
        arch, plan = "llama", plan_llama(ckpt, ftype)
    elif "DeepseekV3ForCausalLM" in archs:
        arch, plan = "deepseek2", plan_deepseek(ckpt, ftype, args.mtp)
    else:
        raise SystemExit(f"architectures {archs}: only LlamaForCausalLM and DeepseekV3ForCausalLM are converted")
    writer = GGUFWriter()
    writer.add_string("general.architecture", arch)
    writer.add_string("general.type", "model")
    writer.add_string("general.name", os.path.basename(os.path.normpath(args.model)))
    for key, vtype, value in plan.keys:
        writer.add(key, vtype, value)
    writer.add("general.quantization_version", U32, GGML_QUANT_VERSION)
    for key, vtype, value in tokenizer_keys(args, ckpt, arch):
        writer.add(key, vtype, value)
    if quant_mix.OUTTYPES[args.outtype][2] == "quantize":
        # llama-quantize re-sets these two keys, which gguf moves to the end of the metadata.
        for key in ("general.quantization_version", "general.file_type"):
            vtype, value = writer.kv.pop(key)
            writer.add(key, vtype, value)
    if args.vocab_only:
        return writer, {}
    tensors = sorted(plan.tensors, key=lambda t: quant_mix.sort_key(t[0]))
    n_expert = ckpt.config.get("n_routed_experts") or 0
    block_count = writer.kv[f"{arch}.block_count"][1]
    types = quant_mix.choose_types([(n, s) for n, s, _ in tensors], args.outtype, block_count, n_expert)
    for name, shape, load in tensors:
        writer.add_tensor(name, shape, types[name],
                          (lambda ld, t: lambda: ggml_quantize.quantize(t, ld()))(load, types[name]))
    return writer, types


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=textwrap.fill("Types: f32/f16/bf16/q8_0 as convert_hf_to_gguf.py writes them; q4_0/q4_k_m/q5_k_m/q6_k as "
               "llama-quantize would then make them (per-tensor mix: quant_mix.py). 1-D tensors, norms, "
               "biases and the MoE router stay F32. A tensor whose row length is not a multiple of its "
               "type's block (256 for the K types, 32 for Q4_0/Q8_0) falls back as llama-quantize does: Q4_K to "
               "Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, and to F16 when the row is not a multiple of 32. "
               "Without tokenizer files (and no --tokenizer) a minimal byte-level vocabulary of vocab_size "
               "tokens is written: config's bos/eos/pad ids as control tokens, bytes on the other ids, no "
               "merges (see hf_tokenizer.minimal_byte_vocab).", width=110),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="Hugging Face checkpoint folder (config.json + safetensors)")
    p.add_argument("--outfile", required=True, help="output .gguf (with --split-max-tensors: shards named "
                   "STEM-00001-of-0000N.gguf beside it)")
    p.add_argument("--outtype", default="f16", choices=sorted(quant_mix.OUTTYPES))
    p.add_argument("--tokenizer", help="tokenizer.json, or a folder with tokenizer.json (+ tokenizer_config.json)"
                   "; default: the model folder's, else a minimal byte-level vocabulary")
    p.add_argument("--pre", choices=sorted(hf_tokenizer.KNOWN_PRE), help="tokenizer.ggml.pre (default: "
                   "recognised from tokenizer.json; llama-bpe / deepseek-v3 for the minimal vocabulary)")
    p.add_argument("--split-max-tensors", type=int, default=0, help="write shards of at most N tensors")
    p.add_argument("--vocab-only", action="store_true", help="metadata and tokenizer only, no tensors")
    p.add_argument("--mtp", action="store_true", help="DeepSeek-V3: keep the MTP layer (llama.cpp's "
                   "converter drops it)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    start = time.time()
    writer, types = build_writer(args)
    if args.split_max_tensors > 0:
        prefix = args.outfile[:-5] if args.outfile.endswith(".gguf") else args.outfile
        paths = writer.write_split(prefix, args.split_max_tensors)
    else:
        paths = writer.write(args.outfile)
    if not args.quiet:
        counts = {}
        for t in types.values():
            counts[t] = counts.get(t, 0) + 1
        sizes = sum(os.path.getsize(path) for path in paths)
        print(f"{', '.join(paths)}: {len(writer.kv)} keys, {len(writer.tensors)} tensors "
              f"({', '.join(f'{n} {t}' for t, n in sorted(counts.items()))}), {sizes} bytes, "
              f"{time.time() - start:.1f} s")
    return paths


if __name__ == "__main__":
    main()
