#!/usr/bin/python3
"""Which ggml type each tensor gets for an --outtype, as llama.cpp chooses it.

f32 / f16 / bf16 / q8_0 are what convert_hf_to_gguf.py writes itself: every 2-D and 3-D `.weight` in that
type (q8_0 falls back to F16 for rows that are not a multiple of 32).

q4_0 / q4_k_m / q5_k_m / q6_k are what llama-quantize makes of such a file (src/llama-quant.cpp,
llama_tensor_get_type_impl, no importance matrix), for the tensor kinds the llama and deepseek2
architectures have. Tensors are visited in llama-quantize's order (token_embd, output... first, then layer
by layer, names sorted within a layer), because two rules count tensors in that order:
  - output.weight, and token_embd.weight when there is no output.weight (tied): Q6_K (Q8_0 for Q8_0, and
    Q8_0 when the row is not a multiple of the mix's block).
  - attn_v (and attn_qkv / attn_kv_b): Q6_K in q4_k_m and q5_k_m when use_more_bits(i, n) for the i-th of n
    such tensors; Q8_0 for every mix when the model has exactly 8 experts (also attn_k).
  - ffn_down, ffn_down_exps, ffn_down_shexp: Q6_K in q4_k_m and q5_k_m when use_more_bits(layer, n_layer)
    (layer parsed from the name when the model has experts, else the running count).
  - attn_output: Q5_K in q4_k_m when the model has exactly 8 experts.
  - everything else: the mix's base type (Q4_0, Q4_K, Q5_K, Q6_K).
  use_more_bits(i, n) = i < n/8 or i >= 7n/8 or (i - n/8) % 3 == 2.
  Not reproduced: the 70B-only attn_v bump (a 70B model with 80 layers and GQA 8).

Always F32, in every outtype (both tools agree): 1-D tensors (norms, biases, exp_probs_b, rope_freqs), names
ending in _norm.weight, names not ending in .weight, and ffn_gate_inp.weight (the router).

Fallback for rows that do not fit the chosen block, as llama.cpp's tensor_type_fallback: Q4_K -> Q5_0,
Q5_K -> Q5_1, Q6_K -> Q8_0, a 32-value type stays; F16 when even that block does not divide the row (real
DeepSeek-V3 Q4_K_M files hold Q5_0 attn_k_b rows of 128).
"""
import re

OUTTYPES = {  # name -> (general.file_type, base ggml type, made by)
    "f32": (0, "F32", "convert"), "f16": (1, "F16", "convert"), "bf16": (32, "BF16", "convert"),
    "q8_0": (7, "Q8_0", "convert"), "q4_0": (2, "Q4_0", "quantize"), "q4_k_m": (15, "Q4_K", "quantize"),
    "q5_k_m": (17, "Q5_K", "quantize"), "q6_k": (18, "Q6_K", "quantize"),
}
BLOCK = {"F32": 1, "F16": 1, "BF16": 1, "Q8_0": 32, "Q4_0": 32, "Q5_0": 32, "Q5_1": 32, "Q4_K": 256, "Q5_K": 256,
         "Q6_K": 256}
FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}


def sort_key(name):
    """llama.cpp's weight_name_comparer: non-layer tensors first, then by layer, then by name."""
    m = re.match(r"blk\.(\d+)\.", name)
    return (int(m.group(1)) if m else -1, name)


def use_more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def category(name):
    """llama-quant.cpp's tensor_get_category."""
    if name == "output.weight":
        return "output"
    if name == "token_embd.weight":
        return "token_embd"
    for key, cat in (("attn_qkv.weight", "attn_v"), ("attn_kv_b.weight", "attn_v"), ("attn_v.weight", "attn_v"),
                     ("attn_k.weight", "attn_k"), ("attn_q.weight", "attn_q"),
                     ("attn_output.weight", "attn_output"), ("ffn_up", "ffn_up"), ("ffn_gate", "ffn_gate"),
                     ("ffn_down", "ffn_down")):
        if key in name:
            return cat
    return "other"


def always_f32(name, shape):
    return (len(shape) <= 1 or name.endswith("_norm.weight") or not name.endswith(".weight")
            or "ffn_gate_inp.weight" in name)


def fallback(type_name, row):
    if row % BLOCK[type_name] == 0:
        return type_name
    demoted = FALLBACK.get(type_name, type_name)
    return demoted if row % BLOCK[demoted] == 0 else "F16"


def choose_types(tensors, outtype, n_layer_all, n_expert):
    """tensors: [(gguf name, numpy shape)] in file order. Returns {name: ggml type name}."""
    _, base, made_by = OUTTYPES[outtype]
    names = [n for n, _ in tensors]
    tied = "output.weight" not in names
    n_attn_v = sum(1 for n in names if category(n) == "attn_v")
    i_attn_v = i_ffn_down = 0
    out = {}
    for name, shape in tensors:
        row = shape[-1] if shape else 1
        if always_f32(name, shape):
            out[name] = "F32"
            continue
        if made_by == "convert":
            out[name] = base if base != "Q8_0" else ("Q8_0" if row % 32 == 0 else "F16")
            continue
        cat = category(name)
        t = base
        if cat == "output" or (tied and cat == "token_embd"):
            if row % BLOCK[base]:
                t = "Q8_0"
            elif base != "Q8_0":
                t = "Q6_K"
        elif cat == "attn_v":
            if outtype in ("q4_k_m", "q5_k_m") and use_more_bits(i_attn_v, n_attn_v):
                t = "Q6_K"
            if n_expert == 8:
                t = "Q8_0"
            i_attn_v += 1
        elif cat == "attn_k":
            if n_expert == 8:
                t = "Q8_0"
        elif cat == "ffn_down":
            layer = i_ffn_down
            if n_expert > 1:
                layer = int(re.match(r"blk\.(\d+)\.", name).group(1))
            if outtype in ("q4_k_m", "q5_k_m") and use_more_bits(layer, n_layer_all):
                t = "Q6_K"
            i_ffn_down += 1
        elif cat == "attn_output":
            if n_expert == 8 and outtype == "q4_k_m":
                t = "Q5_K"
        out[name] = fallback(t, row)
    return out
