#!/usr/bin/python3
"""Writes an int8 copy of a Llama checkpoint in the compressed-tensors layout vLLM serves ("int-quantized"
format: `<proj>.weight` I8 [n_out, n_in] and `<proj>.weight_scale` [n_out, 1] per channel or
[n_out, n_in / group] per group; lm_head left as stored, as the format's usual "ignore": ["lm_head"]), with
numpy as the quantiser, and the reference figures for it from llama_ref.py in float64 on the dequantised
weights:

  scale = max |w| over the channel (or group) / 127, as float32, then rounded to the stored scale dtype;
  q     = round-half-to-even(w / scale) (float32 division by the stored scale), clipped to [-127, 127]

  logits.npy   float32 [n_prompt, n_vocab] for golden.json's ids (copied from the source's golden.json)
  golden.json  {"ids", "source", "group", "scale_dtype", "max_abs_logit", "command"}

  int8_checkpoint.py --source tests/data/llama/bf16_gqa_rope_scaled_tied \\
      --out tests/data/llama_int8/int8_channel_bf16scale --group 0 --scale-dtype bf16
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from checkpoint_io import load_state_dict, to_storage_bits  # noqa: E402
from llama_ref import LlamaRef, forward  # noqa: E402


def quantize(w, group, scale_dtype):
    """w float32 [n_out, n_in] -> (q int8 [n_out, n_in], stored scale bits, scale as float64 [n_out, n_groups])."""
    n_out, n_in = w.shape
    g = n_in if group == 0 else group
    wg = w.reshape(n_out, n_in // g, g)
    scale = (np.abs(wg).max(axis=2) / np.float32(127)).astype(np.float32)
    stored = to_storage_bits(scale, scale_dtype)
    if scale_dtype == "bf16":
        used = (stored.astype(np.uint32) << 16).view(np.float32)
    else:
        used = stored.astype(np.float32)
    safe = np.where(used == 0, np.float32(1), used)
    q = np.rint(wg / safe[:, :, None]).clip(-127, 127)
    q = np.where(used[:, :, None] == 0, 0, q).astype(np.int8).reshape(n_out, n_in)
    return q, stored, used.astype(np.float64)


def compressed_tensors_config(group, ignore):
    """The quantization_config compressed-tensors writes for symmetric int8 weights, per channel (group 0) or
    per group, the modules in `ignore` left as stored."""
    return {
        "quant_method": "compressed-tensors", "format": "int-quantized", "quantization_status": "compressed",
        "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None, "weights": {
            "num_bits": 8, "type": "int", "symmetric": True, "dynamic": False,
            "strategy": "channel" if group == 0 else "group", "group_size": group or None}}},
        "ignore": ignore}


def write_mixed_safetensors(path, tensors):
    """tensors: [(name, safetensors dtype, shape, numpy array of the stored bits)] in file order."""
    header = {"__metadata__": {"format": "pt"}}
    begin = 0
    for name, dtype, shape, bits in tensors:
        end = begin + bits.nbytes
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [begin, end]}
        begin = end
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, _, bits in tensors:
            f.write(memoryview(np.ascontiguousarray(bits)).cast("B"))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--group", type=int, default=0, help="inputs per scale; 0 = one per output channel")
    ap.add_argument("--scale-dtype", choices=["bf16", "f32"], default="bf16")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    weights = load_state_dict(a.source)
    out, dequantised = [], {}
    for name in sorted(weights):
        t = weights[name]
        st = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32"}[t.dtype]
        if name.endswith("_proj.weight"):
            q, stored, used = quantize(t.float().numpy(), a.group, a.scale_dtype)
            out.append((name, "I8", q.shape, q))
            out.append((name + "_scale", "BF16" if a.scale_dtype == "bf16" else "F32", stored.shape, stored))
            g = q.shape[1] // used.shape[1]
            dequantised[name] = torch.from_numpy(q.astype(np.float64) * np.repeat(used, g, axis=1))
        else:
            bits = t.view(torch.int16).numpy() if st == "BF16" else t.numpy()
            out.append((name, st, tuple(t.shape), bits))
    write_mixed_safetensors(os.path.join(a.out, "model.safetensors"), out)

    with open(os.path.join(a.source, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = compressed_tensors_config(a.group, ["lm_head"])
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(a.source, extra)):
            shutil.copy(os.path.join(a.source, extra), os.path.join(a.out, extra))

    with open(os.path.join(a.source, "golden.json")) as f:
        ids = json.load(f)["ids"]
    model = LlamaRef(a.source, "f64")
    for name, w in dequantised.items():
        model.w[name] = w
    logits, _ = forward(model, ids)
    np.save(os.path.join(a.out, "logits.npy"), logits.numpy().astype(np.float32))
    golden = {"ids": ids, "source": os.path.relpath(a.source, os.path.dirname(a.out)), "group": a.group,
              "scale_dtype": a.scale_dtype, "max_abs_logit": float(logits.abs().max()),
              "command": "tools/gen/reference/int8_checkpoint.py " + " ".join(argv)}
    with open(os.path.join(a.out, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    print(f"wrote {a.out}: {sum(1 for n in dequantised)} int8 projections, max |logit| {golden['max_abs_logit']:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
