#!/usr/bin/python3
"""Self-test of the GGUF tools (numpy only, ~15 s):

  1. writer/reader round trip: every metadata value type (u8..f64, bool, string, arrays of each, string
     arrays, an empty array, a nested array), tensors of every type, alignment 32 and 64 (offsets aligned,
     padding zero), split shards (opened from any shard);
  2. quantise -> dequantise error bounds per block type, edge blocks (zeros, constants, one spike), and the
     F16/BF16 encodings (round to nearest even);
  3. tests/data/llama/bf16_gqa_rope_scaled_tied and tests/data/gguf/llama_k256_src converted and read
     back: keys, tensor names, shapes (ne reversed), q/k rows un-permuted equal the HF rows, rope_freqs, the
     Q4_K_M type mix;
  4. tests/data/deepseek/bf16_qlora_yarn (with and without --mtp) and bf16_qproj_noyarn: MLA keys,
     attn_k_b / attn_v_b reassemble kv_b_proj, stacked experts, the MTP layer;
  5. tokenizers: models/aerie-tiny-llama's tokenizer.json, and the real Llama 3.1 / DeepSeek-V3 ones when
     tools/gen/tokenizer/fetch_tokenizers.sh has put them in .cache/tokenizers (skipped otherwise);
  6. tests/data/gguf/*.gguf equal what tools/gen/gguf/make_test_data.py writes now.

Prints one line per check and ends with "N passed, M failed" (exit 1 on a failure).
"""
import os
import sys
import tempfile
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
import ggml_quantize as gq  # noqa: E402
import gguf_file as gf  # noqa: E402
import hf_to_gguf  # noqa: E402
import make_test_data  # noqa: E402
from hf_checkpoint import Checkpoint  # noqa: E402

CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def convert(model, tmp, name, *extra):
    out = os.path.join(tmp, name)
    paths = hf_to_gguf.main([os.path.join(REPO, model), "--outfile", out, "--quiet", *extra])
    return gf.GGUFModel(paths[0]), paths


# ------------------------------------------------------------------------------------------------------------
# 1. File format
# ------------------------------------------------------------------------------------------------------------

def _all_value_types(w):
    w.add_u8("t.u8", 255); w.add_i8("t.i8", -128); w.add_u16("t.u16", 65535); w.add_i16("t.i16", -32768)
    w.add_u32("t.u32", 2 ** 32 - 1); w.add_i32("t.i32", -2 ** 31); w.add_u64("t.u64", 2 ** 64 - 1)
    w.add_i64("t.i64", -2 ** 63); w.add_f32("t.f32", 0.5); w.add_f64("t.f64", 1 / 3); w.add_bool("t.bool", True)
    w.add_string("t.string", "héllo \u2581 <｜x｜>")
    for vt, items in ((gf.U8, [0, 255]), (gf.I8, [-1, 1]), (gf.U16, [1, 65535]), (gf.I16, [-5, 5]),
                      (gf.U32, [7]), (gf.I32, [-7, 3, 1]), (gf.U64, [2 ** 63]), (gf.I64, [-(2 ** 62)]),
                      (gf.F32, [1.5, -2.25]), (gf.F64, [0.1]), (gf.BOOL, [True, False, True]),
                      (gf.STRING, ["a", "", "Ġb c"])):
        w.add_array(f"t.arr.{gf.VALUE_TYPE_NAMES[vt]}", vt, items)
    w.add_array("t.arr.empty", gf.STRING, [])
    w.add_array("t.arr.nested", gf.ARRAY, [(gf.I32, [1, 2]), (gf.STRING, ["x"])])


