#!/usr/bin/python3
"""GGUF v3 files with numpy only: a writer (single file or llama.cpp-style split shards) and a reader.

Written from the format definition (ggml's docs/gguf.md), not from llama.cpp's gguf-py. Layout, all
little-endian:

  u32 magic 0x46554747 ("GGUF" as bytes), u32 version = 3, u64 tensor_count, u64 metadata_kv_count
  metadata_kv_count x { string key, u32 value_type, value }
      string = u64 byte length + UTF-8 bytes (no terminator)
      array  = u32 element type, u64 element count, the elements (nested arrays allowed)
  tensor_count x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
      ne[0] is the innermost (contiguous) dimension: a numpy array of shape (a, b) has ne = [b, a].
      offset is relative to the start of the data section and a multiple of the alignment.
  zero padding to a multiple of `general.alignment` (u32 key; 32 when absent)
  the data section: each tensor's bytes at its offset, zero padding between tensors (and after the last).

Split files (what llama.cpp's gguf-split and gguf-py write): NAME-00001-of-0000N.gguf ... each a complete
GGUF holding a consecutive run of the tensors. The first shard carries every metadata key; every shard
carries split.no (u16, 0-based), split.count (u16) and split.tensors.count (i32, tensors in all shards).
"""
import os
import struct

import numpy as np

GGUF_MAGIC = 0x46554747
GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32

# Metadata value types (gguf_metadata_value_type).
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
VALUE_TYPE_NAMES = {U8: "u8", I8: "i8", U16: "u16", I16: "i16", U32: "u32", I32: "i32", F32: "f32",
                    BOOL: "bool", STRING: "string", ARRAY: "array", U64: "u64", I64: "i64", F64: "f64"}
_SCALAR_FORMAT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
                  U64: "<Q", I64: "<q", F64: "<d"}
_SCALAR_NUMPY = {U8: "<u1", I8: "<i1", U16: "<u2", I16: "<i2", U32: "<u4", I32: "<i4", F32: "<f4",
                 BOOL: "<u1", U64: "<u8", I64: "<i8", F64: "<f8"}

# ggml tensor types used here: id, (values per block, bytes per block).
GGML_TYPES = {
    "F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "I8": (24, 1, 1), "I16": (25, 1, 2), "I32": (26, 1, 4),
    "I64": (27, 1, 8), "F64": (28, 1, 8), "BF16": (30, 1, 2),
}
GGML_TYPE_BY_ID = {v[0]: k for k, v in GGML_TYPES.items()}

SPLIT_NO, SPLIT_COUNT, SPLIT_TENSORS_COUNT = "split.no", "split.count", "split.tensors.count"


class GGUFError(ValueError):
    pass


def type_id(type_name):
    return GGML_TYPES[type_name][0]


def tensor_nbytes(type_name, shape):
    """Bytes of a tensor of numpy `shape` (outermost first) stored as ggml `type_name`."""
    _, block, block_bytes = GGML_TYPES[type_name]
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    if shape and shape[-1] % block:
        raise GGUFError(f"row of {shape[-1]} values is not a multiple of {type_name}'s block of {block}")
    return n // block * block_bytes


def split_path(prefix, index, count):
    """llama.cpp's shard name: PREFIX-00001-of-00003.gguf (index 0-based)."""
    return f"{prefix}-{index + 1:05d}-of-{count:05d}.gguf"


# ---------------------------------------------------------------------------------------------------------
# Metadata encoding
# ---------------------------------------------------------------------------------------------------------

def _encode_string(s):
    data = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(data)) + data


def _encode_value(vtype, value):
    if vtype == STRING:
        return _encode_string(value)
    if vtype == ARRAY:
        elem_type, items = value
        head = struct.pack("<IQ", elem_type, len(items))
        if elem_type in _SCALAR_NUMPY:
            if elem_type == BOOL:
                items = [1 if bool(v) else 0 for v in items]
            return head + np.asarray(items, dtype=_SCALAR_NUMPY[elem_type]).tobytes()
        return head + b"".join(_encode_value(elem_type, v) for v in items)
    if vtype == BOOL:
        return struct.pack("<B", 1 if value else 0)
    if vtype in _SCALAR_FORMAT:
        return struct.pack(_SCALAR_FORMAT[vtype], value)
    raise GGUFError(f"unknown metadata value type {vtype}")


