#!/usr/bin/python3
"""Reads a Hugging Face checkpoint folder with numpy only: config.json and the weights of model.safetensors
or sharded model-0000k-of-0000n.safetensors (with or without model.safetensors.index.json), as float32.

safetensors: [u64 header length N][N bytes of JSON {name: {dtype, shape, data_offsets}}][data]. Supported
dtypes: F32, F16, BF16, F64, and F8_E4M3 weights with a `<name>_scale_inv` F32 tensor of per-tile inverse
scales (deepseek-ai/DeepSeek-V3's layout: W[r, c] = e4m3(codes[r, c]) * scale_inv[r // b0, c // b1], tiles
of config.quantization_config.weight_block_size, 128 x 128 by default, edge tiles partial); such weights are
returned dequantised, under their own name, and the scale tensors are not listed.
"""
import glob
import json
import os
import struct

import numpy as np

_PLAIN = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "BF16": "<u2", "F8_E4M3": "u1", "I64": "<i8", "I32": "<i4",
          "U8": "u1"}


def _e4m3_table():
    """The 256 values of OCP FP8 E4M3 (bias 7, no infinities, S.1111.111 is NaN)."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> 3) & 15
    man = codes & 7
    value = np.where(exp == 0, man / 8.0 * 2.0 ** -6, (1 + man / 8.0) * 2.0 ** (exp - 7.0))
    value = np.where((exp == 15) & (man == 7), np.nan, value)
    return (sign * value).astype(np.float32)


E4M3 = _e4m3_table()


def load_config(folder):
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        return json.load(f)


def weight_files(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            names = sorted(set(json.load(f)["weight_map"].values()))
        return [os.path.join(folder, n) for n in names]
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        return [single]
    shards = sorted(glob.glob(os.path.join(folder, "model-*-of-*.safetensors")))
    if shards:
        return shards
    if glob.glob(os.path.join(folder, "*.bin")):
        raise SystemExit(f"{folder}: torch .bin checkpoints are not read here; save it as safetensors")
    raise SystemExit(f"{folder}: no model.safetensors, shards or index")


class Checkpoint:
    """Tensor index over all safetensors files of a folder; get(name) -> float32 numpy array."""

    def __init__(self, folder):
        self.folder = folder
        self.config = load_config(folder)
        qc = self.config.get("quantization_config") or {}
        self.fp8_block = tuple(qc.get("weight_block_size") or (128, 128))
        self.entries = {}  # name -> (path, data_start, dtype, shape, begin, end)
        for path in weight_files(folder):
            with open(path, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
            for name, info in header.items():
                if name == "__metadata__":
                    continue
                if info["dtype"] not in _PLAIN:
                    raise SystemExit(f"{path}: tensor {name} has dtype {info['dtype']}, not read here")
                if name in self.entries:
                    raise SystemExit(f"{folder}: tensor {name} in two files")
                begin, end = info["data_offsets"]
                self.entries[name] = (path, 8 + n, info["dtype"], tuple(info["shape"]), begin, end)
        self._maps = {}

    def names(self):
        return [n for n in self.entries if not n.endswith("_scale_inv")]

    def shape(self, name):
        return self.entries[name][3]

    def dtype(self, name):
        return self.entries[name][2]

    def _raw(self, name):
        path, start, dtype, shape, begin, end = self.entries[name]
        if path not in self._maps:
            self._maps[path] = np.memmap(path, dtype=np.uint8, mode="r")
        data = self._maps[path][start + begin:start + end]
        return np.asarray(data).view(_PLAIN[dtype]).reshape(shape), dtype

    def raw_bf16_bits(self, name):
        """The stored uint16 bits of a BF16 tensor (None for any other dtype), for bit-exact BF16 output."""
        values, dtype = self._raw(name)
        return values if dtype == "BF16" else None

    def get(self, name):
        values, dtype = self._raw(name)
        if dtype == "BF16":
            return (values.astype(np.uint32) << 16).view(np.float32)
        if dtype == "F8_E4M3":
            scale_name = name + "_scale_inv"
            if scale_name not in self.entries:
                raise SystemExit(f"{self.folder}: F8_E4M3 tensor {name} has no {scale_name}")
            scale, _ = self._raw(scale_name)
            b0, b1 = self.fp8_block
            rows, cols = values.shape
            if tuple(scale.shape) != (-(-rows // b0), -(-cols // b1)):
                raise SystemExit(f"{scale_name}: shape {scale.shape} for a [{rows}, {cols}] weight")
            full = np.repeat(np.repeat(scale.astype(np.float32), b0, 0), b1, 1)[:rows, :cols]
            return E4M3[values] * full
        return values.astype(np.float32)