@check
def round_trip_metadata_and_tensors():
    rng = np.random.default_rng(1)
    for alignment in (32, 64):
        w = gf.GGUFWriter(alignment=alignment)
        _all_value_types(w)
        data = {}
        for i, t in enumerate(["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K"]):
            shape = (3, 2, 256) if i % 2 else (5, 512)
            x = rng.standard_normal(shape).astype(np.float32)
            data[f"t{i}.weight"] = (t, shape, gq.quantize(t, x))
            w.add_tensor(f"t{i}.weight", shape, t, data[f"t{i}.weight"][2])
        w.add_tensor("odd.weight", (7,), "F32", np.arange(7, dtype=np.float32))  # 28 bytes: padding follows
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "a.gguf")
            w.write(path)
            r = gf.GGUFReader(path)
            expect(r.alignment == alignment and r.data_start % alignment == 0, "data section aligned")
            expect(("general.alignment" in r.kv) == (alignment != 32), "general.alignment only when not 32")
            for key, (vtype, value) in w.kv.items():
                rt, rv = r.kv[key]
                expect(rt == vtype, f"{key}: type {rt} != {vtype}")
                if vtype == gf.ARRAY:
                    expect(rv[0] == value[0] and len(rv[1]) == len(value[1]), f"{key}: array")
                    if value[0] == gf.ARRAY:
                        expect([(e, list(v)) for e, v in rv[1]] == [(e, list(v)) for e, v in value[1]], key)
                    else:
                        expect(list(rv[1]) == list(value[1]), f"{key}: {list(rv[1])} != {value[1]}")
                elif vtype in (gf.F32,):
                    expect(abs(rv - value) == 0, key)
                else:
                    expect(rv == value, f"{key}: {rv!r} != {value!r}")
            for name, (t, shape, raw) in data.items():
                info = r.tensors[name]
                expect(info.type_name == t and info.shape == shape and info.ne == list(reversed(shape)), name)
                expect(info.offset % alignment == 0, f"{name} offset aligned")
                expect(np.array_equal(np.asarray(r.tensor_bytes(name)), raw.reshape(-1)), f"{name} bytes")
            odd = r.tensors["odd.weight"]
            tail = np.asarray(r.raw[odd.data_offset + 28:])
            expect(len(tail) == (alignment - 28 % alignment) % alignment and not tail.any(), "zero tail padding")


@check
def split_round_trip():
    w = gf.GGUFWriter()
    w.add_string("general.architecture", "llama")
    for i in range(5):
        w.add_tensor(f"blk.{i}.x.weight", (2, 32), "F32", np.full((2, 32), i, np.float32))
    with tempfile.TemporaryDirectory() as tmp:
        paths = w.write_split(os.path.join(tmp, "m"), 2)
        expect([os.path.basename(p) for p in paths] == [f"m-0000{i}-of-00003.gguf" for i in (1, 2, 3)], "names")
        firsts = [gf.GGUFReader(p) for p in paths]
        for i, r in enumerate(firsts):
            expect(r.kv["split.no"] == (gf.U16, i) and r.kv["split.count"] == (gf.U16, 3), "split keys u16")
            expect(r.kv["split.tensors.count"] == (gf.I32, 5), "split.tensors.count i32")
            expect(("general.architecture" in r.kv) == (i == 0), "metadata in the first shard only")
        for p in paths:
            m = gf.GGUFModel(p)
            expect(list(m.tensors) == [f"blk.{i}.x.weight" for i in range(5)], "all shards opened")
            expect(all((m.tensor(f"blk.{i}.x.weight") == i).all() for i in range(5)), "shard tensor data")


@check
def reader_rejects_bad_files():
    with tempfile.TemporaryDirectory() as tmp:
        w = gf.GGUFWriter()
        w.add_array("a", gf.STRING, ["x"] * 3)
        w.add_tensor("t.weight", (4, 32), "Q8_0", np.zeros((4, 34), np.uint8))
        good = os.path.join(tmp, "g.gguf")
        w.write(good)
        raw = open(good, "rb").read()
        cases = {"truncated": raw[:-40], "magic": b"GGUX" + raw[4:], "version": raw[:4] + b"\2\0\0\0" + raw[8:],
                 "huge array": raw.replace(b"\x03\0\0\0\0\0\0\0", b"\0\0\0\0\0\x01\0\0", 1)}
        for what, data in cases.items():
            bad = os.path.join(tmp, "b.gguf")
            open(bad, "wb").write(data)
            try:
                gf.GGUFReader(bad)
            except gf.GGUFError:
                continue
            raise AssertionError(f"{what}: accepted")


