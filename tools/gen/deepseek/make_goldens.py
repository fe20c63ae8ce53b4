#!/usr/bin/python3
"""Regenerates tests/data/deepseek/ deterministically: a tiny random DeepSeek-V3 checkpoint per case
(tools/gen/deepseek/make_deepseek_checkpoint.py) and the reference figures the C++ tests compare against,
computed by deepseek_ref.py in float64 from the stored weights (FP8 dequantised exactly):
  golden.json        {"ids", "greedy" (16 tokens), "greedy_margins", "min_margin", "max_abs_logit",
                      "min_router_gap", "checkpoint_command", "checks", and for MTP cases "mtp_tokens"}
  logits.npy         float32 [n_prompt, n_vocab], every prompt position
  hidden_<i>.npy     float32 [n_prompt, n_embd], residual stream entering layer i, i = 0..n_layer
  hidden_final_norm.npy
  mtp_logits.npy     (MTP cases) float32 [n_prompt, n_vocab]: row t = the MTP layer's logits from target
                     hidden_final_norm[t] and token t+1 of ids + [greedy[0]], at position t
and router_cases.json (hand-made router inputs and their expected selections).
Each case's seed is the first from its listed seed whose greedy run has at least MIN_DISTINCT distinct
tokens, no eos token, every top1 - top2 margin at least MIN_RELATIVE_MARGIN of the largest |logit|, and
every router decision (prompt + greedy run, MTP included) decided by at least MIN_ROUTER_GAP (so a float32
port cannot route a token differently).

  make_goldens.py [--out tests/data/deepseek] [--case NAME ...]
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
import deepseek_ref as ref  # noqa: E402

N_GREEDY = 16
MIN_DISTINCT = 8
MIN_RELATIVE_MARGIN = 0.01
MIN_ROUTER_GAP = 2e-3
MAX_SEED_TRIES = 60

# Shared by every case: 8 experts in 4 groups, keep 2 groups, 2 experts per token; MLA nope 16 / rope 8 /
# v 16; gain 2 and embed std 0.5 (sharp attention, clear greedy margins); router gain 4, bias std 0.1.
BASE = "--num-heads 4 --qk-nope-head-dim 16 --qk-rope-head-dim 8 --v-head-dim 16 --n-routed-experts 8 " \
       "--n-group 4 --topk-group 2 --num-experts-per-tok 2 --moe-intermediate-size 16 --init-gain 2.0 " \
       "--embed-std 0.5 --gate-gain 4.0 --bias-std 0.1 --bos-token-id 0 --eos-token-id 1"
YARN = "--yarn --rope-theta 10000 --yarn-factor 40 --yarn-original-max-pos 4096 --yarn-beta-fast 32 " \
       "--yarn-beta-slow 1"
IDS_192 = [0, 17, 143, 96, 5, 128, 77, 31, 190, 64, 9, 150]
CASES = {
    # q_lora, YaRN (factor 40, original 4096, mscale = mscale_all_dim = 1 as DeepSeek-V3: of the 4 rope
    # frequencies 2 kept, 1 blended, 1 divided), dense layer 0 then MoE, 1 shared expert, the MTP layer.
    "bf16_qlora_yarn": dict(seed=100, ids=IDS_192, args=(
        BASE + " " + YARN + " --yarn-mscale 1.0 --yarn-mscale-all-dim 1.0 --bf16 --hidden-size 48"
        " --vocab-size 192 --num-layers 3 --q-lora-rank 24 --kv-lora-rank 24 --intermediate-size 96"
        " --first-k-dense-replace 1 --moe-layer-freq 1 --n-shared-experts 1 --norm-topk-prob"
        " --routed-scaling-factor 2.5 --mtp 1")),
    # q_lora_rank null (plain q_proj), rope_scaling null, rope_interleave written out as true, no MTP.
    "bf16_qproj_noyarn": dict(seed=200, ids=[0, 250, 3, 47, 47, 180, 12, 99, 222, 8, 61, 140], args=(
        BASE + " --bf16 --no-yarn --rope-theta 10000 --rope-interleave true --hidden-size 64"
        " --vocab-size 256 --num-layers 3 --q-lora-rank 0 --kv-lora-rank 32 --intermediate-size 96"
        " --first-k-dense-replace 1 --moe-layer-freq 1 --n-shared-experts 1 --norm-topk-prob"
        " --routed-scaling-factor 2.5 --mtp 0")),
    # FP8 block weights; 6 heads and intermediate 144 give multi-tile scales with partial edge tiles
    # (q_b_proj [144, 32] -> scale [2, 1], kv_b_proj [192, 32] -> [2, 1], mlp.down_proj [64, 144] -> [1, 2]).
    "fp8_qlora_yarn": dict(seed=300, ids=IDS_192, twin="fp8_qlora_yarn_dequant", args=(
        BASE + " " + YARN + " --yarn-mscale 1.0 --yarn-mscale-all-dim 1.0 --fp8 --hidden-size 64"
        " --num-heads 6 --vocab-size 192 --num-layers 3 --q-lora-rank 32 --kv-lora-rank 32"
        " --intermediate-size 144 --first-k-dense-replace 1 --moe-layer-freq 1 --n-shared-experts 1"
        " --norm-topk-prob --routed-scaling-factor 2.5 --mtp 0")),
    # moe_layer_freq 2 (layers 0, 1, 3 dense, 2 MoE), 2 shared experts, norm_topk_prob false, scaling 1.5,
    # YaRN with mscale 1 != mscale_all_dim 0.8 (cos/sin scaled by 1.0588), rope_interleave false
    # (half-split pairs), two shards with an index.
    "bf16_moe_freq2_sharded": dict(seed=400, ids=[0, 2, 250, 125, 60, 30, 15, 7, 190, 95, 47, 23], args=(
        BASE + " " + YARN + " --yarn-mscale 1.0 --yarn-mscale-all-dim 0.8 --bf16 --rope-interleave false"
        " --hidden-size 48 --vocab-size 256 --num-layers 4 --q-lora-rank 32 --kv-lora-rank 32"
        " --intermediate-size 64 --first-k-dense-replace 1 --moe-layer-freq 2 --n-shared-experts 2"
        " --no-norm-topk-prob --routed-scaling-factor 1.5 --mtp 0 --shards 2")),
}


def make_checkpoint(folder, args, seed, extra=""):
    shutil.rmtree(folder, ignore_errors=True)
    cmd = ["tools/gen/deepseek/make_deepseek_checkpoint.py", "--out", os.path.relpath(folder, ROOT), "--seed", str(seed)]
    cmd += (args + " " + extra).split()
    subprocess.run(["/usr/bin/python3"] + cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return " ".join(cmd)


def evaluate(folder, ids):
    """(model, tokens, margins, max |logit|, min router gap) or None when routing is not clean."""
    model = ref.DeepseekRef(folder)
    model.route_gaps = []
    try:
        tokens, margins = ref.greedy(model, ids, N_GREEDY)
        logits, hidden = ref.forward(model, ids + tokens)
        if model.n_mtp:
            ref.mtp_forward(model, ids + tokens, hidden[ref.FINAL_NORM])
    except ValueError as e:  # a selected expert with biased score <= 0
        print(f"  {folder}: {e}")
        return None
    gap = min(model.route_gaps)
    model.route_gaps = None
    return model, tokens, margins, float(logits.abs().max()), gap


def pick_seed(folder, case):
    for seed in range(case["seed"], case["seed"] + MAX_SEED_TRIES):
        command = make_checkpoint(folder, case["args"], seed)
        result = evaluate(folder, case["ids"])
        if result is None:
            continue
        model, tokens, margins, scale, gap = result
        eos = model.config["eos_token_id"]
        eos = set(eos) if isinstance(eos, list) else {eos}
        if (len(set(tokens)) >= MIN_DISTINCT and min(margins) >= MIN_RELATIVE_MARGIN * scale
                and not eos & set(tokens) and gap >= MIN_ROUTER_GAP):
            return seed, command, model, tokens, margins, scale, gap
    raise SystemExit(f"{folder}: no acceptable seed in {MAX_SEED_TRIES} tries")


# ---- cross-checks: a second formulation of each piece, written differently -------------------------

def inv_freq_loop(c):
    """YaRN inverse frequencies in float64 per frequency (python floats), written from the formula."""
    d, theta, r = c["qk_rope_head_dim"], float(c["rope_theta"]), c.get("rope_scaling")
    out = []
    for j in range(d // 2):
        f = theta ** (-2.0 * j / d)
        if r is not None:
            def cdim(rot):
                return d * math.log(r["original_max_position_embeddings"] / (rot * 2 * math.pi)) / (2 * math.log(theta))
            lo, hi = max(math.floor(cdim(r["beta_fast"])), 0), min(math.ceil(cdim(r["beta_slow"])), d - 1)
            hi = hi + 0.001 if hi == lo else hi
            ramp = min(max((j - lo) / (hi - lo), 0.0), 1.0)  # 0: extrapolate (keep), 1: interpolate
            f = f * (1 - ramp) + f / r["factor"] * ramp
        out.append(f)
    return torch.tensor(out, dtype=torch.float64)


def hf_style_rope(x, pos, inv_freq, mscale, interleave):
    """x [rope] at one position: transformers' way (de-interleave when interleaved, then rotate_half with
    cos/sin of cat(freqs, freqs)). Returns the permuted layout transformers produces."""
    d = x.shape[0]
    if interleave:
        x = x.view(d // 2, 2).transpose(0, 1).reshape(d)
    ang = torch.cat([pos * inv_freq, pos * inv_freq]).double()
    cos, sin = ang.cos() * mscale, ang.sin() * mscale
    rot = torch.cat([-x[d // 2:], x[:d // 2]])
    return x * cos + rot * sin


def hf_router(logits, bias, c):
    """transformers' DeepseekV3TopkRouter with torch.topk and 0.0 fill (float64)."""
    scores = logits.sigmoid()
    choice = scores + bias
    g = c["n_group"]
    per = choice.shape[-1] // g
    group_scores = choice.view(g, per).topk(2, dim=-1)[0].sum(-1)
    keep = torch.zeros(g, dtype=torch.bool)
    keep[group_scores.topk(c["topk_group"])[1]] = True
    masked = choice.masked_fill(~keep.repeat_interleave(per), 0.0)
    idx = masked.topk(c["num_experts_per_tok"])[1]
    w = scores[idx]
    if c["norm_topk_prob"]:
        w = w / (w.sum() + 1e-20)
    order = idx.argsort()
    return idx[order].tolist(), (w * c["routed_scaling_factor"])[order]


