#!/usr/bin/python3
"""Regenerates tests/data/trained/model_golden/: what the PyTorch model of tools/gen/trained/llama_model.py
computes, in float32 from the exported BF16 weights, for held-out prompts (tests/data/trained/prompts.json,
encoded with BOS by tools/gen/trained/byte_bpe.py, whose ids equal transformers.js'). The C++ test
tests/models/trained_llama_test.cpp checks aerie against these figures.

Every figure is cross-checked first against the independent reference tools/gen/reference/llama_ref.py in
float64 (the largest difference is recorded in golden.json).

Files:
  golden.json       per prompt: name, ids, next_logprobs (log p of each next prompt token, teacher forced,
                    positions 0..n-2), greedy (GREEDY tokens after the prompt, full re-forward per step),
                    greedy_margins (top-1 minus top-2 logit per step); and the check against llama_ref
  last_logits.npy   float32 [n_prompts, n_vocab], the logits after each prompt's last token
  hidden_<i>.npy    float32 [n_tokens, n_embd] for the first prompt: the residual stream entering layer i
                    (n_layer = after the last layer), hidden_final_norm.npy after the final norm

  /usr/bin/python3 tools/gen/trained/make_model_goldens.py [--model models/aerie-tiny-llama]
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
sys.path.insert(0, os.path.join(ROOT, "tools", "gen", "reference"))
import llama_model  # noqa: E402
import llama_ref  # noqa: E402
from byte_bpe import Encoder  # noqa: E402

PER_SOURCE = 2  # prompts per source, the first ones in prompts.json
GREEDY = 32
HIDDEN_LAYERS = [2, 3]  # besides 0, n_layer and the final norm


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=os.path.join(ROOT, "models", "aerie-tiny-llama"))
    p.add_argument("--prompts", default=os.path.join(ROOT, "tests", "data", "trained", "prompts.json"))
    p.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "trained", "model_golden"))
    a = p.parse_args(argv)
    torch.set_num_threads(2)

    model = llama_model.load(a.model)
    reference = llama_ref.LlamaRef(a.model, "f64")
    encoder = Encoder(os.path.join(a.model, "tokenizer.json"))
    bos = model.config.bos_token_id
    with open(a.prompts, encoding="utf-8") as f:
        prompts = json.load(f)
    chosen, per_source = [], {}
    for prompt in prompts:
        if per_source.get(prompt["source"], 0) < PER_SOURCE:
            per_source[prompt["source"]] = per_source.get(prompt["source"], 0) + 1
            chosen.append(prompt)

    os.makedirs(a.out, exist_ok=True)
    cases, last_logits, worst = [], [], 0.0
    n_layer = model.config.num_layers
    layers = [0] + HIDDEN_LAYERS + [n_layer]
    with torch.no_grad():
        for k, prompt in enumerate(chosen):
            ids = [bos] + encoder.encode(prompt["text"], special_tokens=False)
            logits, hidden = model(torch.tensor([ids]), hidden_layers=layers)
            logits = logits[0]
            ref_logits, ref_hidden = llama_ref.forward(reference, ids)
            error = float((logits.double() - ref_logits.double()).abs().max() / ref_logits.abs().max())
            worst = max(worst, error)
            if error > 1e-5:
                raise SystemExit(f"{prompt['name']}: llama_model differs from llama_ref by {error:.2e}")
            logprobs = torch.log_softmax(logits.double(), dim=-1)
            next_logprobs = [float(logprobs[t, ids[t + 1]]) for t in range(len(ids) - 1)]
            greedy, margins = llama_ref.greedy(reference, ids, GREEDY)  # float64: the margins are exact
            mine = list(ids)
            for _ in range(GREEDY):  # the float32 model agrees token for token
                mine.append(int(model(torch.tensor([mine]))[0, -1].argmax()))
            if mine[len(ids):] != greedy:
                raise SystemExit(f"{prompt['name']}: float32 greedy {mine[len(ids):]} != float64 {greedy}")
            cases.append({"name": prompt["name"], "ids": ids, "next_logprobs": next_logprobs, "greedy": greedy,
                          "greedy_margins": margins})
            last_logits.append(logits[-1].numpy())
            if k == 0:
                for layer in layers:
                    np.save(os.path.join(a.out, f"hidden_{layer}.npy"), hidden[layer][0].numpy())
                np.save(os.path.join(a.out, "hidden_final_norm.npy"), model.model.norm(hidden[n_layer])[0].numpy())
            text = encoder.decode(greedy)
            print(f"{prompt['name']}: {len(ids)} ids, mean next-token loss {-np.mean(next_logprobs):.3f}, "
                  f"min margin {min(margins):.3f}, continuation {text!r}")
    np.save(os.path.join(a.out, "last_logits.npy"), np.stack(last_logits).astype(np.float32))
    golden = {"model": os.path.relpath(a.model, ROOT), "hidden_prompt": 0, "hidden_layers": layers + ["final_norm"],
              "llama_ref_f64_max_relative_error": worst, "cases": cases}
    with open(os.path.join(a.out, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f)
        f.write("\n")
    print(f"{len(cases)} prompts -> {a.out}; largest difference from llama_ref f64: {worst:.2e}")


if __name__ == "__main__":
    main(sys.argv[1:])