# ------------------------------------------------------------------------------------------------------------
# 2. Quantisation
# ------------------------------------------------------------------------------------------------------------

# Relative RMS error (to the data's RMS) on N(0, 1) rows; ggml's reference quantisers give about
# Q8_0 0.0056, Q6_K 0.018, Q5_K 0.036, Q4_0 0.10, Q4_K 0.072.
ERROR_BOUNDS = {"Q8_0": 0.008, "Q6_K": 0.025, "Q5_K": 0.05, "Q4_K": 0.09, "Q4_0": 0.12, "Q4_1": 0.12, "Q5_0": 0.06,
                "Q5_1": 0.06, "F16": 5e-4, "BF16": 4e-3}


@check
def quantisation_error_bounds():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((512, 1024)).astype(np.float32)
    for t, bound in ERROR_BOUNDS.items():
        raw = gq.quantize(t, x)
        expect(raw.shape == (512, gq.row_bytes(t, 1024)), f"{t} shape")
        y = gq.dequantize(t, raw, x.shape)
        rel = float(np.sqrt(np.mean((y - x) ** 2)))
        expect(rel < bound, f"{t}: relative RMS error {rel:.4f} >= {bound}")
        # blockwise: every block's max error within its own scale
        block = gq.BLOCKS[t][0]
        err = np.abs(y - x).reshape(-1, block).max(axis=1)
        amax = np.abs(x).reshape(-1, block).max(axis=1)
        levels = {"Q8_0": 127, "Q6_K": 31, "Q5_K": 15.5, "Q4_K": 7.5, "Q4_0": 7.5, "Q4_1": 3.75, "Q5_0": 15.5,
                  "Q5_1": 7.75, "F16": 1024, "BF16": 128}[t]
        expect((err <= amax / levels * 1.5 + 1e-6).all(), f"{t}: a block's error exceeds 1.5 steps")
        print(f"    {t}: relative RMS error {rel:.4f}")


@check
def quantisation_edge_blocks():
    x = np.zeros((6, 256), np.float32)
    x[1] = 0.25                               # constant positive
    x[2] = -3.0                               # constant negative
    x[3, 17] = 100.0                          # one spike
    x[4] = np.linspace(-1, 1, 256)
    x[5, ::2] = 1e-30                         # denormal-ish
    for t in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"):
        y = gq.dequantize(t, gq.quantize(t, x), x.shape)
        expect(np.isfinite(y).all(), f"{t}: finite")
        expect((y[0] == 0).all(), f"{t}: zeros stay zero")
        expect(np.abs(y[3, 17] - 100) < 100 * 0.06, f"{t}: spike kept ({y[3, 17]})")
        expect(np.abs(y[4] - x[4]).max() < 0.15, f"{t}: ramp")
        tol = {"Q8_0": 0.01, "Q6_K": 0.02, "Q5_K": 0.05, "Q4_K": 0.1, "Q4_0": 0.15, "Q4_1": 0.15, "Q5_0": 0.08,
               "Q5_1": 0.08}[t]
        expect(np.abs(y[1:3] - x[1:3]).max() <= np.abs(x[1:3]).max() * tol, f"{t}: constant blocks")


@check
def float_encodings():
    x = np.array([1.0, -2.5, 65504.0, 1e-8, 3.0e38, np.inf, 1 + 2 ** -8, 1 + 3 * 2 ** -8], np.float32)
    bits = gq.f32_to_bf16_bits(x)
    expect(list(bits[:2]) == [0x3F80, 0xC020], "bf16 exact values")
    expect(bits[6] == 0x3F80 and bits[7] == 0x3F82, "bf16 rounds half to even")
    expect(np.isnan(gq.bf16_bits_to_f32(gq.f32_to_bf16_bits(np.array([np.nan], np.float32))))[0], "bf16 NaN")
    f16 = gq.dequantize("F16", gq.quantize("F16", x[:3]), (3,))
    expect(np.array_equal(f16, x[:3]), "f16 exact values")


