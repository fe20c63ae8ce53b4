#!/usr/bin/python3
"""Regenerates tests/data/trained/deepseek_golden/: what the independent float64 reference
tools/gen/deepseek/deepseek_ref.py computes for the shipped aerie-tiny-deepseek (its FP8 weights dequantised
exactly), on the held-out prompts of tests/data/trained/model_golden/golden.json (same tokenizer, same ids).
The C++ test tests/models/trained_deepseek_test.cpp checks aerie against these figures.

Every logit is cross-checked first against the float32 PyTorch model the checkpoint was trained with
(tools/gen/trained/deepseek_model.py); the largest difference is recorded.

Files:
  golden.json           per prompt: name, ids, next_logprobs (log p of each next prompt token, positions
                        0..n-2), greedy (GREEDY tokens after the prompt, float64 re-forward per step) and
                        greedy_margins (top-1 minus top-2 logit per step)
  last_logits.npy       float32 [n_prompts, n_vocab], the logits after each prompt's last token
  mtp_last_logits.npy   float32 [n_prompts, n_vocab], the MTP layer's row n-2 (final-normed hidden state at
                        n-2 and token n-1: predicts the token after the prompt's next one)

  /usr/bin/python3 tools/gen/trained/make_deepseek_goldens.py [--model models/aerie-tiny-deepseek]
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
import deepseek_model  # noqa: E402  (puts tools/gen/deepseek on the path)
import deepseek_ref as dr  # noqa: E402

GREEDY = 24


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=os.path.join(ROOT, "models", "aerie-tiny-deepseek"))
    p.add_argument("--prompts", default=os.path.join(ROOT, "tests", "data", "trained", "model_golden", "golden.json"))
    p.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "trained", "deepseek_golden"))
    a = p.parse_args(argv)
    torch.set_num_threads(2)
    with open(a.prompts) as f:
        prompts = [(c["name"], c["ids"]) for c in json.load(f)["cases"]]
    ref = dr.DeepseekRef(a.model)
    model = deepseek_model.load(a.model)
    os.makedirs(a.out, exist_ok=True)
    cases, last, mtp_last, worst = [], [], [], 0.0
    for name, ids in prompts:
        logits, hidden = dr.forward(ref, ids)
        mtp = dr.mtp_forward(ref, ids, hidden[dr.FINAL_NORM])
        with torch.no_grad():
            mine, mine_mtp, _ = model(torch.tensor([ids]))
        for a64, b32 in ((logits, mine[0]), (mtp, mine_mtp[0])):
            error = float((b32.double() - a64).abs().max() / a64.abs().max())
            worst = max(worst, error)
            if error > 1e-5:
                raise SystemExit(f"{name}: deepseek_model differs from deepseek_ref by {error:.2e}")
        logprobs = torch.log_softmax(logits, dim=-1)
        greedy, margins = dr.greedy(ref, ids, GREEDY)
        cases.append({"name": name, "ids": ids, "greedy": greedy, "greedy_margins": margins,
                      "next_logprobs": [float(logprobs[t, ids[t + 1]]) for t in range(len(ids) - 1)]})
        last.append(logits[-1].float().numpy())
        mtp_last.append(mtp[-1].float().numpy())
        print(f"{name}: {len(ids)} ids, mean next-token loss {-np.mean(cases[-1]['next_logprobs']):.3f}, "
              f"min margin {min(margins):.3f}", flush=True)
    np.save(os.path.join(a.out, "last_logits.npy"), np.stack(last))
    np.save(os.path.join(a.out, "mtp_last_logits.npy"), np.stack(mtp_last))
    golden = {"model": os.path.relpath(a.model, ROOT), "deepseek_model_f32_max_relative_error": worst,
              "cases": cases}
    with open(os.path.join(a.out, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f)
        f.write("\n")
    print(f"{len(cases)} prompts -> {a.out}; largest difference of the float32 training model: {worst:.2e}")


if __name__ == "__main__":
    main(sys.argv[1:])
