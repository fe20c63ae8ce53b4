#!/usr/bin/python3
"""DeepSeek-V3 checkpoint files without the `safetensors` package and without a torch float8 type
(torch 1.13 has none): FP8 E4M3FN encoding and decoding in numpy, block quantisation with 128x128
`weight_scale_inv` tiles, and a safetensors writer/reader whose tensors may each have their own dtype
(the published FP8 checkpoint mixes F8_E4M3, BF16 and F32 in one file).

E4M3FN ("fn": finite, no infinities), the format DeepSeek-V3 stores its linear weights in:
  1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits.
  exponent field 1..15: (-1)^s * 2^(e-7) * (1 + m/8); field 15 with m = 7 (0x7F / 0xFF) is NaN, so the
  largest finite value is 0x7E = 1.75 * 2^8 = 448. Exponent field 0: subnormal (-1)^s * 2^-6 * m/8
  (smallest 2^-9). There is no infinity.
Encoding (encode_e4m3): round to nearest, ties to even (on the 3-bit mantissa, subnormals included);
magnitudes above 448 saturate to 448 (the "satfinite" conversion); NaN input is rejected.

Block quantisation (quantize_blocks), the layout of deepseek-ai/DeepSeek-V3's *.weight_scale_inv:
  W [out, in] float -> codes [out, in] uint8 and scale_inv [ceil(out/128), ceil(in/128)] float32, with
  W[r, c] ~= decode(codes[r, c]) * scale_inv[r // 128, c // 128] (edge tiles are partial). scale_inv is
  the tile's max |W| / 448 rounded UP to 4 significant bits (so no value saturates and decode * scale is
  exactly representable in bfloat16: 4 + 4 significant bits <= 8; see make_deepseek_checkpoint.py
  --dequantize). An all-zero tile gets scale 1.
"""
import json
import math
import os
import struct

import numpy as np

BLOCK = 128
E4M3_MAX = 448.0

# safetensors dtype -> (numpy dtype holding the raw bits, bytes per element)
ST_DTYPES = {"BF16": (np.uint16, 2), "F16": (np.float16, 2), "F32": (np.float32, 4), "F64": (np.float64, 8),
             "F8_E4M3": (np.uint8, 1), "I64": (np.int64, 8), "I32": (np.int32, 4), "U8": (np.uint8, 1),
             "I8": (np.int8, 1)}