# ------------------------------------------------------------------------------------------------------------
# 3. Llama conversion
# ------------------------------------------------------------------------------------------------------------

LLAMA_LAYER = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
               "ffn_down"]


def _rope_factors_f64(cfg):
    rope = cfg["rope_scaling"]
    dim = cfg["head_dim"]
    out = []
    for i in range(0, dim, 2):
        wavelen = 2 * np.pi * cfg["rope_theta"] ** (i / dim)
        old, lo, hi, factor = (rope["original_max_position_embeddings"], rope["low_freq_factor"],
                               rope["high_freq_factor"], rope["factor"])
        if wavelen < old / hi:
            out.append(1.0)
        elif wavelen > old / lo:
            out.append(factor)
        else:
            s = (old / wavelen - lo) / (hi - lo)
            out.append(1 / ((1 - s) / factor + s))
    return np.array(out)


def _check_llama(model, m, ckpt, exact):
    cfg = ckpt.config
    n_layer, n_head, n_kv = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    names = {"token_embd.weight", "output_norm.weight", "rope_freqs.weight"}
    names |= {f"blk.{i}.{t}.weight" for i in range(n_layer) for t in LLAMA_LAYER}
    if not cfg.get("tie_word_embeddings"):
        names.add("output.weight")
    expect(set(m.tensors) == names, f"tensor names: {sorted(set(m.tensors) ^ names)}")
    expect(m.get("general.architecture") == "llama", "architecture")
    for key, want in (("llama.block_count", n_layer), ("llama.embedding_length", cfg["hidden_size"]),
                      ("llama.feed_forward_length", cfg["intermediate_size"]), ("llama.attention.head_count", n_head),
                      ("llama.attention.head_count_kv", n_kv), ("llama.rope.dimension_count", cfg["head_dim"]),
                      ("llama.context_length", cfg["max_position_embeddings"]), ("llama.vocab_size", cfg["vocab_size"]),
                      ("tokenizer.ggml.bos_token_id", cfg["bos_token_id"])):
        expect(m.get(key) == want, f"{key} = {m.get(key)}, expected {want}")
    expect(abs(m.get("llama.rope.freq_base") - cfg["rope_theta"]) < 1e-3, "rope.freq_base")
    expect(m.files[0].value_type("llama.block_count") == (gf.U32, None), "u32 keys")
    expect(m.files[0].value_type("tokenizer.ggml.token_type") == (gf.ARRAY, gf.I32), "token_type i32[]")
    expect(len(m.get("tokenizer.ggml.tokens")) == cfg["vocab_size"], "token count")
    expect(np.allclose(m.tensor("rope_freqs.weight"), _rope_factors_f64(cfg), rtol=1e-5), "rope_freqs")
    hf = {"token_embd.weight": "model.embed_tokens.weight", "output.weight": "lm_head.weight"}
    for name, info in m.tensors.items():
        parts = name.split(".")
        if name == "rope_freqs.weight" or name == "output_norm.weight":
            continue
        if name in hf:
            src = ckpt.get(hf[name])
        else:
            hf_part = {v: k for k, v in hf_to_gguf.LLAMA_LAYER_NAMES.items()}[parts[2]]
            src = ckpt.get(f"model.layers.{parts[1]}.{hf_part}.weight")
        expect(info.ne == list(reversed(src.shape)), f"{name}: ne {info.ne} for HF shape {src.shape}")
        got = m.tensor(name)
        if parts[-2] in ("attn_q", "attn_k"):
            got = hf_to_gguf.unpermute_rotate_half(got, n_head if parts[-2] == "attn_q" else n_kv)
            if exact:  # the permutation itself moves rows: it must not equal the identity
                expect(not np.array_equal(m.tensor(name), src), f"{name}: not permuted")
        if exact:
            expect(np.array_equal(got, src), f"{name}: values differ from {model}")
        else:
            rel = np.sqrt(np.mean((got - src) ** 2) / np.mean(src ** 2))
            expect(rel < 0.1, f"{name}: relative error {rel:.3f}")


