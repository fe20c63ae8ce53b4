#!/usr/bin/python3
"""Why the MTP drafter's first-position acceptance depends on K at T = 0: a check independent of aerie.

Greedy text is the same whatever K (speculative decoding is lossless), and the first draft of a round
started at position p is the MTP layer's argmax at row p - 1, which teacher forcing over the finished text
gives. So per-position acceptance at K = 1 is fixed by WHICH positions start rounds: after an accepted
draft the next round starts two tokens on, after a rejection one. This script decodes greedily with the
PyTorch model (tools/gen/trained/deepseek_model.py), takes the teacher-forced MTP argmax at every position, and
replays K = 1 rounds; aerie's `bench-accept --model M --draft mtp --k 1 --temperatures 0 --max-prompts N`
should print the same first-position acceptance (it did: 51.6% vs 51.7% on 16 prompts, while the
agreement over all positions is 63%; repetitive greedy text makes the two differ).

  /usr/bin/python3 tools/gen/trained/mtp_cycle_sim.py --model models/aerie-tiny-deepseek --prompts 16
"""
import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
import deepseek_model  # noqa: E402
from train_target import Encoder  # noqa: E402


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=os.path.join(ROOT, "models", "aerie-tiny-deepseek"))
    p.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "aerie-tiny-llama", "tokenizer.json"))
    p.add_argument("--prompts-file", default=os.path.join(ROOT, "tests", "data", "trained", "prompts.json"))
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=128)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    model = deepseek_model.load(a.model)
    enc = Encoder(a.tokenizer)
    with open(a.prompts_file) as f:
        prompts = json.load(f)[:a.prompts]
    agree, rounds, accepted = [], 0, 0
    for prompt in prompts:
        ids = [model.config.bos_token_id] + enc.encode(prompt["text"] if isinstance(prompt, dict) else prompt)
        n0 = len(ids)
        with torch.no_grad():
            for _ in range(a.max_tokens):
                logits, _, _ = model(torch.tensor([ids]), with_mtp=False)
                ids.append(int(logits[0, -1].argmax()))
            _, mtp, _ = model(torch.tensor([ids]))
        guess = mtp[0].argmax(-1)  # row t predicts ids[t + 2]
        ok = {q: int(guess[q - 1]) == ids[q + 1] for q in range(n0, len(ids) - 1)}
        agree += ok.values()
        q = n0  # the prefill produced ids[n0]; the first round drafts ids[n0 + 1]
        while q + 1 < len(ids):
            rounds, accepted = rounds + 1, accepted + ok[q]
            q += 2 if ok[q] else 1
    print(f"teacher-forced MTP agreement over all {len(agree)} positions: {sum(agree) / len(agree):.1%}")
    print(f"K = 1 rounds replayed: {rounds}, first draft accepted in {accepted / rounds:.1%}")


if __name__ == "__main__":
    main(sys.argv[1:])
