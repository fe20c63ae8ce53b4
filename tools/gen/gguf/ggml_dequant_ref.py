#!/usr/bin/python3
"""An independent numpy reference of the dequantisation of llama.cpp's block types Q8_0, Q4_0, Q4_K, Q5_K,
Q6_K, Q4_1, Q5_0 and Q5_1, written from the format's definition (the block structs of ggml-common.h and the dequantize_row_*
functions of ggml-quants.c, as restated in src/ops/ggml_blocks.h). It shares no code with aerie's C++ kernels
or with tools/gen/gguf/ggml_quantize.py, so tests/ops/ggml_blocks_test.cpp can hold both the kernels and the C++
reference twin (src/ops/ref/ref_ggml_blocks.cpp) to it bit for bit.

For each type it writes to tests/data/ggml/ (or the folder given):
  <type>.bin  raw blocks, back to back (random bytes, then f16 scales set to sane random values, plus a few
              edge blocks: zero scales, a subnormal f16 scale, negative scales, all quants at their maximum);
  <type>.f32  the dequantised values, little-endian float32, block by block.
The values are computed in float32 in the definition's order (d * sc first, then times the quant, then the
min subtracted), one rounding per operation as in C; every product is exact in float32, so the only rounding
is the min's subtraction, which any correct implementation rounds the same way.

  /usr/bin/python3 tools/gen/gguf/ggml_dequant_ref.py [OUT_DIR]
"""
import os
import sys

import numpy as np

F32 = np.float32

# name: (values per block, bytes per block, blocks written)
TYPES = {
    "q8_0": (32, 34, 6),
    "q4_0": (32, 18, 6),
    "q4_k": (256, 144, 2),
    "q5_k": (256, 176, 2),
    "q6_k": (256, 210, 2),
    "q4_1": (32, 20, 6),
    "q5_0": (32, 22, 6),
    "q5_1": (32, 24, 6),
}


def f16_field(blocks, offset):
    """The little-endian f16 at byte `offset` of each block, as float32 (exact)."""
    return blocks[:, offset:offset + 2].copy().view("<f2")[:, 0].astype(F32)


def set_f16(blocks, offset, values):
    blocks[:, offset:offset + 2] = np.asarray(values, dtype="<f2").reshape(-1, 1).view(np.uint8)


def nibbles(q):
    return (q & 15).astype(np.int32), (q >> 4).astype(np.int32)


def dequant_q8_0(b):
    d = f16_field(b, 0)
    q = b[:, 2:34].view(np.int8).astype(F32)
    return d[:, None] * q


def dequant_q4_0(b):
    d = f16_field(b, 0)
    lo, hi = nibbles(b[:, 2:18])
    q = np.concatenate([lo, hi], axis=1) - 8  # value j: low nibble of byte j, value j + 16: its high nibble
    return d[:, None] * q.astype(F32)


def dequant_q4_1(b):
    d, m = f16_field(b, 0), f16_field(b, 2)
    lo, hi = nibbles(b[:, 4:20])
    q = np.concatenate([lo, hi], axis=1)
    return d[:, None] * q.astype(F32) + m[:, None]


def q5_quants(b, qh_at):
    """The 5-bit quants of a Q5_0 / Q5_1 block: value j = nibble | bit j of the little-endian u32 qh, as bit 4."""
    qh = b[:, qh_at:qh_at + 4].copy().view("<u4")[:, 0].astype(np.int64)
    lo, hi = nibbles(b[:, qh_at + 4:qh_at + 20])
    q = np.concatenate([lo, hi], axis=1)
    bits = (qh[:, None] >> np.arange(32)[None, :]) & 1
    return (q | (bits << 4)).astype(np.int32)


def dequant_q5_0(b):
    d = f16_field(b, 0)
    return d[:, None] * (q5_quants(b, 2) - 16).astype(F32)


def dequant_q5_1(b):
    d, m = f16_field(b, 0), f16_field(b, 2)
    return d[:, None] * q5_quants(b, 4).astype(F32) + m[:, None]


