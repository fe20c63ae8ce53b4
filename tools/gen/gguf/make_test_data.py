#!/usr/bin/python3
"""Regenerates the GGUF test files in tests/data/gguf (byte-for-byte deterministic), or writes them to
--out DIR (the self-test compares such a copy with the committed files).

  tools/gen/gguf/make_test_data.py                  # rewrite tests/data/gguf/*.gguf
  tools/gen/gguf/make_test_data.py --out /tmp/g     # write elsewhere
  tools/gen/gguf/make_test_data.py --print          # print the equivalent hf_to_gguf.py commands

The source of the K-type files, tests/data/gguf/llama_k256_src, is itself made by tools/gen/make_checkpoint.py
(needs python3-torch) with the command in K256_SOURCE_COMMAND; it is committed, so this script does not
rebuild it.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
import hf_to_gguf  # noqa: E402

SMALL_LLAMA = "tests/data/llama/bf16_gqa_rope_scaled_tied"
K256 = "tests/data/gguf/llama_k256_src"
DEEPSEEK = "tests/data/deepseek/bf16_qlora_yarn"
DEEPSEEK_QPROJ = "tests/data/deepseek/bf16_qproj_noyarn"

K256_SOURCE_COMMAND = (
    "tools/gen/make_checkpoint.py --out tests/data/gguf/llama_k256_src --seed 37 --hidden-size 256 "
    "--intermediate-size 256 --num-heads 4 --num-kv-heads 2 --head-dim 64 --num-layers 2 --vocab-size 256 "
    "--init-gain 2.0 --embed-std 0.5 --bos-token-id 1 --eos-token-id 2 --dtype bf16 --no-tie --rope-scaling "
    "--rope-theta 500000 --rope-factor 8 --rope-low-freq-factor 1 --rope-high-freq-factor 4 "
    "--rope-original-max-pos 64 --max-position-embeddings 1024")

# (output file name, hf_to_gguf.py arguments after the model folder)
FILES = [
    ("llama_f32.gguf", [SMALL_LLAMA, "--outtype", "f32"]),
    ("llama_bf16.gguf", [SMALL_LLAMA, "--outtype", "bf16"]),
    ("llama_q8_0.gguf", [SMALL_LLAMA, "--outtype", "q8_0"]),
    ("llama_f32_split.gguf", [SMALL_LLAMA, "--outtype", "f32", "--split-max-tensors", "8"]),
    ("llama_k256_q4_k_m.gguf", [K256, "--outtype", "q4_k_m"]),
    ("llama_k256_q5_k_m.gguf", [K256, "--outtype", "q5_k_m"]),
    ("llama_k256_q6_k.gguf", [K256, "--outtype", "q6_k"]),
    ("llama_k256_q4_0.gguf", [K256, "--outtype", "q4_0"]),
    ("deepseek2_mtp_f32.gguf", [DEEPSEEK, "--outtype", "f32", "--mtp"]),
    ("deepseek2_qproj_q8_0.gguf", [DEEPSEEK_QPROJ, "--outtype", "q8_0"]),
]


def generate(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for name, args in FILES:
        model = os.path.join(REPO, args[0])
        written += hf_to_gguf.main([model, "--outfile", os.path.join(out_dir, name), "--quiet"] + args[1:])
    return written


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join(REPO, "tests/data/gguf"))
    p.add_argument("--print", action="store_true", help="print the hf_to_gguf.py commands instead")
    args = p.parse_args()
    if args.print:
        for name, a in FILES:
            print(f"tools/gen/gguf/hf_to_gguf.py {a[0]} --outfile tests/data/gguf/{name} {' '.join(a[1:])}")
        return
    for path in generate(args.out):
        print(f"{os.path.relpath(path, REPO) if path.startswith(REPO) else path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
