#!/usr/bin/python3
"""numpy encoders and decoders for the ggml tensor types aerie reads from GGUF: F32, F16, BF16 and the block
types Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K.

The block layouts are those documented in src/ops/ggml_blocks.h (d, dmin are IEEE f16):
  Q8_0 (32 values, 34 bytes): d, i8 q[32]                       x = d * q
  Q4_0 (32 values, 18 bytes): d, u8 qs[16]                      x[j] = d*((qs[j]&15)-8), x[j+16] = d*((qs[j]>>4)-8)
  Q4_1 (32 values, 20 bytes): d, m, u8 qs[16]                   x[j] = d*(qs[j]&15) + m, x[j+16] = d*(qs[j]>>4) + m
  Q5_0 (32 values, 22 bytes): d, u32 qh, u8 qs[16]              q[j] = nibble | (qh >> j & 1) << 4, x = d*(q-16)
  Q5_1 (32 values, 24 bytes): d, m, u32 qh, u8 qs[16]           q as Q5_0, x = d*q + m
  Q4_K (256 values, 144 bytes): d, dmin, scales[12], qs[128]    eight sub-blocks of 32, 6-bit scale and min
  Q5_K (256 values, 176 bytes): d, dmin, scales[12], qh[32], qs[128]   Q4_K plus a fifth bit per value
  Q6_K (256 values, 210 bytes): ql[128], qh[64], i8 scales[16], d      sixteen sub-blocks of 16, 6-bit values

The encoders follow the arithmetic of ggml's reference quantisers (quantize_row_*_ref in ggml-quants.c,
what llama-quantize runs without an importance matrix), vectorised over all blocks at once:
  Q8_0: d = max|x| / 127, q = round(x / d).
  Q4_0: d = -(the value of largest magnitude) / 8, q = min(15, floor(x / d + 8.5)).
  Q5_0: d = -(the value of largest magnitude) / 16, q = min(31, floor(x / d + 16.5)).
  Q4_1 / Q5_1: m = min, d = (max - min) / 15 (31), q = floor((x - m) / d + 0.5) (Q4_1: at most 15).
  Q4_K / Q5_K: per sub-block of 32 a scale and a min (min <= 0) by make_qkx2_quants: start from
      (max - min) / nmax, then try nstep+1 other inverse scales and keep the weighted least-squares fit
      (weights av|x| + |x|) with the smallest weighted squared error; the super-block's d = max scale / 63
      and dmin = max min / 63 turn the sub-block scales and mins into 6-bit integers; the values are then
      re-quantised against those rounded scales.
  Q6_K: per sub-block of 16 a signed scale by make_qx_quants (x^2-weighted fit over 19 candidate scales
      around -32 / (the value of largest magnitude)); d = scale of largest magnitude / -128 makes them int8.
Computations run in float32 in the C code's order (sums accumulated left to right), so the blocks equal
ggml's byte for byte in all but rare cases (checked against quantize_row_*_ref built from llama.cpp's
ggml-quants.c: see README.md).

Rows are independent: quantize(x) takes any array whose last dimension is a multiple of the block and
returns uint8 of shape (..., n_blocks_per_row * block_bytes).
"""
import numpy as np

QK_K = 256
GROUP_MAX_EPS = np.float32(1e-15)

# type -> (values per block, bytes per block)
BLOCKS = {"F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q8_0": (32, 34), "Q4_0": (32, 18),
          "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q4_K": (256, 144), "Q5_K": (256, 176),
          "Q6_K": (256, 210)}


# ---------------------------------------------------------------------------------------------------------
# Float encodings
# ---------------------------------------------------------------------------------------------------------

