#!/usr/bin/python3
"""Writes an int8 copy of a DeepSeek-V3 checkpoint (BF16 or FP8 blocks) in the compressed-tensors layout vLLM
serves ("int-quantized": `<proj>.weight` I8 [n_out, n_in] beside `<proj>.weight_scale` [n_out, 1] per channel
or [n_out, n_in / group] per group), with numpy as the quantiser, and the reference logits for it from
deepseek_ref.py in float64 on the dequantised weights.

Quantised: every `*_proj.weight` and `*_proj_with_mqa.weight` (attention, dense MLP, every routed and shared
expert, the MTP layer's eh_proj and its block), FP8 ones after exact dequantisation by their tiles (their
`weight_scale_inv` is dropped). As stored: embeddings, norms, the router (`mlp.gate.*`), lm_head and the MTP
head (the format's usual "ignore": ["lm_head"]). The quantiser is tools/gen/reference/int8_checkpoint.py's:

  scale = max |w| over the channel (or group) / 127, as float32, then rounded to the stored scale dtype;
  q     = round-half-to-even(w / scale) (float32 division by the stored scale), clipped to [-127, 127]

  logits.npy   float32 [n_prompt, n_vocab] for golden.json's ids (those of the source's golden.json)
  golden.json  {"ids", "source", "group", "scale_dtype", "max_abs_logit", "command"}

  make_int8_checkpoint.py --source tests/data/deepseek/fp8_qlora_yarn \\
      --out tests/data/deepseek_int8/fp8_qlora_yarn_int8_f32scale --group 0 --scale-dtype f32
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import ds_io  # noqa: E402
from deepseek_ref import DeepseekRef, forward  # noqa: E402
from int8_checkpoint import compressed_tensors_config, quantize  # noqa: E402


def is_projection(name):
    return name.endswith("_proj.weight") or name.endswith("_proj_with_mqa.weight")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--group", type=int, default=0, help="inputs per scale; 0 = one per output channel")
    ap.add_argument("--scale-dtype", choices=["bf16", "f32"], default="bf16")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    raw = ds_io.load_raw(a.source)
    ref = DeepseekRef(a.source)  # float64, FP8 dequantised exactly
    entries, bits_of, dequantised = [], {}, {}
    for name in sorted(raw):
        dtype, bits = raw[name]
        if name.endswith("_scale_inv") and is_projection(name[:-len("_scale_inv")]):
            continue
        if is_projection(name):
            q, stored, used = quantize(ref.w[name].numpy().astype(np.float32), a.group, a.scale_dtype)
            entries.append((name, "I8", q.shape))
            bits_of[name] = q
            scale_dtype = "BF16" if a.scale_dtype == "bf16" else "F32"
            entries.append((name + "_scale", scale_dtype, stored.shape))
            bits_of[name + "_scale"] = stored
            g = q.shape[1] // used.shape[1]
            dequantised[name] = torch.from_numpy(q.astype(np.float64) * np.repeat(used, g, axis=1))
        else:
            entries.append((name, dtype, bits.shape))
            bits_of[name] = bits
    ds_io.write_safetensors(os.path.join(a.out, "model.safetensors"), entries, lambda n: [bits_of[n].reshape(-1)])

    with open(os.path.join(a.source, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = compressed_tensors_config(
        a.group, ["lm_head", "re:.*mlp.gate$", "re:.*shared_head.head$"])
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if os.path.exists(os.path.join(a.source, "generation_config.json")):
        shutil.copy(os.path.join(a.source, "generation_config.json"), os.path.join(a.out, "generation_config.json"))

    with open(os.path.join(a.source, "golden.json")) as f:
        ids = json.load(f)["ids"]
    for name, w in dequantised.items():
        ref.w[name] = w
    logits, _ = forward(ref, ids)
    np.save(os.path.join(a.out, "logits.npy"), logits.numpy().astype(np.float32))
    golden = {"ids": ids, "source": os.path.relpath(a.source, os.path.dirname(a.out)), "group": a.group,
              "scale_dtype": a.scale_dtype, "max_abs_logit": float(logits.abs().max()),
              "command": "tools/gen/deepseek/make_int8_checkpoint.py " + " ".join(argv)}
    with open(os.path.join(a.out, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    print(f"wrote {a.out}: {len(dequantised)} int8 projections, max |logit| {golden['max_abs_logit']:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
