#!/usr/bin/python3
"""Writes a 4-bit copy of a BF16 DeepSeek-V3 checkpoint in a published W4A16 layout, with numpy as the
quantiser (round to nearest per group, not GPTQ's or AWQ's search: the layout is what is tested), and the
reference logits for it from deepseek_ref.py in float64 on the dequantised weights w = (q - zero) * scale
(scales as stored).

Quantised, as the published DeepSeek-V3/R1 AWQ checkpoints do (AutoAWQ quantises every nn.Linear of a
decoder layer): every `*_proj.weight` and `*_proj_with_mqa.weight`, i.e. q_a / q_b (or q), kv_a_proj_with_mqa,
kv_b, o, the dense MLP, every routed and shared expert, and the MTP layer's eh_proj and block. As stored: the
router `mlp.gate` (a Parameter, not a Linear), embeddings, norms, lm_head and the MTP layer's shared_head
(compressed-tensors: "ignore": ["lm_head", "re:.*mlp\\.gate$", "re:.*shared_head\\.head$"]).

Quantiser, per output channel and group of inputs (float32 arithmetic, numpy.rint = half to even):
  asymmetric: lo = min(0, min w), hi = max(0, max w), scale = (hi - lo) / 15, zero = rint(-lo / scale)
  symmetric:  m = max |w|, scale = 2 m / 15, zero = 8
  q = clip(rint(w / scale) + zero, 0, 15)      (tools/gen/reference/int4_checkpoint.py's, the GPTQ/AWQ layouts'
                                                  packing too)

Layouts (n_in inputs, n_out outputs, G = n_in / group groups):
  gptq, awq: as tools/gen/reference/int4_checkpoint.py writes them for Llama (qweight / qzeros / scales F16 / g_idx).
  pack (compressed-tensors "pack-quantized", written here from the format's definition):
    weight_packed I32 [n_out, n_in / 8]: input i of row o in bits 4 (i % 8) of word i / 8, as the signed
      value q - 8 stored unsigned, i.e. the nibble is q itself;
    weight_scale BF16 [n_out, G];
    weight_zero_point I32 [n_out / 8, G] (asymmetric only): output o in bits 4 (o % 8) of row o / 8, the
      signed zero - 8 stored as zero;
    weight_shape I64 [2] = [n_out, n_in];  weight_g_idx I32 [n_in] with --act-order.
  w = (q_signed - zero_signed) * scale = (q - zero) * scale; symmetric: zero_signed = 0 (zero = 8).

  logits.npy   float32 [n_prompt, n_vocab] for golden.json's ids
  golden.json  {"ids", "source", "format", "group", "symmetric", "act_order", "max_abs_logit", "command"}

  make_int4_checkpoint.py --source tests/data/deepseek_int4/bf16_w64 --out tests/data/deepseek_int4/awq_g64 \\
      --format awq --group 64

--not-convert leaves whole modules as stored, as published checkpoints do (QuantTrio's DeepSeek AWQ configs
list "model.layers.0." .. "model.layers.2." and the MTP layer under modules_to_not_convert).
"""
import argparse
import json
import os
import re
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import ds_io  # noqa: E402
import int4_checkpoint  # noqa: E402
from deepseek_ref import DeepseekRef, forward  # noqa: E402

IDS = [0, 17, 143, 96, 5, 128, 77, 31, 190, 64, 9, 150]  # tests/data/deepseek/bf16_qlora_yarn's prompt
IGNORE = ["lm_head", "re:.*mlp\\.gate$", "re:.*shared_head\\.head$"]


def is_projection(name, not_convert=()):
    return (name.endswith("_proj.weight") or name.endswith("_proj_with_mqa.weight")) and \
        not any(m in name for m in not_convert)


def pack_nibbles(values):
    """uint8 [rows, 8 k] (each 0..15) -> int32 [rows, k]: value 8j + c in bits 4c of word j."""
    v = values.astype(np.uint32).reshape(values.shape[0], -1, 8)
    word = np.zeros(v.shape[:2], np.uint32)
    for c in range(8):
        word |= v[:, :, c] << np.uint32(4 * c)
    return word.view(np.int32)