@check
def llama_small_f32_and_bf16():
    model = "tests/data/llama/bf16_gqa_rope_scaled_tied"
    ckpt = Checkpoint(os.path.join(REPO, model))
    with tempfile.TemporaryDirectory() as tmp:
        for outtype in ("f32", "bf16"):
            m, _ = convert(model, tmp, f"{outtype}.gguf", "--outtype", outtype)
            _check_llama(model, m, ckpt, exact=True)
        m, _ = convert(model, tmp, "q8.gguf", "--outtype", "q8_0")
        _check_llama(model, m, ckpt, exact=False)
        m, paths = convert(model, tmp, "split.gguf", "--outtype", "f32", "--split-max-tensors", "8")
        expect(len(paths) == 3 and len(m.files) == 3, "3 shards")
        _check_llama(model, m, ckpt, exact=True)


@check
def llama_k256_type_mix():
    model = "tests/data/gguf/llama_k256_src"
    ckpt = Checkpoint(os.path.join(REPO, model))
    want = {  # llama-quantize's choices for this 2-layer untied model
        "q4_k_m": {"token_embd": "Q4_K", "output": "Q6_K", "blk.0.attn_v": "Q4_K", "blk.1.attn_v": "Q6_K",
                   "blk.0.ffn_down": "Q4_K", "blk.1.ffn_down": "Q6_K", "blk.0.attn_q": "Q4_K"},
        "q5_k_m": {"token_embd": "Q5_K", "output": "Q6_K", "blk.1.attn_v": "Q6_K", "blk.0.ffn_down": "Q5_K"},
        "q6_k": {"token_embd": "Q6_K", "output": "Q6_K", "blk.0.ffn_up": "Q6_K"},
        "q4_0": {"token_embd": "Q4_0", "output": "Q6_K", "blk.1.ffn_down": "Q4_0"},
        "q8_0": {"token_embd": "Q8_0", "output": "Q8_0"},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for outtype, types in want.items():
            m, _ = convert(model, tmp, f"{outtype}.gguf", "--outtype", outtype)
            for name, t in types.items():
                got = m.tensors[name + ".weight"].type_name
                expect(got == t, f"{outtype}: {name} is {got}, expected {t}")
            expect(m.tensors["blk.0.attn_norm.weight"].type_name == "F32", "norms F32")
            expect(m.get("general.file_type") == hf_to_gguf.quant_mix.OUTTYPES[outtype][0], "file_type")
            _check_llama(model, m, ckpt, exact=False)


@check
def quant_mix_fallback_is_llama_quantize_s():
    fb = hf_to_gguf.quant_mix.fallback
    for t, row, want in (("Q4_K", 256, "Q4_K"), ("Q4_K", 96, "Q5_0"), ("Q5_K", 128, "Q5_1"), ("Q6_K", 64, "Q8_0"),
                         ("Q4_0", 64, "Q4_0"), ("Q4_K", 48, "F16"), ("Q4_0", 40, "F16")):
        expect(fb(t, row) == want, f"{t} row {row}: {fb(t, row)}, expected {want}")


# ------------------------------------------------------------------------------------------------------------
# 4. DeepSeek conversion
# ------------------------------------------------------------------------------------------------------------

def _check_deepseek(m, ckpt, mtp):
    cfg = ckpt.config
    n_layer = cfg["num_hidden_layers"]
    a = "deepseek2"
    kv_lora, nope, rope, v = cfg["kv_lora_rank"], cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    n_head, n_expert = cfg["num_attention_heads"], cfg["n_routed_experts"]
    keys = {f"{a}.block_count": n_layer + (1 if mtp else 0), f"{a}.attention.head_count_kv": 1,
            f"{a}.attention.kv_lora_rank": kv_lora, f"{a}.attention.key_length": kv_lora + rope,
            f"{a}.attention.value_length": kv_lora, f"{a}.attention.key_length_mla": nope + rope,
            f"{a}.attention.value_length_mla": v, f"{a}.rope.dimension_count": rope,
            f"{a}.leading_dense_block_count": cfg["first_k_dense_replace"], f"{a}.expert_count": n_expert,
            f"{a}.expert_used_count": cfg["num_experts_per_tok"], f"{a}.expert_shared_count": cfg["n_shared_experts"],
            f"{a}.expert_feed_forward_length": cfg["moe_intermediate_size"], f"{a}.expert_gating_func": 2,
            f"{a}.expert_group_count": cfg["n_group"], f"{a}.expert_group_used_count": cfg["topk_group"],
            "tokenizer.ggml.pre": "deepseek-v3"}
    keys[f"{a}.attention.q_lora_rank"] = cfg.get("q_lora_rank") or 0
    for key, want in keys.items():
        expect(m.get(key) == want, f"{key} = {m.get(key)}, expected {want}")
    expect((f"{a}.nextn_predict_layers" in m.kv) == mtp, "nextn_predict_layers only with --mtp")
    if cfg.get("rope_scaling"):
        expect(m.get(f"{a}.rope.scaling.type") == "yarn", "yarn")
        expect(abs(m.get(f"{a}.rope.scaling.yarn_log_multiplier") - 0.1 * cfg["rope_scaling"]["mscale_all_dim"]) < 1e-7,
               "yarn_log_multiplier")
    for layer in range(n_layer + (1 if mtp else 0)):
        kv_b = ckpt.get(f"model.layers.{layer}.self_attn.kv_b_proj.weight").reshape(n_head, nope + v, kv_lora)
        k_b, v_b = m.tensor(f"blk.{layer}.attn_k_b.weight"), m.tensor(f"blk.{layer}.attn_v_b.weight")
        expect(m.tensors[f"blk.{layer}.attn_k_b.weight"].ne == [nope, kv_lora, n_head], "attn_k_b ne")
        expect(m.tensors[f"blk.{layer}.attn_v_b.weight"].ne == [kv_lora, v, n_head], "attn_v_b ne")
        expect(np.array_equal(np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1), kv_b), "k_b/v_b = kv_b")
        if layer >= cfg["first_k_dense_replace"]:
            for proj in ("gate", "up", "down"):
                t = m.tensor(f"blk.{layer}.ffn_{proj}_exps.weight")
                ref = np.stack([ckpt.get(f"model.layers.{layer}.mlp.experts.{e}.{proj}_proj.weight")
                                for e in range(n_expert)])
                expect(np.array_equal(t, ref), f"blk.{layer}.ffn_{proj}_exps")
            expect(m.tensors[f"blk.{layer}.ffn_gate_exps.weight"].ne == [cfg["hidden_size"],
                   cfg["moe_intermediate_size"], n_expert], "ffn_gate_exps ne")
            expect(m.tensors[f"blk.{layer}.ffn_gate_inp.weight"].type_name == "F32", "router F32")
            expect(np.array_equal(m.tensor(f"blk.{layer}.exp_probs_b.bias"),
                                  ckpt.get(f"model.layers.{layer}.mlp.gate.e_score_correction_bias")), "exp_probs_b")
        else:
            expect(f"blk.{layer}.ffn_gate.weight" in m.tensors, "dense leading layer")
    has_mtp = any(f"blk.{n_layer}." in n for n in m.tensors)
    expect(has_mtp == mtp, "MTP layer present only with --mtp")
    if mtp:
        expect(np.array_equal(m.tensor(f"blk.{n_layer}.nextn.eh_proj.weight"),
                              ckpt.get(f"model.layers.{n_layer}.eh_proj.weight")), "nextn.eh_proj")
        expect(f"blk.{n_layer}.nextn.shared_head_head.weight" in m.tensors, "nextn.shared_head_head")