class TensorEntry:
    """One tensor to write: name, numpy-order shape, ggml type name, and its bytes (bytes, a numpy array
    holding exactly the encoded bytes, or a zero-argument callable returning either, called at write time
    so a converter can stream tensors without holding them all)."""

    def __init__(self, name, shape, type_name, data):
        self.name, self.shape, self.type_name, self.data = name, tuple(int(d) for d in shape), type_name, data
        self.nbytes = tensor_nbytes(type_name, self.shape)

    def ne(self):
        return list(reversed(self.shape)) or [1]

    def materialize(self):
        data = self.data() if callable(self.data) else self.data
        raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
        if len(raw) != self.nbytes:
            raise GGUFError(f"tensor {self.name}: {len(raw)} bytes given, {self.nbytes} expected")
        return raw


class GGUFWriter:
    """Collects metadata (ordered; setting a key again replaces its value in place) and tensors, then writes
    one file or split shards.

        w = GGUFWriter()
        w.add_string("general.architecture", "llama"); w.add_u32("llama.block_count", 2)
        w.add_array("tokenizer.ggml.tokens", STRING, ["a", "b"])
        w.add_tensor("token_embd.weight", (256, 64), "F32", np.zeros((256, 64), np.float32))
        w.write("out.gguf")                       # or w.write_split("out", max_tensors=3)
    """

    def __init__(self, alignment=DEFAULT_ALIGNMENT):
        if alignment <= 0 or alignment % 8:
            raise GGUFError("alignment must be a positive multiple of 8")
        self.alignment = alignment
        self.kv = {}  # key -> (vtype, value); dict keeps insertion order
        self.tensors = []
        if alignment != DEFAULT_ALIGNMENT:
            self.add_u32("general.alignment", alignment)

    # -- metadata --
    def add(self, key, vtype, value):
        self.kv[key] = (vtype, value)

    def add_u8(self, key, v): self.add(key, U8, int(v))
    def add_i8(self, key, v): self.add(key, I8, int(v))
    def add_u16(self, key, v): self.add(key, U16, int(v))
    def add_i16(self, key, v): self.add(key, I16, int(v))
    def add_u32(self, key, v): self.add(key, U32, int(v))
    def add_i32(self, key, v): self.add(key, I32, int(v))
    def add_u64(self, key, v): self.add(key, U64, int(v))
    def add_i64(self, key, v): self.add(key, I64, int(v))
    def add_f32(self, key, v): self.add(key, F32, float(v))
    def add_f64(self, key, v): self.add(key, F64, float(v))
    def add_bool(self, key, v): self.add(key, BOOL, bool(v))
    def add_string(self, key, v): self.add(key, STRING, v)

    def add_array(self, key, elem_type, items):
        """items: a list of scalars/strings, or for elem_type ARRAY a list of (elem_type, items) pairs."""
        self.add(key, ARRAY, (elem_type, list(items)))

    def remove(self, key):
        self.kv.pop(key, None)

    # -- tensors --
    def add_tensor(self, name, shape, type_name, data):
        if any(t.name == name for t in self.tensors):
            raise GGUFError(f"duplicate tensor name {name}")
        if len(name.encode("utf-8")) >= 64:
            raise GGUFError(f"tensor name {name!r} is 64 bytes or longer (ggml's GGML_MAX_NAME)")
        self.tensors.append(TensorEntry(name, shape, type_name, data))

    # -- writing --
    def _pad(self, n):
        return (self.alignment - n % self.alignment) % self.alignment

    def _write_one(self, path, kv, tensors):
        with open(path, "wb") as f:
            f.write(struct.pack("<IIQQ", GGUF_MAGIC, GGUF_VERSION, len(tensors), len(kv)))
            for key, (vtype, value) in kv.items():
                f.write(_encode_string(key) + struct.pack("<I", vtype) + _encode_value(vtype, value))
            offset = 0
            for t in tensors:
                ne = t.ne()
                f.write(_encode_string(t.name) + struct.pack("<I", len(ne)))
                f.write(struct.pack(f"<{len(ne)}Q", *ne) + struct.pack("<IQ", type_id(t.type_name), offset))
                offset += t.nbytes + self._pad(t.nbytes)
            f.write(b"\0" * self._pad(f.tell()))
            for t in tensors:
                raw = t.materialize()
                f.write(raw)
                f.write(b"\0" * self._pad(len(raw)))

    def write(self, path):
        self._write_one(path, self.kv, self.tensors)
        return [path]

    def write_split(self, prefix, max_tensors):
        """Shards of at most `max_tensors` tensors each, named split_path(prefix, i, n). Returns the paths.
        The first shard holds all metadata, as gguf-split writes it; the split keys go last."""
        if max_tensors <= 0:
            raise GGUFError("max_tensors must be positive")
        groups = [self.tensors[i:i + max_tensors] for i in range(0, len(self.tensors), max_tensors)] or [[]]
        paths = []
        for i, group in enumerate(groups):
            kv = dict(self.kv) if i == 0 else {}
            if i and "general.alignment" in self.kv:
                kv["general.alignment"] = self.kv["general.alignment"]
            for key in (SPLIT_NO, SPLIT_COUNT, SPLIT_TENSORS_COUNT):
                kv.pop(key, None)
            kv[SPLIT_NO] = (U16, i)
            kv[SPLIT_COUNT] = (U16, len(groups))
            kv[SPLIT_TENSORS_COUNT] = (I32, len(self.tensors))
            path = split_path(prefix, i, len(groups))
            self._write_one(path, kv, group)
            paths.append(path)
        return paths