def scales_mins_k(s):
    """The eight 6-bit scales and mins packed in a K block's 12 bytes: (n, 8) each."""
    s = s.astype(np.int32)
    sc = np.empty((s.shape[0], 8), np.int32)
    m = np.empty_like(sc)
    for j in range(4):
        sc[:, j] = s[:, j] & 63
        m[:, j] = s[:, j + 4] & 63
    for j in range(4, 8):
        sc[:, j] = (s[:, j + 4] & 15) | ((s[:, j - 4] >> 6) << 4)
        m[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    return sc, m


def dequant_k(b, five):
    d, dmin = f16_field(b, 0), f16_field(b, 2)
    sc, m = scales_mins_k(b[:, 4:16])
    qh = b[:, 16:48].astype(np.int32) if five else None
    qs = b[:, 48:176] if five else b[:, 16:144]
    out = np.empty((b.shape[0], 256), F32)
    for c in range(4):  # 64 values per chunk: low nibbles (sub-block 2c), then high nibbles (2c + 1)
        lo, hi = nibbles(qs[:, 32 * c:32 * c + 32])
        for half, q in ((0, lo), (1, hi)):
            s = 2 * c + half
            if five:
                q = q + 16 * ((qh >> s) & 1)
            scale = d * sc[:, s].astype(F32)
            minimum = dmin * m[:, s].astype(F32)
            out[:, 64 * c + 32 * half:64 * c + 32 * half + 32] = scale[:, None] * q.astype(F32) - minimum[:, None]
    return out


def dequant_q6_k(b):
    d = f16_field(b, 208)
    sc = b[:, 192:208].view(np.int8).astype(F32)
    out = np.empty((b.shape[0], 256), F32)
    for h in range(2):  # two halves of 128 values: ql[64h ..], qh[32h ..], sc[8h ..]
        ql = b[:, 64 * h:64 * h + 64].astype(np.int32)
        qh = b[:, 128 + 32 * h:128 + 32 * h + 32].astype(np.int32)
        for l in range(32):
            i = l // 16
            q = [
                (ql[:, l] & 15) | (((qh[:, l] >> 0) & 3) << 4),
                (ql[:, l + 32] & 15) | (((qh[:, l] >> 2) & 3) << 4),
                (ql[:, l] >> 4) | (((qh[:, l] >> 4) & 3) << 4),
                (ql[:, l + 32] >> 4) | (((qh[:, l] >> 6) & 3) << 4),
            ]
            for k in range(4):
                scale = d * sc[:, 8 * h + i + 2 * k]
                out[:, 128 * h + 32 * k + l] = scale * (q[k] - 32).astype(F32)
    return out


DEQUANT = {
    "q8_0": dequant_q8_0,
    "q4_0": dequant_q4_0,
    "q4_k": lambda b: dequant_k(b, five=False),
    "q5_k": lambda b: dequant_k(b, five=True),
    "q6_k": dequant_q6_k,
    "q4_1": dequant_q4_1,
    "q5_0": dequant_q5_0,
    "q5_1": dequant_q5_1,
}


def random_scales(rng, n):
    """f16 scales of random sign and magnitude 2^-12 .. 2^-4 (what trained weights give)."""
    return rng.choice([-1.0, 1.0], n) * np.exp2(rng.uniform(-12.0, -4.0, n))


def make_blocks(name, rng):
    _, nbytes, n = TYPES[name]
    b = rng.integers(0, 256, size=(n, nbytes), dtype=np.uint8)
    d = random_scales(rng, n)
    d[0] = 2.0 ** -20  # subnormal in f16 (below 2^-14)
    if name in ("q8_0", "q4_0"):
        d[1] = 0.0
        b[2, 2:] = 0x7F if name == "q8_0" else 0xFF  # quants at their maximum
        set_f16(b, 0, d)
    elif name in ("q4_1", "q5_0", "q5_1"):
        d[1] = 0.0
        b[2, 2:] = 0xFF  # quants (and fifth bits) at their maximum
        b[3, 2:] = 0x00  # at their minimum
        set_f16(b, 0, d)
        if name != "q5_0":
            set_f16(b, 2, random_scales(rng, n))
    elif name in ("q4_k", "q5_k"):
        set_f16(b, 0, d)
        set_f16(b, 2, random_scales(rng, n))
        b[1, 4:16] = 0xFF  # every 6-bit scale and min at 63
    else:
        b[1, 192:208] = 0x80  # every scale at -128
        set_f16(b, 208, d)
    return b


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../../tests/data/ggml")
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(37)
    for name in TYPES:
        blocks = make_blocks(name, rng)
        values = DEQUANT[name](blocks)
        assert values.dtype == F32 and np.all(np.isfinite(values))
        blocks.tofile(os.path.join(out_dir, name + ".bin"))
        values.astype("<f4").tofile(os.path.join(out_dir, name + ".f32"))
        print(f"{name}: {blocks.shape[0]} blocks, {values.size} values")


if __name__ == "__main__":
    main()