@check
def deepseek_conversion():
    with tempfile.TemporaryDirectory() as tmp:
        for model in ("tests/data/deepseek/bf16_qlora_yarn", "tests/data/deepseek/bf16_qproj_noyarn"):
            ckpt = Checkpoint(os.path.join(REPO, model))
            for mtp in ((False, True) if ckpt.config.get("num_nextn_predict_layers") else (False,)):
                m, _ = convert(model, tmp, "ds.gguf", "--outtype", "f32", *(["--mtp"] if mtp else []))
                _check_deepseek(m, ckpt, mtp)
        m, _ = convert("tests/data/deepseek/fp8_qlora_yarn", tmp, "fp8.gguf", "--outtype", "f32")
        twin = Checkpoint(os.path.join(REPO, "tests/data/deepseek/fp8_qlora_yarn_dequant"))
        expect(np.array_equal(m.tensor("blk.1.attn_q_b.weight"), twin.get("model.layers.1.self_attn.q_b_proj.weight")),
               "FP8 tiles dequantised as the BF16 twin")


def _write_safetensors_f32(path, tensors):
    import json
    header, offset = {}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(np.uint64(len(text)).tobytes() + text)
        for t in tensors.values():
            f.write(np.ascontiguousarray(t, dtype="<f4").tobytes())