def pack_quantized(w, a, rng):
    """One projection in compressed-tensors pack-quantized -> ({suffix: (dtype, array)}, float64 dequantised)."""
    n_out, n_in = w.shape
    order = rng.permutation(n_in) if a.act_order else np.arange(n_in)
    q, zero, scale = int4_checkpoint.quantize(w, a.group, a.symmetric, order)
    scale_bits = ds_io.float_to_bf16_bits(scale)
    group_of = np.empty(n_in, np.int64)
    group_of[order] = np.arange(n_in) // a.group
    used = ds_io.bf16_bits_to_float(scale_bits).astype(np.float64)
    deq = (q.astype(np.float64) - zero.astype(np.float64)[:, group_of]) * used[:, group_of]
    # Signed values q - 8 in [-8, 7], stored plus 8: the nibble is q. The same for the zero points.
    tensors = {"weight_packed": ("I32", pack_nibbles(q)),
               "weight_scale": ("BF16", scale_bits),
               "weight_shape": ("I64", np.array([n_out, n_in], np.int64))}
    if not a.symmetric:
        tensors["weight_zero_point"] = ("I32", pack_nibbles(zero.T.copy()).T.copy())  # packed along the outputs
    if a.act_order:
        tensors["weight_g_idx"] = ("I32", group_of.astype(np.int32))
    return tensors, deq


def published_config(a):
    if a.format == "gptq":
        return {"quant_method": "gptq", "bits": 4, "group_size": a.group, "desc_act": a.act_order,
                "sym": a.symmetric, "damp_percent": 0.01, "true_sequential": True, "checkpoint_format": "gptq"}
    if a.format == "awq":
        return {"quant_method": "awq", "bits": 4, "group_size": a.group, "version": "gemm", "zero_point": True,
                "modules_to_not_convert": a.not_convert or None}
    weights = {"num_bits": 4, "type": "int", "symmetric": a.symmetric, "strategy": "group", "group_size": a.group,
               "actorder": "group" if a.act_order else None, "dynamic": False, "observer": "minmax",
               "block_structure": None}
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": None,
                                          "output_activations": None}},
            "ignore": IGNORE + [f"re:{re.escape(m)}" for m in a.not_convert], "kv_cache_scheme": None, "global_compression_ratio": None}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True, help="a BF16 DeepSeek-V3 folder, every n_in a multiple of 64")
    ap.add_argument("--out", required=True)
    ap.add_argument("--format", choices=["gptq", "awq", "pack"], required=True)
    ap.add_argument("--group", type=int, default=64)
    ap.add_argument("--symmetric", action="store_true", help="zero 8, scale 2 max|w| / 15 (gptq, pack)")
    ap.add_argument("--act-order", action="store_true", help="groups over permuted inputs (gptq, pack)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--not-convert", action="append", default=[],
                    help="leave modules whose name holds this as stored, e.g. model.layers.0. (AWQ "
                         "modules_to_not_convert; pack: an ignore regex; gptq: no config key, tensors only)")
    a = ap.parse_args(argv)
    assert a.format != "awq" or not (a.symmetric or a.act_order), "AWQ is asymmetric, without act order"
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out, exist_ok=True)
    raw = ds_io.load_raw(a.source)
    ref = DeepseekRef(a.source)
    entries, bits_of, dequantised = [], {}, {}
    for name in sorted(raw):
        dtype, bits = raw[name]
        if not is_projection(name, a.not_convert):
            entries.append((name, dtype, bits.shape))
            bits_of[name] = bits
            continue
        w = ref.w[name].numpy().astype(np.float32)
        if a.format == "pack":
            tensors, deq = pack_quantized(w, a, rng)
        else:
            # int4_checkpoint.convert: qweight / qzeros / scales (F16) / g_idx, with its own dequantisation.
            tensors, deq = int4_checkpoint.convert(w, a, rng)
        base = name[: -len(".weight")]
        for suffix, (st, array) in tensors.items():
            entries.append((f"{base}.{suffix}", st, array.shape))
            bits_of[f"{base}.{suffix}"] = array
        dequantised[name] = torch.from_numpy(deq)
    ds_io.write_safetensors(os.path.join(a.out, "model.safetensors"), entries, lambda n: [bits_of[n].reshape(-1)])

    with open(os.path.join(a.source, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = published_config(a)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if os.path.exists(os.path.join(a.source, "generation_config.json")):
        shutil.copy(os.path.join(a.source, "generation_config.json"), os.path.join(a.out, "generation_config.json"))

    for name, w in dequantised.items():
        ref.w[name] = w
    logits, _ = forward(ref, IDS)
    np.save(os.path.join(a.out, "logits.npy"), logits.numpy().astype(np.float32))
    golden = {"ids": IDS, "source": os.path.relpath(a.source, os.path.dirname(a.out)), "format": a.format,
              "group": a.group, "not_convert": a.not_convert, "symmetric": a.symmetric, "act_order": a.act_order,
              "max_abs_logit": float(logits.abs().max()),
              "command": "tools/gen/deepseek/make_int4_checkpoint.py " + " ".join(argv)}
    with open(os.path.join(a.out, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    print(f"wrote {a.out}: {len(dequantised)} int4 projections ({a.format}), "
          f"max |logit| {golden['max_abs_logit']:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
