#!/usr/bin/python3
"""Writes a 4-bit copy of a Llama checkpoint in a published layout (GPTQ as AutoGPTQ / transformers write it,
or AWQ's GEMM packing), with numpy as the quantiser (round to nearest, not GPTQ's error feedback: the layout
is what is tested), and the reference figures for it from llama_ref.py in float64 on the dequantised
weights w = (q - zero) * scale (scales as stored, F16). lm_head stays as stored, as both tools leave it.

Quantiser, per output channel and group of inputs (float32 arithmetic, numpy.rint = half to even):
  asymmetric: lo = min(0, min w), hi = max(0, max w), scale = (hi - lo) / 15, zero = rint(-lo / scale)
  symmetric:  m = max |w|, scale = 2 m / 15, zero = 8
  q = clip(rint(w / scale) + zero, 0, 15)
(the asymmetric rule is aerie's --weights int4 quantiser: tests compare its q and zeros with these.)

Layouts (n_in inputs, n_out outputs, G groups):
  gptq: qweight I32 [n_in / 8, n_out], input i in bits 4 (i % 8) of row i / 8; qzeros I32 [G, n_out / 8],
        output o in bits 4 (o % 8), each stored as zero - 1 (checkpoint_format "gptq", v1); scales F16
        [G, n_out]; g_idx I32 [n_in] = the group of each input. --act-order draws a permutation of the inputs
        and groups them in its order (desc_act: g_idx no longer i / group).
  awq:  qweight I32 [n_in, n_out / 8] and qzeros I32 [G, n_out / 8] packed along the outputs, output 8j + k
        in nibble [0, 4, 1, 5, 2, 6, 3, 7][k]; zeros as they are; scales F16 [G, n_out].

  logits.npy   float32 [n_prompt, n_vocab] for golden.json's ids (copied from the source's golden.json)
  golden.json  {"ids", "source", "format", "group", "symmetric", "act_order", "max_abs_logit", "command"}

  int4_checkpoint.py --source tests/data/llama/bf16_sharded_untied --out tests/data/llama_int4/gptq_g64 \\
      --format gptq --group 64
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from checkpoint_io import load_state_dict  # noqa: E402
from int8_checkpoint import write_mixed_safetensors  # noqa: E402
from llama_ref import LlamaRef, forward  # noqa: E402
import torch  # noqa: E402

AWQ_NIBBLE = [0, 4, 1, 5, 2, 6, 3, 7]


def quantize(w, group, symmetric, order):
    """w float32 [n_out, n_in], inputs grouped in `order` -> q uint8 [n_out, n_in] (input order), zero uint8
    [n_out, G], scale float32 [n_out, G] (before storage rounding)."""
    n_out, n_in = w.shape
    wg = w[:, order].reshape(n_out, n_in // group, group)
    if symmetric:
        m = np.abs(wg).max(axis=2)
        scale = (np.float32(2) * m / np.float32(15)).astype(np.float32)
        zero = np.full(scale.shape, 8, np.float32)
    else:
        lo = np.minimum(wg.min(axis=2), np.float32(0))
        hi = np.maximum(wg.max(axis=2), np.float32(0))
        scale = ((hi - lo) / np.float32(15)).astype(np.float32)
        safe = np.where(scale == 0, np.float32(1), scale)
        zero = np.where(scale == 0, np.float32(0), np.clip(np.rint(-lo / safe), 0, 15)).astype(np.float32)
    safe = np.where(scale == 0, np.float32(1), scale)
    q = np.clip(np.rint(wg / safe[:, :, None]) + zero[:, :, None], 0, 15)
    q = np.where(scale[:, :, None] == 0, 0, q).astype(np.uint8).reshape(n_out, n_in)
    out = np.empty_like(q)
    out[:, order] = q
    return out, zero.astype(np.uint8), scale


def pack_rows(values, nibble_of):
    """values uint8 [rows, 8 k] -> int32 [rows, k]: value 8j + c in nibble nibble_of[c] of word j."""
    v = values.astype(np.uint32).reshape(values.shape[0], -1, 8)
    word = np.zeros(v.shape[:2], np.uint32)
    for c in range(8):
        word |= v[:, :, c] << np.uint32(4 * nibble_of[c])
    return word.view(np.int32)


def convert(w, a, rng):
    """One projection -> ({suffix: (dtype, bits)}, dequantised float64 [n_out, n_in])."""
    n_out, n_in = w.shape
    order = rng.permutation(n_in) if a.act_order else np.arange(n_in)
    q, zero, scale = quantize(w, a.group, a.symmetric, order)
    scale16 = scale.astype(np.float16)
    group_of = np.empty(n_in, np.int64)
    group_of[order] = np.arange(n_in) // a.group
    deq = (q.astype(np.float64) - zero.astype(np.float64)[:, group_of]) * scale16.astype(np.float64)[:, group_of]
    plain = list(range(8))
    if a.format == "gptq":
        assert (zero > 0).all(), "GPTQ v1 stores zero - 1: a zero point of 0 would read back as 16"
        by_input = q.T.reshape(n_in // 8, 8, n_out).transpose(0, 2, 1).reshape(-1, 8)  # [n_in / 8 * n_out, 8]
        tensors = {"qweight": ("I32", pack_rows(by_input, plain).reshape(n_in // 8, n_out)),
                   "qzeros": ("I32", pack_rows((zero.T.astype(np.int64) - 1).astype(np.uint8) & 0x0F, plain)),
                   "scales": ("F16", scale16.T.copy()),
                   "g_idx": ("I32", group_of.astype(np.int32))}
    else:
        tensors = {"qweight": ("I32", pack_rows(q.T.copy(), AWQ_NIBBLE)),
                   "qzeros": ("I32", pack_rows(zero.T.copy(), AWQ_NIBBLE)),
                   "scales": ("F16", scale16.T.copy())}
    return tensors, deq


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--format", choices=["gptq", "awq"], default="gptq")
    ap.add_argument("--group", type=int, default=64)
    ap.add_argument("--symmetric", action="store_true", help="GPTQ sym=True: zero 8, scale 2 max|w| / 15")
    ap.add_argument("--act-order", action="store_true", help="GPTQ desc_act: groups over permuted inputs")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    assert a.format == "gptq" or not (a.symmetric or a.act_order), "AWQ is asymmetric, without act order"
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out, exist_ok=True)
    weights = load_state_dict(a.source)
    out, dequantised = [], {}
    for name in sorted(weights):
        t = weights[name]
        if name.endswith("_proj.weight"):
            tensors, deq = convert(t.float().numpy(), a, rng)
            base = name[: -len(".weight")]
            for suffix, (dtype, bits) in tensors.items():
                out.append((f"{base}.{suffix}", dtype, bits.shape, bits))
            dequantised[name] = torch.from_numpy(deq)
        else:
            st = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32"}[t.dtype]
            bits = t.view(torch.int16).numpy() if st == "BF16" else t.numpy()
            out.append((name, st, tuple(t.shape), bits))
    write_mixed_safetensors(os.path.join(a.out, "model.safetensors"), out)

    with open(os.path.join(a.source, "config.json")) as f:
        config = json.load(f)
    if a.format == "gptq":
        config["quantization_config"] = {
            "quant_method": "gptq", "bits": 4, "group_size": a.group, "desc_act": a.act_order,
            "sym": a.symmetric, "damp_percent": 0.01, "true_sequential": True, "checkpoint_format": "gptq"}
    else:
        config["quantization_config"] = {
            "quant_method": "awq", "bits": 4, "group_size": a.group, "version": "gemm", "zero_point": True}
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
    golden = {"ids": ids, "source": os.path.relpath(a.source, os.path.dirname(a.out)), "format": a.format,
              "group": a.group, "symmetric": a.symmetric, "act_order": a.act_order,
              "max_abs_logit": float(logits.abs().max()),
              "command": "tools/gen/reference/int4_checkpoint.py " + " ".join(argv)}
    with open(os.path.join(a.out, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    print(f"wrote {a.out}: {len(dequantised)} int4 projections, max |logit| {golden['max_abs_logit']:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