def forward_loops(m, ids):
    """logits by loops: per head and query over keys 0..t, transformers-style RoPE, routing by hf_router."""
    c, n = m.config, len(ids)
    inv = m.inv_freq
    x = torch.stack([m.t("model.embed_tokens.weight")[t] for t in ids])
    for i in range(m.n_layer):
        pre = f"model.layers.{i}."
        h = ref.rms_norm(x, m.t(pre + "input_layernorm.weight"), m.eps)
        if m.q_lora:
            q = ref.rms_norm(h @ m.t(pre + "self_attn.q_a_proj.weight").T,
                             m.t(pre + "self_attn.q_a_layernorm.weight"), m.eps) @ m.t(pre + "self_attn.q_b_proj.weight").T
        else:
            q = h @ m.t(pre + "self_attn.q_proj.weight").T
        kva = h @ m.t(pre + "self_attn.kv_a_proj_with_mqa.weight").T
        kv = ref.rms_norm(kva[:, :m.kv_lora], m.t(pre + "self_attn.kv_a_layernorm.weight"), m.eps) @ \
            m.t(pre + "self_attn.kv_b_proj.weight").T
        qk, kvd = m.nope + m.rope, m.nope + m.v_dim
        out = torch.zeros(n, m.n_head * m.v_dim, dtype=torch.float64)
        for hd in range(m.n_head):
            for t in range(n):
                qt = q[t, hd * qk:(hd + 1) * qk]
                qr = hf_style_rope(qt[m.nope:], float(t), inv, m.rope_mscale, m.interleave)
                sc = []
                for s in range(t + 1):
                    kr = hf_style_rope(kva[s, m.kv_lora:], float(s), inv, m.rope_mscale, m.interleave)
                    kn = kv[s, hd * kvd:hd * kvd + m.nope]
                    sc.append((qt[:m.nope].dot(kn) + qr.dot(kr)) * m.softmax_scale)
                p = torch.softmax(torch.stack(sc), 0)
                out[t, hd * m.v_dim:(hd + 1) * m.v_dim] = sum(
                    p[s] * kv[s, hd * kvd + m.nope:(hd + 1) * kvd] for s in range(t + 1))
        x = x + out @ m.t(pre + "self_attn.o_proj.weight").T
        h = ref.rms_norm(x, m.t(pre + "post_attention_layernorm.weight"), m.eps)

        def mlp(p, v):
            g = v @ m.t(p + "gate_proj.weight").T
            return (g / (1 + torch.exp(-g)) * (v @ m.t(p + "up_proj.weight").T)) @ m.t(p + "down_proj.weight").T
        if m.is_moe(i):
            y = torch.zeros_like(h)
            for t in range(n):
                idx, w = hf_router(h[t] @ m.t(pre + "mlp.gate.weight").T, m.t(pre + "mlp.gate.e_score_correction_bias"), c)
                for e, wt in zip(idx, w):
                    y[t] += wt * mlp(f"{pre}mlp.experts.{e}.", h[t:t + 1])[0]
            if c.get("n_shared_experts"):
                y = y + mlp(pre + "mlp.shared_experts.", h)
        else:
            y = mlp(pre + "mlp.", h)
        x = x + y
    return ref.rms_norm(x, m.t("model.norm.weight"), m.eps) @ m.t("lm_head.weight").T


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