def _decode_table():
    table = np.zeros(256, dtype=np.float64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e, m = (code >> 3) & 0xF, code & 0x7
        if e == 15 and m == 7:
            table[code] = np.nan
        elif e == 0:
            table[code] = sign * math.ldexp(m / 8.0, -6)
        else:
            table[code] = sign * math.ldexp(1.0 + m / 8.0, e - 7)
    return table


E4M3_VALUES = _decode_table()  # float64 [256], NaN at 0x7F and 0xFF


def decode_e4m3(codes):
    """uint8 array -> float64 array of the values."""
    return E4M3_VALUES[np.asarray(codes, dtype=np.uint8)]


def encode_e4m3(values):
    """float array -> uint8 E4M3FN codes, round to nearest even, saturating at +-448."""
    x = np.asarray(values, dtype=np.float64)
    if np.isnan(x).any():
        raise ValueError("NaN cannot be encoded (the generator never makes one)")
    mag = np.minimum(np.abs(x), E4M3_MAX)
    # quantum of the grid the magnitude falls in: 2^(e-3) for normals (e = floor(log2 |x|) >= -6),
    # 2^-9 for subnormals. frexp: mag = f * 2^k with f in [0.5, 1), so floor(log2 mag) = k - 1.
    _, k = np.frexp(mag)
    e = np.maximum(k.astype(np.int64) - 1, -6)
    quantum = np.ldexp(1.0, e - 3)
    q = np.rint(mag / quantum) * quantum  # np.rint rounds half to even; mag / quantum is exact
    q = np.minimum(q, E4M3_MAX)  # 448 < |x| rounds to at most 448 (464 would tie to 512: saturate)
    _, k2 = np.frexp(q)
    e2 = k2.astype(np.int64) - 1
    normal = q >= 2.0 ** -6
    exp_field = np.where(normal, e2 + 7, 0)
    mant = np.where(normal, np.rint((q / np.ldexp(1.0, np.where(normal, e2, 0)) - 1.0) * 8.0),
                    np.rint(q / 2.0 ** -9))
    code = (exp_field << 3) | mant.astype(np.int64)
    code = np.where(np.signbit(x) & (q > 0), code | 0x80, code)
    return code.astype(np.uint8)


def round_up_4_bits(x):
    """Smallest float with at most 4 significant bits that is >= x (x > 0), as float32."""
    f, k = math.frexp(float(x))  # x = f * 2^k, f in [0.5, 1)
    up = math.ceil(f * 16.0) / 16.0
    return np.float32(math.ldexp(up, k))


def quantize_blocks(w, block=BLOCK):
    """w float [out, in] -> (codes uint8 [out, in], scale_inv float32 [ceil(out/b), ceil(in/b)])."""
    w = np.asarray(w, dtype=np.float64)
    rows, cols = w.shape
    grid = (-(-rows // block), -(-cols // block))
    scale = np.ones(grid, dtype=np.float32)
    codes = np.zeros(w.shape, dtype=np.uint8)
    for i in range(grid[0]):
        for j in range(grid[1]):
            tile = w[i * block:(i + 1) * block, j * block:(j + 1) * block]
            amax = float(np.abs(tile).max())
            if amax > 0:
                scale[i, j] = round_up_4_bits(amax / E4M3_MAX)
            codes[i * block:(i + 1) * block, j * block:(j + 1) * block] = encode_e4m3(tile / float(scale[i, j]))
    return codes, scale


def dequantize_blocks(codes, scale_inv, block=BLOCK):
    """codes uint8 [out, in], scale_inv [ceil(out/b), ceil(in/b)] -> float64 [out, in] (exact)."""
    values = decode_e4m3(codes)
    rows, cols = values.shape
    expected = (-(-rows // block), -(-cols // block))
    if tuple(scale_inv.shape) != expected:
        raise ValueError(f"scale_inv shape {tuple(scale_inv.shape)} for a [{rows}, {cols}] weight, expected "
                         f"{expected}")
    full = np.repeat(np.repeat(np.asarray(scale_inv, dtype=np.float64), block, 0), block, 1)[:rows, :cols]
    return values * full


def float_to_bf16_bits(values):
    """float array -> uint16 bfloat16 bits, round to nearest even (torch's conversion; NaN -> 0x7FC0)."""
    f = np.ascontiguousarray(values, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(f), np.uint16(0x7FC0), rounded)


def bf16_bits_to_float(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def header_bytes(entries):
    """entries: [(name, st_dtype, shape)] in file order -> (header incl. its 8-byte length, offsets)."""
    header = {"__metadata__": {"format": "pt"}}
    offsets, begin = {}, 0
    for name, dtype, shape in entries:
        end = begin + int(np.prod(shape, dtype=np.int64)) * ST_DTYPES[dtype][1]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [begin, end]}
        offsets[name] = (begin, end)
        begin = end
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text, offsets


def write_safetensors(path, entries, chunks_of):
    """Streams a safetensors file whose tensors have their own dtypes. entries: [(name, st_dtype, shape)];
    chunks_of(name) yields flat numpy arrays of the stored bits adding up to the tensor."""
    header, offsets = header_bytes(entries)
    with open(path, "wb") as f:
        f.write(header)
        for name, dtype, _ in entries:
            written = 0
            for chunk in chunks_of(name):
                chunk = np.ascontiguousarray(chunk)
                if chunk.dtype != ST_DTYPES[dtype][0]:
                    raise ValueError(f"{name}: chunk of {chunk.dtype}, expected {dtype}")
                f.write(memoryview(chunk).cast("B"))
                written += chunk.nbytes
            begin, end = offsets[name]
            if written != end - begin:
                raise ValueError(f"{path}: tensor {name} wrote {written} bytes, expected {end - begin}")


def read_safetensors(path):
    """{name: (st_dtype, numpy array of the stored bits, shaped)} from a safetensors file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        np_dtype = ST_DTYPES[info["dtype"]][0]
        out[name] = (info["dtype"], np.frombuffer(raw[begin:end], dtype=np_dtype).reshape(info["shape"]).copy())
    return out


def weight_files(folder):
    """(files, weight_map or None) of a safetensors checkpoint folder (single file or index + shards)."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        return [os.path.join(folder, x) for x in sorted(set(weight_map.values()))], weight_map
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        return [single], None
    raise FileNotFoundError(f"{folder}: no model.safetensors[.index.json]")


def load_raw(folder):
    """{name: (st_dtype, bits array)} of a whole checkpoint; checks the index against the files."""
    files, weight_map = weight_files(folder)
    tensors = {}
    for path in files:
        for name, value in read_safetensors(path).items():
            if name in tensors:
                raise ValueError(f"{path}: tensor {name} appears in two files")
            if weight_map is not None and weight_map.get(name) != os.path.basename(path):
                raise ValueError(f"{path}: tensor {name} is not mapped to this file by the index")
            tensors[name] = value
    if weight_map is not None and set(weight_map) != set(tensors):
        raise ValueError(f"{folder}: index and files disagree on {sorted(set(weight_map) ^ set(tensors))}")
    return tensors


def to_float64(dtype, bits):
    if dtype == "BF16":
        return bf16_bits_to_float(bits).astype(np.float64)
    if dtype in ("F16", "F32", "F64"):
        return bits.astype(np.float64)
    raise ValueError(f"dtype {dtype} is not a float weight")


def load_float64(folder, block=BLOCK):
    """{name: torch float64 tensor} with every F8_E4M3 weight dequantised by its `<name>_scale_inv` tiles
    (the scale tensors are consumed). Also returns {name: stored dtype} of the original tensors."""
    import torch  # only the references read checkpoints back; writing one needs numpy alone
    raw = load_raw(folder)
    out, dtypes = {}, {}
    for name, (dtype, bits) in raw.items():
        dtypes[name] = dtype
        if name.endswith("_scale_inv"):
            if name[:-len("_scale_inv")] not in raw:
                raise ValueError(f"{name} without its weight")
            continue
        if dtype == "F8_E4M3":
            scale_name = name + "_scale_inv"
            if scale_name not in raw or raw[scale_name][0] != "F32":
                raise ValueError(f"{name} is F8_E4M3 but has no F32 {scale_name}")
            value = dequantize_blocks(bits, raw[scale_name][1], block)
        else:
            if name + "_scale_inv" in raw:
                raise ValueError(f"{name}_scale_inv next to a {dtype} weight")
            value = to_float64(dtype, bits)
        out[name] = torch.from_numpy(np.ascontiguousarray(value))
    return out, dtypes