@check
def deepseek_rope_interleave_false():
    """A checkpoint whose q / kv_a rope rows are in rotate-half order with rope_interleave: false must convert
    to the same GGUF tensors as its interleaved twin."""
    import json
    src = os.path.join(REPO, "tests/data/deepseek/bf16_qlora_yarn")
    ckpt = Checkpoint(src)
    cfg = dict(ckpt.config, rope_interleave=False)
    nope, rope, kv_lora = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["kv_lora_rank"]
    tensors = {}
    for name in ckpt.names():
        t = ckpt.get(name)
        block = {"q_b_proj": nope + rope, "kv_a_proj_with_mqa": kv_lora + rope}.get(name.split(".")[-2])
        if block:  # adjacent pairs -> rotate-half, per block of rows
            v = t.reshape(-1, block, t.shape[-1]).copy()
            r = v[:, block - rope:]
            rows = hf_to_gguf.unpermute_rotate_half(r.reshape(-1, t.shape[-1]), v.shape[0])
            v[:, block - rope:] = rows.reshape(r.shape)
            t = v.reshape(t.shape)
        tensors[name] = t
    with tempfile.TemporaryDirectory() as tmp:
        twin = os.path.join(tmp, "twin")
        os.makedirs(twin)
        json.dump(cfg, open(os.path.join(twin, "config.json"), "w"))
        _write_safetensors_f32(os.path.join(twin, "model.safetensors"), tensors)
        a, _ = convert(src, tmp, "a.gguf", "--outtype", "f32")
        b, _ = convert(twin, tmp, "b.gguf", "--outtype", "f32")
        expect(list(a.tensors) == list(b.tensors), "same tensors")
        for name in a.tensors:
            expect(np.array_equal(a.tensor(name), b.tensor(name)), f"{name} differs")
        moved = tensors["model.layers.0.self_attn.q_b_proj.weight"]
        expect(not np.array_equal(moved, ckpt.get("model.layers.0.self_attn.q_b_proj.weight")), "rows moved")


# ------------------------------------------------------------------------------------------------------------
# 5. Tokenizers
# ------------------------------------------------------------------------------------------------------------