def checks(m, ids):
    c = m.config
    logits, hidden = ref.forward(m, ids)
    absorbed, _ = ref.forward(m, ids, absorbed=True)
    figures = {
        "yarn": ref.yarn_kinds(c),
        "yarn_cos_sin_mscale": m.rope_mscale,
        "softmax_scale": m.softmax_scale,
        "inv_freq_loop_vs_ref": rel(m.inv_freq.double(), inv_freq_loop(c)),
        "absorbed_vs_expanded": rel(absorbed, logits),
        "loops_vs_batched": rel(forward_loops(m, ids), logits),
    }
    prefix = [rel(ref.forward(m, ids[:t + 1])[0][-1], logits[t]) for t in (3, 7)]
    figures["causal_prefix"] = max(prefix)
    figures["moe_layers"] = [i for i in range(m.n_layer + m.n_mtp) if m.is_moe(i)]
    assert figures["inv_freq_loop_vs_ref"] < 1e-6 and figures["absorbed_vs_expanded"] < 1e-10, figures
    assert figures["loops_vs_batched"] < 1e-6 and figures["causal_prefix"] < 1e-10, figures
    return figures, logits, hidden


def write_arrays(folder, logits, hidden):
    np.save(os.path.join(folder, "logits.npy"), logits.float().numpy())
    for layer, values in hidden.items():
        np.save(os.path.join(folder, f"hidden_{layer}.npy"), values.float().numpy())


