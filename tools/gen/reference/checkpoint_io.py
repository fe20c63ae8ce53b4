#!/usr/bin/python3
"""Hugging Face checkpoint files without the `safetensors` package: numpy-only safetensors writing and
reading, plus loading a whole checkpoint folder (single or sharded safetensors, single or sharded torch
.bin) into a dict of torch tensors.

safetensors layout (what the Rust/Python library writes and what src/io reads):
  [8 bytes] little-endian u64 N = header length
  [N bytes] UTF-8 JSON: {"__metadata__": {"format": "pt"},
                         name: {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...}
            padded with spaces so that 8 + N is a multiple of 8 (tensor data then starts aligned)
  [data]    the tensors, contiguous, row-major little-endian, offsets relative to the data start
"""
import json
import os
import struct

import numpy as np
import torch

# dtype names used on the command line and in config.json <-> safetensors <-> torch <-> bytes per element.
DTYPES = {
    "bf16": ("BF16", torch.bfloat16, "bfloat16", 2),
    "f16": ("F16", torch.float16, "float16", 2),
    "f32": ("F32", torch.float32, "float32", 4),
}
# safetensors dtype -> numpy dtype holding the raw bits (bf16 has no numpy type: int16 bits, which torch
# can take and reinterpret; torch 1.13 has no uint16).
_ST_TO_NUMPY = {"BF16": np.int16, "F16": np.float16, "F32": np.float32, "F64": np.float64,
                "I64": np.int64, "I32": np.int32, "U8": np.uint8}


def to_storage_bits(values, dtype):
    """float32 numpy array -> numpy array of the stored dtype's bits (bf16 rounded to nearest even by torch)."""
    if dtype == "f32":
        return np.ascontiguousarray(values, dtype=np.float32)
    if dtype == "f16":
        return values.astype(np.float16)
    bits = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).to(torch.bfloat16)
    return bits.view(torch.int16).numpy().view(np.uint16)


def safetensors_header(entries, dtype):
    """entries: [(name, shape)] in file order, all of `dtype`. Returns (header bytes incl. the 8-byte
    length, {name: (begin, end)} data offsets)."""
    st_name, _, _, size = DTYPES[dtype]
    header = {"__metadata__": {"format": "pt"}}
    offsets, begin = {}, 0
    for name, shape in entries:
        end = begin + int(np.prod(shape, dtype=np.int64)) * size
        header[name] = {"dtype": st_name, "shape": list(shape), "data_offsets": [begin, end]}
        offsets[name] = (begin, end)
        begin = end
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text, offsets


def write_safetensors(path, entries, dtype, chunks_of):
    """Streams a safetensors file. entries: [(name, shape)] (written in this order); chunks_of(name)
    yields numpy arrays of the stored bits, flat, whose sizes add up to the tensor's element count.
    Only one chunk is alive at a time, so memory stays bounded whatever the tensor sizes."""
    header, offsets = safetensors_header(entries, dtype)
    with open(path, "wb") as f:
        f.write(header)
        for name, _ in entries:
            written = 0
            for chunk in chunks_of(name):
                f.write(memoryview(np.ascontiguousarray(chunk)).cast("B"))
                written += chunk.nbytes
            begin, end = offsets[name]
            if written != end - begin:
                raise ValueError(f"{path}: tensor {name} wrote {written} bytes, expected {end - begin}")


def read_safetensors(path):
    """{name: torch tensor} from a safetensors file (memory-mapped; bf16 reinterpreted from its bits)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        bits = np.frombuffer(raw[begin:end], dtype=_ST_TO_NUMPY[info["dtype"]]).reshape(info["shape"])
        t = torch.from_numpy(bits.copy())
        tensors[name] = t.view(torch.bfloat16) if info["dtype"] == "BF16" else t
    return tensors


def _files_of(folder):
    """The weight files of a checkpoint folder, in the same order of preference as src/io."""
    for index, single in (("model.safetensors.index.json", "model.safetensors"),
                          ("pytorch_model.bin.index.json", "pytorch_model.bin")):
        index_path = os.path.join(folder, index)
        if os.path.exists(index_path):
            with open(index_path) as f:
                weight_map = json.load(f)["weight_map"]
            return [os.path.join(folder, name) for name in sorted(set(weight_map.values()))], weight_map
        if os.path.exists(os.path.join(folder, single)):
            return [os.path.join(folder, single)], None
    raise FileNotFoundError(f"{folder}: no model.safetensors[.index.json] or pytorch_model.bin[.index.json]")


def load_state_dict(folder):
    """{name: torch tensor in its stored dtype} for a checkpoint folder; checks the index against the files."""
    files, weight_map = _files_of(folder)
    tensors = {}
    for path in files:
        part = read_safetensors(path) if path.endswith(".safetensors") else torch.load(path, map_location="cpu")
        for name, t in part.items():
            if name in tensors:
                raise ValueError(f"{path}: tensor {name} appears in two files")
            if weight_map is not None and weight_map.get(name) != os.path.basename(path):
                raise ValueError(f"{path}: tensor {name} is not mapped to this file by the index")
            tensors[name] = t
    if weight_map is not None and set(weight_map) != set(tensors):
        raise ValueError(f"{folder}: index and files disagree on {sorted(set(weight_map) ^ set(tensors))}")
    return tensors
