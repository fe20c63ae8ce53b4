#!/usr/bin/python3
"""Compares two logits files [n_tokens, n_vocab] (.npy), e.g. `aerie logits` output against llama_ref.py:
per row the max |a - b|, that over the row's max |b| (relative to the logit scale), whether the argmax
agrees, and b's top1 - top2 margin (an argmax flip under a small margin is a near-tie, not a bug).

  compare_logits.py --a aerie.npy --b ref.npy [--tolerance 2e-4]
Exit status 1 when a row's relative difference exceeds --tolerance or an argmax differs.

With traces (AERIE_TRACE_DIR=A aerie logits ...; a reference script's --trace-dir B; see aerie_trace.py), walks the
named intermediates in the reference's order and names the first one whose max |a - b| over max |b| exceeds
--tolerance: where inside which layer two computations part.
  compare_logits.py --trace-a A --trace-b B [--tolerance 2e-4]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from aerie_trace import read_index  # noqa: E402


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


def compare_traces(dir_a, dir_b, tolerance):
    """Prints one line per tensor of b's index; returns the stem of the first beyond tolerance (or None)."""
    first, names_a = None, set(read_index(dir_a))
    print(f"{'tensor':<32} {'shape':>14} {'max_abs':>11} {'max_rel':>11}")
    for stem in read_index(dir_b):
        if stem not in names_a:
            print(f"{stem:<32} {'(only in b)':>14}")
            continue
        a = np.load(os.path.join(dir_a, stem + ".npy")).astype(np.float64)
        b = np.load(os.path.join(dir_b, stem + ".npy")).astype(np.float64)
        if a.shape != b.shape:
            print(f"{stem:<32} shapes differ: {a.shape} vs {b.shape}")
            first = first or stem
            continue
        diff = float(np.abs(a - b).max()) if a.size else 0.0
        rel = diff / max(float(np.abs(b).max()) if b.size else 0.0, 1e-30)
        flag = ""
        if rel > tolerance and first is None:
            first, flag = stem, "  <- first beyond tolerance"
        print(f"{stem:<32} {str(tuple(b.shape)):>14} {diff:11.4e} {rel:11.4e}{flag}")
    only_a = sorted(names_a - set(read_index(dir_b)))
    if only_a:
        print(f"only in a: {', '.join(only_a)}")
    print(f"first diverging tensor: {first}" if first else f"every shared tensor within {tolerance:g}")
    return first


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a")
    p.add_argument("--b", help="the reference")
    p.add_argument("--trace-a", help="a trace folder (AERIE_TRACE_DIR)")
    p.add_argument("--trace-b", help="the reference's trace folder")
    p.add_argument("--tolerance", type=float, default=2e-4, help="max allowed relative difference per row")
    a = p.parse_args(argv)
    if a.trace_a or a.trace_b:
        if not (a.trace_a and a.trace_b):
            p.error("--trace-a and --trace-b go together")
        return 1 if compare_traces(a.trace_a, a.trace_b, a.tolerance) else 0
    if not (a.a and a.b):
        p.error("give --a and --b (logits) or --trace-a and --trace-b")
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
