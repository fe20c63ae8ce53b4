#!/usr/bin/python3
"""Compares two logits files [n_tokens, n_vocab] (.npy), e.g. `aerie logits` output against llama_ref.py:
per row the max |a - b|, that over the row's max |b| (relative to the logit scale), whether the argmax
agrees, and b's top1 - top2 margin (an argmax flip under a small margin is a near-tie, not a bug).

  compare_logits.py --a aerie.npy --b ref.npy [--tolerance 2e-4]
Exit status 1 when a row's relative difference exceeds --tolerance or an argmax differs.
"""
import argparse
import sys

import numpy as np


def compare(a, b):
    """Rows of (max_abs, max_rel, argmax_a, argmax_b, margin_b), float64."""
    a, b = np.atleast_2d(a).astype(np.float64), np.atleast_2d(b).astype(np.float64)
    if a.shape != b.shape:
        raise SystemExit(f"shapes differ: {a.shape} vs {b.shape}")
    rows = []
    for ra, rb in zip(a, b):
        diff = np.abs(ra - rb).max()
        top2 = np.sort(rb)[-2:] if rb.size > 1 else np.array([rb[0], rb[0]])
        rows.append((diff, diff / max(np.abs(rb).max(), 1e-30), int(ra.argmax()), int(rb.argmax()),
                     top2[1] - top2[0]))
    return rows


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True)
    p.add_argument("--b", required=True, help="the reference")
    p.add_argument("--tolerance", type=float, default=2e-4, help="max allowed relative difference per row")
    a = p.parse_args(argv)
    rows = compare(np.load(a.a), np.load(a.b))
    print(f"{'row':>4} {'max_abs':>11} {'max_rel':>11} {'argmax_a':>9} {'argmax_b':>9} {'margin_b':>9}")
    for i, (diff, rel, arg_a, arg_b, margin) in enumerate(rows):
        flag = "" if arg_a == arg_b else "  ARGMAX DIFFERS"
        print(f"{i:>4} {diff:11.4e} {rel:11.4e} {arg_a:>9} {arg_b:>9} {margin:9.4f}{flag}")
    worst = max(r[1] for r in rows)
    agree = sum(r[2] == r[3] for r in rows)
    print(f"max abs {max(r[0] for r in rows):.4e}, max rel {worst:.4e}, argmax agrees on {agree}/{len(rows)} rows")
    return 0 if worst <= a.tolerance and agree == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