# ---------------------------------------------------------------------------------------------------------
# Reader
# ---------------------------------------------------------------------------------------------------------

class TensorInfo:
    def __init__(self, name, ne, type_id_, offset):
        self.name, self.ne, self.type_id, self.offset = name, ne, type_id_, offset
        self.type_name = GGML_TYPE_BY_ID.get(type_id_, f"type{type_id_}")
        self.shape = tuple(reversed(ne))  # numpy order, outermost first
        self.nbytes = tensor_nbytes(self.type_name, self.shape) if self.type_name in GGML_TYPES else None
        self.file = None  # set by GGUFReader
        self.data_offset = None  # absolute offset in the file


class _Cursor:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, n):
        if n < 0 or self.pos + n > len(self.buf):
            raise GGUFError(f"truncated file: {n} bytes wanted at offset {self.pos} of {len(self.buf)}")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        return bytes(self.take(self.unpack("<Q"))).decode("utf-8")

    def value(self, vtype, depth=0):
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            if depth > 4:
                raise GGUFError("metadata arrays nested too deep")
            elem_type, count = self.unpack("<I"), self.unpack("<Q")
            if elem_type in _SCALAR_NUMPY:
                size = np.dtype(_SCALAR_NUMPY[elem_type]).itemsize
                if count > (len(self.buf) - self.pos) // size:
                    raise GGUFError(f"array of {count} elements runs past the end of the file")
                arr = np.frombuffer(self.take(count * size), dtype=_SCALAR_NUMPY[elem_type]).copy()
                return elem_type, (arr.astype(bool) if elem_type == BOOL else arr)
            if count > len(self.buf) - self.pos:
                raise GGUFError(f"array of {count} elements runs past the end of the file")
            return elem_type, [self.value(elem_type, depth + 1) for _ in range(count)]
        if vtype == BOOL:
            b = self.unpack("<B")
            if b > 1:
                raise GGUFError(f"bool value {b}")
            return bool(b)
        if vtype in _SCALAR_FORMAT:
            return self.unpack(_SCALAR_FORMAT[vtype])
        raise GGUFError(f"unknown metadata value type {vtype}")


