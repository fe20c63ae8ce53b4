#!/usr/bin/python3
"""Regenerates tests/data/deepseek_heads/<case>/: a random EAGLE-3 head (tools/gen/deepseek/make_ds_eagle_head.py)
for one of the small DeepSeek-V3 targets in tests/data/deepseek, and its teacher-forced logits and
features from the float64 reference (tools/gen/deepseek/ds_head_ref.py).

Files per case: config.json, model.safetensors (the head), golden.json {target (relative to tests/data),
ids, target_layers (aerie convention), load_options, to_target (draft id -> target id), head_command,
argmax}, logits.npy float32 [n-1, draft_vocab], features.npy float32 [n-1, H].

  make_head_goldens.py [--case NAME]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
DATA = os.path.join(ROOT, "tests", "data")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "eagle"))
import ds_head_ref  # noqa: E402
from head_io import read_safetensors  # noqa: E402

IDS = [0, 17, 143, 96, 5, 128, 77, 31, 190, 64, 9, 150]

# name: (target under tests/data, maker arguments, fused layers in aerie's convention, load options)
CASES = {
    # MLA head, q_lora, the target's YaRN copied, layers.0.* names, default three layers {2, L/2, L-3}.
    "mla_qlora_yarn_layers0": ("deepseek/bf16_qlora_yarn", "--kind mla --names layers0 --seed 1", [2, 1, 0], {}),
    # MLA head with q_proj (q_lora_rank null), midlayer.* names, plain rope, reduced vocabulary (d2t),
    # two fused layers named by eagle_aux_hidden_state_layer_ids, per-chunk fc_norm.
    "mla_qproj_midlayer_d2t_fcnorm": ("deepseek/bf16_qproj_noyarn",
                                      "--kind mla --names midlayer --seed 2 --q-lora-rank 0 --rope plain "
                                      "--draft-vocab 96 --n-fused 2 --aux-layer-ids 1,3 --fc-norm", [1, 3], {}),
    # Llama-style MHA head on DeepSeek: model.layers.0.* names (fc / norm / fc_norm under model.), its own
    # YaRN rope, fc_norm, aux ids counted as layer outputs (SGLang): {0, 1, 2} + 1.
    "mha_yarn_modelprefix_fcnorm": ("deepseek/bf16_qlora_yarn",
                                    "--kind mha --names model_layers0 --seed 3 --rope yarn --yarn-factor 4 "
                                    "--yarn-original-max-pos 64 --rope-theta 5000 --fc-norm --aux-layer-ids 0,1,2",
                                    [1, 2, 3], {"aux_layer_ids_are_outputs": True}),
    # MHA head, midlayer.* names, plain rope, reduced vocabulary, two fused layers by the default {2, L-3}.
    "mha_midlayer_d2t_twolayer": ("deepseek/bf16_moe_freq2_sharded",
                                  "--kind mha --names midlayer --seed 4 --rope plain --draft-vocab 128 --n-fused 2",
                                  [2, 1], {}),
    # MLA head without lm_head.weight: its norm, then the target's lm_head over the full vocabulary.
    "mla_no_lm_head": ("deepseek/bf16_qlora_yarn", "--kind mla --names layers0 --seed 5 --no-lm-head", [2, 1, 0], {}),
}


def make_case(name):
    target_rel, args, layers, load_options = CASES[name]
    target = os.path.join(DATA, target_rel)
    out = os.path.join(DATA, "deepseek_heads", name)
    shutil.rmtree(out, ignore_errors=True)
    command = f"tools/gen/deepseek/make_ds_eagle_head.py --target tests/data/{target_rel} --out tests/data/deepseek_heads/{name} {args}"
    subprocess.run([sys.executable, os.path.join(HERE, "make_ds_eagle_head.py"), "--target", target, "--out", out]
                   + args.split(), check=True)
    ids = [i for i in IDS if i < json.load(open(os.path.join(target, "config.json")))["vocab_size"]]
    logits, feats = ds_head_ref.teacher_forced(target, out, ids, layers)
    np.save(os.path.join(out, "logits.npy"), logits)
    np.save(os.path.join(out, "features.npy"), feats)
    tensors = read_safetensors(os.path.join(out, "model.safetensors"))
    n_draft = logits.shape[1]
    to_target = (torch.arange(n_draft) + tensors["d2t"]).tolist() if "d2t" in tensors else list(range(n_draft))
    golden = {"target": target_rel, "ids": ids, "target_layers": layers, "load_options": load_options,
              "to_target": to_target, "head_command": command, "argmax": logits.argmax(-1).tolist(),
              "max_abs_logit": float(np.abs(logits).max())}
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(out, x)) for x in os.listdir(out))
    print(f"{name}: logits {list(logits.shape)}, {size / 1024:.0f} KB")
    if size > 300 * 1024:
        raise SystemExit(f"{name} is {size} bytes, over 300 KB")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", choices=sorted(CASES))
    a = p.parse_args(argv)
    for name in [a.case] if a.case else sorted(CASES):
        make_case(name)


if __name__ == "__main__":
    main(sys.argv[1:])
