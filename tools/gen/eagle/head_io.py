#!/usr/bin/python3
"""Reading and writing EAGLE head files with tensors of mixed dtypes (bf16/f32 weights, int64 d2t, bool
t2d), which tools/gen/reference/checkpoint_io.py (one dtype per file) does not cover. numpy + torch only.

safetensors layout: [u64 little-endian header length N][N bytes JSON header, space-padded so the data
starts 8-aligned][tensor data, row-major little-endian, offsets relative to the data start].
"""
import json
import os
import struct

import numpy as np
import torch

# torch dtype -> (safetensors name, numpy dtype of the raw bits)
_TORCH_TO_ST = {
    torch.bfloat16: ("BF16", np.int16), torch.float16: ("F16", np.float16), torch.float32: ("F32", np.float32),
    torch.float64: ("F64", np.float64), torch.int64: ("I64", np.int64), torch.int32: ("I32", np.int32),
    torch.bool: ("BOOL", np.bool_), torch.uint8: ("U8", np.uint8),
}
_ST_TO_NUMPY = {st: np_dtype for st, np_dtype in _TORCH_TO_ST.values()}


def _bits(t):
    """The tensor's bytes as a contiguous numpy array (bf16 reinterpreted as int16)."""
    t = t.contiguous()
    return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy()


def write_safetensors(path, tensors):
    """tensors: {name: torch tensor}, written sorted by name (as the safetensors library does)."""
    header, begin, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name in sorted(tensors):
        t = tensors[name]
        blob = _bits(t).tobytes()
        header[name] = {"dtype": _TORCH_TO_ST[t.dtype][0], "shape": list(t.shape),
                        "data_offsets": [begin, begin + len(blob)]}
        blobs.append(blob)
        begin += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    """{name: torch tensor in its stored dtype}."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        bits = np.frombuffer(data[begin:end], dtype=_ST_TO_NUMPY[info["dtype"]]).reshape(info["shape"])
        t = torch.from_numpy(bits.copy())
        out[name] = t.view(torch.bfloat16) if info["dtype"] == "BF16" else t
    return out


def load_head(folder):
    """(config dict, {name: tensor}) of a head folder: model.safetensors or pytorch_model.bin."""
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    st, binary = os.path.join(folder, "model.safetensors"), os.path.join(folder, "pytorch_model.bin")
    if os.path.exists(st):
        return config, read_safetensors(st)
    if os.path.exists(binary):
        return config, torch.load(binary, map_location="cpu")
    raise FileNotFoundError(f"{folder}: no model.safetensors or pytorch_model.bin")