def f32_to_bf16_bits(x):
    """float32 -> bf16 bits (uint16), round to nearest even; NaN stays a (quiet) NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _f16(x):
    """float32 -> float16 (round to nearest even, as ggml's GGML_FP32_TO_FP16) and back to float32."""
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def _seqsum(a):
    """Sum over the last axis in float32, left to right, as the C loops accumulate (numpy's pairwise sum
    rounds differently and would move a few rounding decisions)."""
    a = np.asarray(a, dtype=np.float32)
    acc = a[..., 0].copy()
    for i in range(1, a.shape[-1]):
        acc += a[..., i]
    return acc


def _nearest_int(v):
    """ggml's nearest_int: round half to even of a float32."""
    return np.rint(np.asarray(v, dtype=np.float32)).astype(np.int32)


# ---------------------------------------------------------------------------------------------------------
# Block quantisers. Each takes x as float32 [n_blocks, block] and returns uint8 [n_blocks, block_bytes].
# ---------------------------------------------------------------------------------------------------------

def _quantize_q8_0(x):
    amax = np.abs(x).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = x * inv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)  # roundf: half away from 0
    out = np.empty((x.shape[0], 34), np.uint8)
    out[:, :2] = _f16(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out


def _quantize_q4_0(x):
    rows = np.arange(x.shape[0])
    vmax = x[rows, np.abs(x).argmax(axis=1)]  # signed value of largest magnitude (first one)
    d = (vmax / np.float32(-8)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = np.minimum(15, np.trunc(x * inv[:, None] + np.float32(8.5))).astype(np.uint8)
    out = np.empty((x.shape[0], 18), np.uint8)
    out[:, :2] = _f16(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out


def _inverse(d):
    return np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)


def _pack_fifth_bits(q):
    """q: uint8 [B, 32] 5-bit levels -> (qs [B, 16] nibbles, qh [B, 4] bytes of the little-endian u32)."""
    qs = (q[:, :16] & 15) | ((q[:, 16:] & 15) << 4)
    bits = ((q >> 4) & 1).astype(np.uint64) << np.arange(32, dtype=np.uint64)[None, :]
    qh = bits.sum(axis=1).astype("<u4")
    return qs, qh.view(np.uint8).reshape(-1, 4)


def _quantize_q5_0(x):
    rows = np.arange(x.shape[0])
    vmax = x[rows, np.abs(x).argmax(axis=1)]  # signed value of largest magnitude (first one)
    d = (vmax / np.float32(-16)).astype(np.float32)
    q = np.minimum(31, np.trunc(x * _inverse(d)[:, None] + np.float32(16.5))).astype(np.uint8)
    qs, qh = _pack_fifth_bits(q)
    out = np.empty((x.shape[0], 22), np.uint8)
    out[:, :2] = _f16(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:6] = qh
    out[:, 6:] = qs
    return out


def _quantize_min_scale(x, nmax):
    """Q4_1 / Q5_1: m = min, d = (max - min) / nmax, levels trunc((x - m) / d + 0.5)."""
    lo, hi = x.min(axis=1), x.max(axis=1)
    d = ((hi - lo) / np.float32(nmax)).astype(np.float32)
    v = np.trunc((x - lo[:, None]) * _inverse(d)[:, None] + np.float32(0.5))
    return d, lo, v


def _quantize_q4_1(x):
    d, m, v = _quantize_min_scale(x, 15)
    q = np.minimum(15, v).astype(np.uint8)
    out = np.empty((x.shape[0], 20), np.uint8)
    out[:, :2] = _f16(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = _f16(m).view(np.uint8).reshape(-1, 2)
    out[:, 4:] = q[:, :16] | (q[:, 16:] << 4)
    return out


def _quantize_q5_1(x):
    d, m, v = _quantize_min_scale(x, 31)
    qs, qh = _pack_fifth_bits(v.astype(np.uint8))
    out = np.empty((x.shape[0], 24), np.uint8)
    out[:, :2] = _f16(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = _f16(m).view(np.uint8).reshape(-1, 2)
    out[:, 4:8] = qh
    out[:, 8:] = qs
    return out


def _make_qkx2_quants(x, weights, nmax, rmin, rdelta, nstep):
    """Vectorised make_qkx2_quants over sub-blocks x [S, n]: returns (scale [S], the_min [S] >= 0, L [S, n]).
    The value model is x ~ scale * L - the_min with L in [0, nmax]."""
    f = np.float32
    vmin = np.minimum(x.min(axis=1), f(0))
    vmax = x.max(axis=1)
    sum_w = _seqsum(weights)
    sum_x = _seqsum(weights * x)
    flat = vmax == vmin
    rng = np.where(flat, f(1), vmax - vmin).astype(f)
    iscale = (f(nmax) / rng).astype(f)
    scale = (f(1) / iscale).astype(f)
    L = np.clip(_nearest_int(iscale[:, None] * (x - vmin[:, None])), 0, nmax)
    diff = scale[:, None] * L.astype(f) + vmin[:, None] - x
    best = _seqsum(weights * (diff * diff))
    best_min = vmin.copy()  # as in ggml, each later candidate is measured from the best min so far
    for step in range(nstep + 1):
        iscale = ((f(rmin) + f(rdelta) * f(step) + f(nmax)) / np.where(flat, f(1), vmax - best_min)).astype(f)
        La = np.clip(_nearest_int(iscale[:, None] * (x - best_min[:, None])), 0, nmax)
        Lf = La.astype(f)
        sum_l = _seqsum(weights * Lf)
        sum_l2 = _seqsum(weights * Lf * Lf)
        sum_xl = _seqsum(weights * Lf * x)
        D = sum_w * sum_l2 - sum_l * sum_l
        ok = D > 0
        Ds = np.where(ok, D, f(1))
        this_scale = ((sum_w * sum_xl - sum_x * sum_l) / Ds).astype(f)
        this_min = ((sum_l2 * sum_x - sum_l * sum_xl) / Ds).astype(f)
        pos = this_min > 0
        this_min = np.where(pos, f(0), this_min)
        this_scale = np.where(pos, sum_xl / np.where(sum_l2 > 0, sum_l2, f(1)), this_scale).astype(f)
        diff = this_scale[:, None] * Lf + this_min[:, None] - x
        err = _seqsum(weights * (diff * diff))
        take = ok & (err < best)
        L = np.where(take[:, None], La, L)
        best = np.where(take, err, best)
        scale = np.where(take, this_scale, scale)
        best_min = np.where(take, this_min, best_min)
    scale = np.where(flat, f(0), scale)
    best_min = np.where(flat, vmin, best_min)
    L = np.where(flat[:, None], 0, L)
    return scale.astype(f), (-best_min).astype(f), L


def _pack_k_scales(ls, lm):
    """6-bit scales and mins of eight sub-blocks [B, 8] -> the 12 `scales` bytes [B, 12] of Q4_K / Q5_K."""
    s = np.zeros((ls.shape[0], 12), np.uint8)
    s[:, 0:4] = ls[:, 0:4] | ((ls[:, 4:8] >> 4) << 6)
    s[:, 4:8] = lm[:, 0:4] | ((lm[:, 4:8] >> 4) << 6)
    s[:, 8:12] = (ls[:, 4:8] & 15) | ((lm[:, 4:8] & 15) << 4)
    return s


def _unpack_k_scales(s):
    """The inverse of _pack_k_scales: (sc [B, 8], m [B, 8]) as float32."""
    s = s.astype(np.uint8)
    sc = np.empty((s.shape[0], 8), np.uint8)
    m = np.empty((s.shape[0], 8), np.uint8)
    sc[:, :4] = s[:, 0:4] & 63
    m[:, :4] = s[:, 4:8] & 63
    sc[:, 4:] = (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)
    m[:, 4:] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return sc.astype(np.float32), m.astype(np.float32)


def _k_scales_and_levels(x, nmax, rmin, rdelta, nstep):
    """Shared Q4_K / Q5_K math for super-blocks x [B, 256]: (d f16, dmin f16, ls, lm, L [B, 256])."""
    f = np.float32
    B = x.shape[0]
    sub = x.reshape(B * 8, 32)
    av_x = np.sqrt(_seqsum(sub * sub) / f(32)).astype(f)
    weights = (av_x[:, None] + np.abs(sub)).astype(f)
    scales, mins, L = _make_qkx2_quants(sub, weights, nmax, rmin, rdelta, nstep)
    scales, mins, L = scales.reshape(B, 8), mins.reshape(B, 8), L.reshape(B, 8, 32)
    max_scale = np.maximum(scales.max(axis=1), f(0))
    max_min = np.maximum(mins.max(axis=1), f(0))
    inv_scale = np.where(max_scale > 0, f(63) / np.where(max_scale > 0, max_scale, f(1)), f(0)).astype(f)
    inv_min = np.where(max_min > 0, f(63) / np.where(max_min > 0, max_min, f(1)), f(0)).astype(f)
    ls = np.clip(_nearest_int(inv_scale[:, None] * scales), 0, 63).astype(np.uint8)
    lm = np.clip(_nearest_int(inv_min[:, None] * mins), 0, 63).astype(np.uint8)
    d = _f16(max_scale / f(63))
    dmin = _f16(max_min / f(63))
    # Re-quantise against the rounded scales; a sub-block whose scale rounds to 0 keeps its levels.
    dj = d.astype(f)[:, None] * ls.astype(f)
    dm = dmin.astype(f)[:, None] * lm.astype(f)
    safe = np.where(dj != 0, dj, f(1))
    Lq = np.clip(_nearest_int((sub.reshape(B, 8, 32) + dm[:, :, None]) / safe[:, :, None]), 0, nmax)
    L = np.where((dj != 0)[:, :, None], Lq, L).reshape(B, 256).astype(np.uint8)
    return d, dmin, ls, lm, L


def _quantize_q4_k(x):
    d, dmin, ls, lm, L = _k_scales_and_levels(x, 15, -1.0, 0.1, 20)
    B = x.shape[0]
    out = np.empty((B, 144), np.uint8)
    out[:, 0:2] = d.view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = dmin.view(np.uint8).reshape(-1, 2)
    out[:, 4:16] = _pack_k_scales(ls, lm)
    L4 = L.reshape(B, 4, 2, 32)  # chunk c of 64 values: low nibbles values 64c..64c+31, high 64c+32..
    out[:, 16:] = (L4[:, :, 0, :] | (L4[:, :, 1, :] << 4)).reshape(B, 128)
    return out


def _quantize_q5_k(x):
    d, dmin, ls, lm, L = _k_scales_and_levels(x, 31, -0.5, 0.1, 15)
    B = x.shape[0]
    out = np.empty((B, 176), np.uint8)
    out[:, 0:2] = d.view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = dmin.view(np.uint8).reshape(-1, 2)
    out[:, 4:16] = _pack_k_scales(ls, lm)
    L5 = L.reshape(B, 4, 2, 32)
    high = (L5 >> 4) & 1  # [B, chunk c, half, 32]: bit 2c (first half) or 2c+1 (second half) of qh[l]
    shifts = (2 * np.arange(4)[:, None] + np.arange(2)[None, :]).astype(np.uint8)  # [4, 2]
    qh = (high << shifts[None, :, :, None]).sum(axis=(1, 2)).astype(np.uint8)
    out[:, 16:48] = qh
    low = L5 & 15
    out[:, 48:] = (low[:, :, 0, :] | (low[:, :, 1, :] << 4)).reshape(B, 128)
    return out


def _make_qx_quants(x, nmax):
    """Vectorised make_qx_quants with rmse_type 1 (weights x^2) over sub-blocks x [S, n]: (scale [S],
    L [S, n] in [0, 2*nmax)). Value model x ~ scale * (L - nmax)."""
    f = np.float32
    rows = np.arange(x.shape[0])
    vmax = x[rows, np.abs(x).argmax(axis=1)]
    zero = np.abs(vmax) < GROUP_MAX_EPS
    safe_max = np.where(zero, f(1), vmax).astype(f)
    w = x * x

    def fit(iscale):
        l = np.clip(_nearest_int(iscale[:, None] * x), -nmax, nmax - 1)
        lf = l.astype(f)
        return l, _seqsum(w * x * lf), _seqsum(w * lf * lf)

    l, sumlx, suml2 = fit((f(-nmax) / safe_max).astype(f))
    scale = np.where(suml2 != 0, sumlx / np.where(suml2 != 0, suml2, f(1)), f(0)).astype(f)
    best = (scale * sumlx).astype(f)
    L = l
    for step in range(-9, 10):
        if step == 0:
            continue
        la, sumlx, suml2 = fit((-(f(nmax) + f(0.1) * f(step)) / safe_max).astype(f))
        take = (suml2 > 0) & (sumlx * sumlx > best * suml2)
        L = np.where(take[:, None], la, L)
        new_scale = (sumlx / np.where(suml2 > 0, suml2, f(1))).astype(f)
        scale = np.where(take, new_scale, scale)
        best = np.where(take, new_scale * sumlx, best).astype(f)
    scale = np.where(zero, f(0), scale)
    L = np.where(zero[:, None], 0, L + nmax)
    return scale.astype(f), L


def _quantize_q6_k(x):
    f = np.float32
    B = x.shape[0]
    sub = x.reshape(B * 16, 16)
    scales, L = _make_qx_quants(sub, 32)
    scales, L = scales.reshape(B, 16), L.reshape(B, 16, 16)
    rows = np.arange(B)
    max_scale = scales[rows, np.abs(scales).argmax(axis=1)]
    zero = np.abs(max_scale) < GROUP_MAX_EPS
    iscale = (f(-128) / np.where(zero, f(1), max_scale)).astype(f)
    d = _f16(f(1) / iscale)
    sc = np.minimum(127, _nearest_int(iscale[:, None] * scales)).astype(np.int8)
    dj = d.astype(f)[:, None] * sc.astype(f)
    safe = np.where(dj != 0, dj, f(1))
    Lq = np.clip(_nearest_int(sub.reshape(B, 16, 16) / safe[:, :, None]), -32, 31) + 32
    L = np.where((dj != 0)[:, :, None], Lq, L).reshape(B, 2, 4, 32).astype(np.uint8)  # [B, half, quarter, l]
    out = np.empty((B, 210), np.uint8)
    ql = np.empty((B, 2, 64), np.uint8)
    ql[:, :, :32] = (L[:, :, 0] & 15) | ((L[:, :, 2] & 15) << 4)
    ql[:, :, 32:] = (L[:, :, 1] & 15) | ((L[:, :, 3] & 15) << 4)
    qh = (L[:, :, 0] >> 4) | ((L[:, :, 1] >> 4) << 2) | ((L[:, :, 2] >> 4) << 4) | ((L[:, :, 3] >> 4) << 6)
    out[:, 0:128] = ql.reshape(B, 128)
    out[:, 128:192] = qh.reshape(B, 64)
    out[:, 192:208] = sc.view(np.uint8)
    out[:, 208:210] = d.view(np.uint8).reshape(-1, 2)
    out[zero] = 0
    return out


_QUANTIZERS = {"Q8_0": _quantize_q8_0, "Q4_0": _quantize_q4_0, "Q4_1": _quantize_q4_1, "Q5_0": _quantize_q5_0,
               "Q5_1": _quantize_q5_1, "Q4_K": _quantize_q4_k, "Q5_K": _quantize_q5_k, "Q6_K": _quantize_q6_k}


# ---------------------------------------------------------------------------------------------------------
# Block dequantisers, from the layouts in src/ops/ggml_blocks.h. raw: uint8 [n_blocks, block_bytes].
# ---------------------------------------------------------------------------------------------------------

def _half(raw, at):
    return np.ascontiguousarray(raw[:, at:at + 2]).view(np.float16).astype(np.float32)[:, 0]


def _dequantize_q8_0(raw):
    return _half(raw, 0)[:, None] * np.ascontiguousarray(raw[:, 2:]).view(np.int8).astype(np.float32)


def _dequantize_q4_0(raw):
    qs = raw[:, 2:].astype(np.int32)
    q = np.concatenate([(qs & 15) - 8, (qs >> 4) - 8], axis=1).astype(np.float32)
    return _half(raw, 0)[:, None] * q


def _nibble_levels(qs):
    qs = qs.astype(np.int32)
    return np.concatenate([qs & 15, qs >> 4], axis=1)


def _fifth_levels(raw, at):
    """Q5_0 / Q5_1 5-bit levels: the nibbles of qs[at + 4 ..] and bit j of the u32 at `at` for value j."""
    qh = np.ascontiguousarray(raw[:, at:at + 4]).view("<u4").astype(np.int64)
    bits = (qh >> np.arange(32)[None, :]) & 1
    return _nibble_levels(raw[:, at + 4:at + 20]) | (bits << 4).astype(np.int32)


def _dequantize_q4_1(raw):
    return _half(raw, 0)[:, None] * _nibble_levels(raw[:, 4:]).astype(np.float32) + _half(raw, 2)[:, None]


def _dequantize_q5_0(raw):
    return _half(raw, 0)[:, None] * (_fifth_levels(raw, 2) - 16).astype(np.float32)


def _dequantize_q5_1(raw):
    return _half(raw, 0)[:, None] * _fifth_levels(raw, 4).astype(np.float32) + _half(raw, 2)[:, None]


def _dequantize_k(raw, q):
    """Q4_K / Q5_K: q [B, 256] the 4- or 5-bit levels in value order."""
    d, dmin = _half(raw, 0), _half(raw, 2)
    sc, m = _unpack_k_scales(raw[:, 4:16])
    vals = d[:, None, None] * sc[:, :, None] * q.reshape(-1, 8, 32) - dmin[:, None, None] * m[:, :, None]
    return vals.reshape(-1, 256)


def _dequantize_q4_k(raw):
    qs = raw[:, 16:].reshape(-1, 4, 32)
    q = np.stack([qs & 15, qs >> 4], axis=2).reshape(-1, 256).astype(np.float32)  # chunk c: low, then high
    return _dequantize_k(raw, q)


def _dequantize_q5_k(raw):
    qh = raw[:, 16:48].astype(np.int32)  # [B, 32]
    qs = raw[:, 48:].reshape(-1, 4, 32).astype(np.int32)
    c = np.arange(4)[None, :, None]
    lo = (qs & 15) + 16 * ((qh[:, None, :] >> (2 * c)) & 1)
    hi = (qs >> 4) + 16 * ((qh[:, None, :] >> (2 * c + 1)) & 1)
    q = np.stack([lo, hi], axis=2).reshape(-1, 256).astype(np.float32)
    return _dequantize_k(raw, q)


def _dequantize_q6_k(raw):
    B = raw.shape[0]
    ql = raw[:, 0:128].reshape(B, 2, 64).astype(np.int32)
    qh = raw[:, 128:192].reshape(B, 2, 32).astype(np.int32)
    sc = np.ascontiguousarray(raw[:, 192:208]).view(np.int8).astype(np.float32).reshape(B, 2, 8)
    d = _half(raw, 208)
    q = np.empty((B, 2, 4, 32), np.int32)  # [half, quarter of 32 values, l]
    q[:, :, 0] = (ql[:, :, :32] & 15) | (((qh >> 0) & 3) << 4)
    q[:, :, 1] = (ql[:, :, 32:] & 15) | (((qh >> 2) & 3) << 4)
    q[:, :, 2] = (ql[:, :, :32] >> 4) | (((qh >> 4) & 3) << 4)
    q[:, :, 3] = (ql[:, :, 32:] >> 4) | (((qh >> 6) & 3) << 4)
    # value 128h + 32k + l uses sc[8h + 2k + l/16]: the 16-value sub-blocks in value order.
    scale = sc.reshape(B, 2, 4, 2, 1)
    vals = d[:, None, None, None, None] * scale * (q.reshape(B, 2, 4, 2, 16) - 32).astype(np.float32)
    return vals.reshape(B, 256)


_DEQUANTIZERS = {"Q8_0": _dequantize_q8_0, "Q4_0": _dequantize_q4_0, "Q4_1": _dequantize_q4_1,
                 "Q5_0": _dequantize_q5_0, "Q5_1": _dequantize_q5_1, "Q4_K": _dequantize_q4_k,
                 "Q5_K": _dequantize_q5_k, "Q6_K": _dequantize_q6_k}


# ---------------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------------

def row_bytes(type_name, n):
    block, nbytes = BLOCKS[type_name]
    if n % block:
        raise ValueError(f"row of {n} values is not a multiple of {type_name}'s block of {block}")
    return n // block * nbytes


def quantize(type_name, x, chunk_rows=None):
    """x: float array [..., n] -> uint8 [..., row_bytes(type_name, n)] in ggml's encoding of `type_name`."""
    x = np.asarray(x, dtype=np.float32)
    shape = x.shape if x.ndim else (1,)
    n = shape[-1]
    nbytes = row_bytes(type_name, n)
    rows = x.reshape(-1, n)
    if type_name == "F32":
        out = rows.astype("<f4").view(np.uint8)
    elif type_name == "F16":
        out = rows.astype("<f2").view(np.uint8)
    elif type_name == "BF16":
        out = f32_to_bf16_bits(rows).astype("<u2").view(np.uint8)
    else:
        block, block_bytes = BLOCKS[type_name]
        fn = _QUANTIZERS[type_name]
        # Bounded memory: about 1M values per call (the K searches keep several [S, 32] arrays).
        step = chunk_rows or max(1, (1 << 20) // n)
        parts = [fn(np.ascontiguousarray(rows[i:i + step]).reshape(-1, block)).reshape(-1, nbytes)
                 for i in range(0, rows.shape[0], step)]
        out = np.concatenate(parts, axis=0) if parts else np.zeros((0, nbytes), np.uint8)
    return out.reshape(tuple(shape[:-1]) + (nbytes,))


def dequantize(type_name, raw, shape):
    """raw bytes (uint8, any shape) of a tensor of numpy `shape` in `type_name` -> float32 array `shape`."""
    raw = np.ascontiguousarray(np.asarray(raw, dtype=np.uint8).reshape(-1))
    shape = tuple(shape)
    if type_name == "F32":
        return raw.view("<f4").astype(np.float32).reshape(shape)
    if type_name == "F16":
        return raw.view("<f2").astype(np.float32).reshape(shape)
    if type_name == "BF16":
        return bf16_bits_to_f32(raw.view("<u2")).reshape(shape)
    if type_name not in _DEQUANTIZERS:
        raise ValueError(f"no dequantiser for {type_name}")
    block, block_bytes = BLOCKS[type_name]
    return _DEQUANTIZERS[type_name](raw.reshape(-1, block_bytes)).reshape(shape)