@check
def tokenizer_trained_model():
    import json
    model = "models/aerie-tiny-llama"
    tok = json.load(open(os.path.join(REPO, model, "tokenizer.json"), encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        m, _ = convert(model, tmp, "tok.gguf", "--vocab-only")
        expect(not m.tensors, "vocab only")
        tokens, types = list(m.get("tokenizer.ggml.tokens")), list(m.get("tokenizer.ggml.token_type"))
        expect(m.get("tokenizer.ggml.pre") == "llama-bpe", "pre detected")
        for text, i in tok["model"]["vocab"].items():
            expect(tokens[i] == text and types[i] == 1, f"token {i}")
        for added in tok["added_tokens"]:
            expect(tokens[added["id"]] == added["content"] and types[added["id"]] == 3, "added tokens CONTROL")
        expect(list(m.get("tokenizer.ggml.merges")) == tok["model"]["merges"], "merges")
        expect(m.get("tokenizer.ggml.bos_token_id") == 6128 and m.get("tokenizer.ggml.eos_token_id") == 6129, "bos/eos")
        expect(m.get("tokenizer.ggml.add_bos_token") is True, "add_bos from TemplateProcessing")


@check
def tokenizer_real_llama3_and_deepseek3():
    cache = os.path.join(REPO, ".cache/tokenizers")
    if not os.path.exists(os.path.join(cache, "llama3_1/tokenizer.json")):
        print("    skipped: run tools/gen/tokenizer/fetch_tokenizers.sh for .cache/tokenizers")
        return
    import hf_tokenizer
    for name, vocab, pre, bos, eos in (("llama3_1", 128256, "llama-bpe", 128000, 128009),
                                       ("deepseek_v3", 129280, "deepseek-v3", 0, 1)):
        tok, tok_config, folder = hf_tokenizer.load_tokenizer(os.path.join(cache, name))
        keys = {k: v for k, _, v in hf_tokenizer.tokenizer_keys(tok, tok_config, folder, {}, vocab)}
        tokens, types = keys["tokenizer.ggml.tokens"][1], keys["tokenizer.ggml.token_type"][1]
        expect(keys["tokenizer.ggml.pre"] == pre, f"{name}: pre")
        expect(len(tokens) == vocab and keys["tokenizer.ggml.bos_token_id"] == bos, f"{name}: size/bos")
        expect(keys["tokenizer.ggml.eos_token_id"] == eos, f"{name}: eos {keys['tokenizer.ggml.eos_token_id']}")
        expect(isinstance(keys.get("tokenizer.chat_template"), str), f"{name}: chat template")
        expect(len(keys["tokenizer.ggml.merges"][1]) == len(tok["model"]["merges"]), f"{name}: merges")
        if name == "deepseek_v3":
            expect(tokens[128900] == "[PAD128900]" and types[128900] == 5, "holes are [PAD{id}] UNUSED")
            expect(types[128803] == 3, "<｜User｜> (special: false) looks special: CONTROL")
            expect(keys["tokenizer.ggml.add_bos_token"] is True and keys["tokenizer.ggml.add_eos_token"] is False,
                   "add_bos/add_eos from tokenizer_config")
            expect(keys["tokenizer.ggml.padding_token_id"] == 1, "pad")
        print(f"    {name}: {vocab} tokens, {len(keys['tokenizer.ggml.merges'][1])} merges, "
              f"{sum(1 for t in types if t == 3)} control")


# ------------------------------------------------------------------------------------------------------------
# 6. Committed test files
# ------------------------------------------------------------------------------------------------------------

@check
def committed_test_files_are_current():
    committed = os.path.join(REPO, "tests/data/gguf")
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_test_data.generate(tmp)
        for path in paths:
            name = os.path.basename(path)
            mine = os.path.join(committed, name)
            expect(os.path.exists(mine), f"tests/data/gguf/{name} missing")
            expect(open(mine, "rb").read() == open(path, "rb").read(), f"tests/data/gguf/{name} differs")


def main():
    passed = failed = 0
    for fn in CHECKS:
        try:
            fn()
            print(f"ok   {fn.__name__}")
            passed += 1
        except Exception:  # noqa: BLE001 -- report every failure, keep going
            print(f"FAIL {fn.__name__}")
            traceback.print_exc()
            failed += 1
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
