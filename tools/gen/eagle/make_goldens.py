#!/usr/bin/python3
"""Regenerates tests/data/eagle/<case>/ deterministically: a random head per case over one of the small
targets in tests/data/llama (make_eagle_head.py), and its teacher-forced outputs from eagle_ref.py in
float64 over the target's golden prompt:
  config.json + pytorch_model.bin | model.safetensors   the head, in a published layout
  logits.npy    float32 [n-1, draft_vocab]  row t: features of x_0..x_t and token x_{t+1}
  features.npy  float32 [n-1, n_embd]       the head's output feature (pre-norm) per row
  golden.json   {"target": folder relative to tests/data, "ids", "kind", "target_layers" (aerie
                convention), "load_options", "to_target": target id per draft id, "max_abs_logit",
                "head_command"}

  make_goldens.py [--out tests/data/eagle] [--case NAME ...]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
from eagle_ref import teacher_forced  # noqa: E402
from head_io import load_head  # noqa: E402

BF16_TARGET, F32_TARGET = "llama/bf16_gqa_rope_scaled_tied", "llama/f32_mqa_unscaled_untied"
CASES = {
    # EAGLE-1 as yuhuili/EAGLE-LLaMA3-Instruct-8B: .bin, fc.bias, a copy of the target's embedding, the
    # target's llama3 rope scaling and theta in the head's config.
    "eagle1_bin_bias": dict(target=BF16_TARGET, seed=11, layers=[-1], options={}, args=(
        "--kind eagle1 --dtype bf16 --fc-bias --bias-key --embed-copy --rope-scaling")),
    # EAGLE-1 without fc.bias or embedding copy, float32, with its own head shapes (2 heads of 16).
    "eagle1_bin_nobias_f32": dict(target=F32_TARGET, seed=12, layers=[-1], options={}, args=(
        "--kind eagle1 --dtype f32 --num-heads 2 --num-kv-heads 2 --head-dim 16 --intermediate-size 64")),
    # EAGLE-3 as the EAGLE repo / SpecForge publish it: midlayer.*, reduced vocabulary (d2t, t2d), no
    # rope_theta (base 10000 while the target runs at 500000), aux layer ids in aerie's convention.
    "eagle3_midlayer_d2t": dict(target=BF16_TARGET, seed=13, layers=[0, 1, 2], options={}, args=(
        "--kind eagle3 --dtype bf16 --names midlayer --draft-vocab 64 --aux-layer-ids 0,1,2")),
    # EAGLE-3 in the NVIDIA/MAX layout: layers.0.*, full vocabulary (no d2t), float32, rope_theta and
    # target_hidden_size given, aux layer ids counted as layer outputs (SGLang): 1,0,1 -> 2,1,2.
    "eagle3_layers0_fullvocab_f32": dict(target=F32_TARGET, seed=14, layers=[2, 1, 2],
                                         options={"aux_layer_ids_are_outputs": True}, args=(
        "--kind eagle3 --dtype f32 --names layers0 --rope-theta 500000 --target-hidden-size-key"
        " --aux-layer-ids 1,0,1 --num-heads 4 --num-kv-heads 2 --head-dim 8")),
    # EAGLE-3 saved with torch.save (int64 d2t and bool t2d in the zip), no aux ids: the caller chooses.
    "eagle3_bin_d2t_override": dict(target=F32_TARGET, seed=15, layers=[0, 2, 1],
                                    options={"target_layers": [0, 2, 1]}, args=(
        "--kind eagle3 --dtype bf16 --names midlayer --format bin --draft-vocab 48 --rope-theta 10000")),
    # EAGLE-3 without an lm_head of its own (MAX's has_own_lm_head false; vLLM shares the target's): its norm,
    # then the target's head (here the tied embedding) over the full vocabulary.
    "eagle3_no_lm_head": dict(target=BF16_TARGET, seed=16, layers=[0, 1, 2], options={}, args=(
        "--kind eagle3 --dtype bf16 --names midlayer --aux-layer-ids 0,1,2 --no-lm-head")),
}


def make_case(out_root, name, case):
    folder = os.path.join(out_root, name)
    shutil.rmtree(folder, ignore_errors=True)
    data_dir = os.path.join(ROOT, "tests", "data")
    target = os.path.join(data_dir, case["target"])
    command = ["tools/gen/eagle/make_eagle_head.py", "--target", os.path.relpath(target, ROOT), "--out",
               os.path.relpath(folder, ROOT), "--seed", str(case["seed"])] + case["args"].split()
    subprocess.run(["/usr/bin/python3"] + command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(target, "golden.json")) as f:
        ids = json.load(f)["ids"]
    logits, features, _ = teacher_forced(target, folder, ids, case["layers"], "f64")
    np.save(os.path.join(folder, "logits.npy"), logits)
    np.save(os.path.join(folder, "features.npy"), features)
    config, tensors = load_head(folder)
    n_draft = logits.shape[1]
    to_target = list(range(n_draft))
    if "d2t" in tensors:
        to_target = [d + int(tensors["d2t"][d]) for d in range(n_draft)]
    golden = {"target": case["target"], "ids": ids, "kind": case["args"].split()[1],
              "target_layers": case["layers"], "load_options": case["options"], "to_target": to_target,
              "max_abs_logit": round(float(np.abs(logits).max()), 4),
              "compute": "float64 from the stored weights (tools/gen/eagle/eagle_ref.py)",
              "head_command": " ".join(command)}
    with open(os.path.join(folder, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(folder, x)) for x in os.listdir(folder))
    print(f"{name}: {size / 1024:.0f} KiB, logits {list(logits.shape)}, argmax {logits.argmax(-1).tolist()}")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "eagle"))
    p.add_argument("--case", action="append", choices=sorted(CASES), help="only these cases (default: all)")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    for name in a.case or sorted(CASES):
        make_case(os.path.abspath(a.out), name, CASES[name])


if __name__ == "__main__":
    main(sys.argv[1:])