def make_case(out_root, name, case):
    folder = os.path.join(out_root, name)
    seed, command, model, tokens, margins, scale, gap = pick_seed(folder, case)
    figures, logits, hidden = checks(model, case["ids"])
    if "--yarn" in case["args"].split():
        y = figures["yarn"]
        assert y["kept"] and y["blended"] and y["divided"], f"{name}: {y}"
    write_arrays(folder, logits, hidden)
    golden = {"ids": case["ids"], "greedy": tokens, "greedy_margins": [round(x, 6) for x in margins],
              "min_margin": round(min(margins), 6), "max_abs_logit": round(scale, 4),
              "min_router_gap": round(gap, 6),
              "compute": "float64 from the stored weights, FP8 dequantised exactly "
                         "(tools/gen/deepseek/deepseek_ref.py)",
              "checkpoint_command": command, "checks": figures}
    if model.n_mtp:
        mtp_tokens = case["ids"] + tokens[:1]
        mtp = ref.mtp_forward(model, mtp_tokens, hidden[ref.FINAL_NORM])
        np.save(os.path.join(folder, "mtp_logits.npy"), mtp.float().numpy())
        golden["mtp_tokens"] = mtp_tokens
        golden["mtp_argmax"] = mtp.argmax(-1).tolist()
    if "twin" in case:
        twin_folder = os.path.join(out_root, case["twin"])
        twin_command = make_checkpoint(twin_folder, case["args"], seed, "--dequantize")
        twin = ref.DeepseekRef(twin_folder)
        twin_logits, twin_hidden = ref.forward(twin, case["ids"])
        same = bool(torch.equal(twin_logits, logits))
        assert same, f"{name}: the dequantised twin's logits differ by {rel(twin_logits, logits)}"
        write_arrays(twin_folder, twin_logits, twin_hidden)
        twin_golden = dict(golden, checkpoint_command=twin_command, fp8_twin_of=name,
                           checks=checks(twin, case["ids"])[0])
        with open(os.path.join(twin_folder, "golden.json"), "w") as f:
            json.dump(twin_golden, f, indent=1)
            f.write("\n")
        golden["dequantized_twin"] = case["twin"]
        print(f"{case['twin']}: logits identical to {name} in float64: {same}, "
              f"{folder_size(twin_folder) / 1024:.0f} KiB")
    with open(os.path.join(folder, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print(f"{name}: seed {seed}, {folder_size(folder) / 1024:.0f} KiB, greedy {tokens}, min margin "
          f"{min(margins):.3f} (max |logit| {scale:.2f}), router gap {gap:.4f}, checks {figures}")


def folder_size(folder):
    return sum(os.path.getsize(os.path.join(folder, x)) for x in os.listdir(folder))


# ---- router unit data ---------------------------------------------------------------------------------

def router_cases():
    """Hand-made router inputs. Logits and biases are binary fractions; equal (logit, bias) pairs tie
    exactly. Groups: 8 experts in 4 groups of 2 unless said."""
    cfg = dict(n_group=4, topk_group=2, top_k=2, norm_topk_prob=True, routed_scaling_factor=2.5)
    cases = []

    def add(name, why, logits, bias, **over):
        c = dict(cfg, **over)
        out = ref.router_case(logits, bias, c["n_group"], c["topk_group"], c["top_k"], c["norm_topk_prob"],
                              c["routed_scaling_factor"])
        cases.append(dict(name=name, why=why, logits=logits, bias=bias, **c, **out))

    zero8 = [0.0] * 8
    add("plain", "no bias: groups {1, 2} have the largest top-2 sums; experts 2 and 5 are the best in them",
        [-1.0, 0.5, 2.0, 0.25, 0.0, 1.5, -2.0, 1.0], zero8)
    add("group_sum_not_max", "group 0 holds the single best expert but group sums of the top 2 prefer groups 1 "
        "and 3", [3.0, -3.0, 1.0, 1.0, -1.0, -1.0, 1.25, 0.75], zero8)
    add("bias_changes_selection", "the same logits as 'plain' with a bias that moves selection to experts 0 and "
        "6 (groups 0 and 3); weights are the unbiased sigmoid scores of 0 and 6",
        [-1.0, 0.5, 2.0, 0.25, 0.0, 1.5, -2.0, 1.0], [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5, 0.0])
    add("bias_no_change", "bias on every expert of kept groups: selection as in 'plain' and the weights too "
        "(the bias never enters the weights)", [-1.0, 0.5, 2.0, 0.25, 0.0, 1.5, -2.0, 1.0],
        [0.0, 0.0, 0.25, 0.25, 0.25, 0.25, 0.0, 0.0])
    add("tie_groups", "all four groups score the same: the two lowest-indexed groups (0, 1) are kept",
        [1.0, 0.5] * 4, zero8)
    add("tie_experts", "experts 2, 3, 4, 5 tie inside the kept groups 1 and 2: the lowest indices 2 and 3 win",
        [-2.0, -2.0, 1.0, 1.0, 1.0, 1.0, -2.0, -2.0], zero8)
    add("no_norm", "norm_topk_prob false: weights are the raw scores times the scaling factor",
        [-1.0, 0.5, 2.0, 0.25, 0.0, 1.5, -2.0, 1.0], zero8, norm_topk_prob=False, routed_scaling_factor=1.5)
    add("one_group", "n_group 1, topk_group 1: plain top-k over all experts (DeepSeek-V2-Lite-like)",
        [0.5, -0.5, 1.5, 1.25, -1.0, 0.0, 2.0, 0.75], [0.0] * 4 + [0.5] * 4, n_group=1, topk_group=1, top_k=3)
    add("wide", "16 experts in 4 groups of 4, keep 2 groups, 4 experts; group sums use only the top 2",
        [0.1, 2.0, 1.9, -3.0, 1.0, 1.0, 1.0, 1.0, 2.5, -4.0, -4.0, -4.0, 0.0, 0.5, 1.75, 1.5],
        [0.0] * 12 + [0.125] * 4, top_k=4)
    return {"convention": "scores = sigmoid(logits); biased = scores + bias (selection only); group score = sum "
                          "of its 2 largest biased; keep topk_group groups, then top_k experts among them by "
                          "biased score; ties -> lower index; weights = scores of the chosen experts "
                          "(divided by their sum if norm_topk_prob) * routed_scaling_factor; experts "
                          "sorted ascending, weights in that order; groups = kept group ids sorted",
            "cases": cases}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "deepseek"))
    p.add_argument("--case", action="append", choices=sorted(CASES) + ["router"], help="only these (default: all)")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    todo = a.case or ["router"] + list(CASES)
    if "router" in todo:
        with open(os.path.join(a.out, "router_cases.json"), "w") as f:
            json.dump(router_cases(), f, indent=1)
            f.write("\n")
        print("router_cases.json written")
    for name in todo:
        if name != "router":
            make_case(os.path.abspath(a.out), name, CASES[name])


if __name__ == "__main__":
    main(sys.argv[1:])