class GGUFReader:
    """Parses one GGUF file (memory-mapped). `kv` maps key -> (vtype, value): scalars as Python numbers,
    strings as str, arrays as (elem_type, numpy array | list). `tensors` is an ordered dict name ->
    TensorInfo. `get(key)` gives the bare value (arrays as their items)."""

    def __init__(self, path):
        self.path = path
        self.raw = np.memmap(path, dtype=np.uint8, mode="r") if os.path.getsize(path) else np.zeros(0, np.uint8)
        buf = memoryview(self.raw)
        cur = _Cursor(buf)
        magic, self.version = cur.unpack("<I"), cur.unpack("<I")
        if magic != GGUF_MAGIC:
            raise GGUFError(f"{path}: not a GGUF file (magic {magic:#x})")
        if self.version != GGUF_VERSION:
            raise GGUFError(f"{path}: GGUF version {self.version}, only 3 is read")
        n_tensors, n_kv = cur.unpack("<Q"), cur.unpack("<Q")
        self.kv = {}
        for _ in range(n_kv):
            key = cur.string()
            if key in self.kv:
                raise GGUFError(f"{path}: duplicate key {key}")
            vtype = cur.unpack("<I")
            self.kv[key] = (vtype, cur.value(vtype))
        self.alignment = int(self.get("general.alignment", DEFAULT_ALIGNMENT))
        self.tensors = {}
        for _ in range(n_tensors):
            name = cur.string()
            n_dims = cur.unpack("<I")
            if n_dims > 4:
                raise GGUFError(f"{path}: tensor {name} has {n_dims} dimensions")
            ne = [cur.unpack("<Q") for _ in range(n_dims)]
            info = TensorInfo(name, ne, cur.unpack("<I"), cur.unpack("<Q"))
            if name in self.tensors:
                raise GGUFError(f"{path}: duplicate tensor {name}")
            self.tensors[name] = info
        self.data_start = cur.pos + (self.alignment - cur.pos % self.alignment) % self.alignment
        for info in self.tensors.values():
            info.file = self
            info.data_offset = self.data_start + info.offset
            if info.offset % self.alignment:
                raise GGUFError(f"{path}: tensor {info.name} offset {info.offset} is not aligned")
            if info.nbytes is not None and info.data_offset + info.nbytes > len(self.raw):
                raise GGUFError(f"{path}: tensor {info.name} runs past the end of the file")

    def get(self, key, default=None):
        if key not in self.kv:
            return default
        vtype, value = self.kv[key]
        return value[1] if vtype == ARRAY else value

    def value_type(self, key):
        """(vtype, elem_type or None) of a key."""
        vtype, value = self.kv[key]
        return (vtype, value[0]) if vtype == ARRAY else (vtype, None)

    def tensor_bytes(self, name):
        info = self.tensors[name]
        return self.raw[info.data_offset:info.data_offset + info.nbytes]


class GGUFModel:
    """A model of one file or split shards: metadata from the first file, tensors from all of them.
    Opening any shard's path (NAME-0000k-of-0000N.gguf) opens all N."""

    def __init__(self, path):
        self.files = [GGUFReader(p) for p in self.shard_paths(path)]
        first = self.files[0]
        self.kv = first.kv
        self.tensors = {}
        for f in self.files:
            for name, info in f.tensors.items():
                if name in self.tensors:
                    raise GGUFError(f"tensor {name} in two shards")
                self.tensors[name] = info
        count = first.get(SPLIT_TENSORS_COUNT)
        if count is not None and count != len(self.tensors):
            raise GGUFError(f"split.tensors.count {count} but {len(self.tensors)} tensors found")

    @staticmethod
    def shard_paths(path):
        first = GGUFReader(path)
        count = first.get(SPLIT_COUNT)
        if count is None or count <= 1:
            return [path]
        suffix = f"-{int(first.get(SPLIT_NO)) + 1:05d}-of-{int(count):05d}.gguf"
        if not path.endswith(suffix):
            raise GGUFError(f"{path}: split file not named PREFIX{suffix}")
        prefix = path[:-len(suffix)]
        return [split_path(prefix, i, int(count)) for i in range(int(count))]

    def get(self, key, default=None):
        return self.files[0].get(key, default)

    def tensor_bytes(self, name):
        info = self.tensors[name]
        return info.file.tensor_bytes(name)

    def tensor(self, name):
        """The tensor as float32 numpy array of its numpy-order shape (dequantised when block-quantised)."""
        from ggml_quantize import dequantize  # local import: the reader alone needs no quantiser
        info = self.tensors[name]
        return dequantize(info.type_name, np.asarray(self.tensor_bytes(name)), info.shape)


def dump(path, max_array=8):
    """Human-readable summary of a GGUF (what `gguf_file.py FILE` prints)."""
    model = GGUFModel(path)
    lines = [f"{len(model.files)} file(s), {len(model.kv)} keys, {len(model.tensors)} tensors"]
    for key, (vtype, value) in model.kv.items():
        if vtype == ARRAY:
            elem_type, items = value
            shown = list(items[:max_array])
            more = " ..." if len(items) > max_array else ""
            lines.append(f"  {key}: {VALUE_TYPE_NAMES[elem_type]}[{len(items)}] {shown}{more}")
        else:
            text = value if vtype != STRING or len(value) < 80 else value[:77] + "..."
            lines.append(f"  {key}: {VALUE_TYPE_NAMES[vtype]} {text!r}")
    for name, info in model.tensors.items():
        lines.append(f"  {name}: {info.type_name} ne={info.ne}")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if len(sys.argv) != 2:
        sys.exit("usage: gguf_file.py FILE.gguf   (prints the metadata and tensor table)")
    print(dump(sys.argv[1]))
