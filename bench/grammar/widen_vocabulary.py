#!/usr/bin/python3
"""Writes a copy of a small Llama checkpoint (default: the shipped models/aerie-tiny-llama) that speaks a real
tokenizer's vocabulary, e.g. Llama 3.1's 128256 ids or DeepSeek-V3's 129280, so that
`aerie bench-engine --json-schema FILE` measures structured output's masks at that vocabulary size inside
real engine steps (issue 41 item 6). Only the token embedding (and lm_head when untied) changes: it is
replaced by deterministic random bf16 values of the new shape, of about the source's scale; every other
tensor is copied. The weights are random, so the text is not meaningful; the masks' states are those of real
constrained decoding over that vocabulary (and the forward is a tiny model's, so any mask cost shows).

  bench/grammar/widen_vocabulary.py --tokenizer .cache/tokenizers/llama3_1 --out /tmp/wide-llama3
  bench/grammar/widen_vocabulary.py --tokenizer .cache/tokenizers/deepseek_v3 --vocab-size 129280 \
      --out /tmp/wide-deepseek
Only the standard library (no numpy or torch): about 70 MB written in a few seconds.
"""
import argparse
import json
import os
import random
import shutil
import struct


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return header, data


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, dtype, shape, bytes), written in that order."""
    header = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, raw in tensors:
            f.write(raw)


def random_bf16(n_values, seed):
    """n_values bf16 values with random signs and mantissas, magnitudes in [2^-7, 2^-3)."""
    rng = random.Random(seed)
    raw = bytearray(rng.randbytes(2 * n_values))
    # Little-endian bf16: the high byte holds the sign and the exponent's top 7 bits.
    high = bytes([0x3C, 0x3D, 0xBC, 0xBD][b % 4] for b in range(256))
    raw[1::2] = bytes(raw[1::2]).translate(high)
    return bytes(raw)


def token_id(tokenizer, config_token):
    text = config_token["content"] if isinstance(config_token, dict) else config_token
    for added in tokenizer["added_tokens"]:
        if added["content"] == text:
            return added["id"]
    return tokenizer["model"]["vocab"][text]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--model", default=os.path.join(here, "..", "..", "models", "aerie-tiny-llama"))
    parser.add_argument("--tokenizer", required=True, help="folder with tokenizer.json and tokenizer_config.json")
    parser.add_argument("--vocab-size", type=int, default=0, help="ids in the model (default: the tokenizer's)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    with open(os.path.join(args.tokenizer, "tokenizer.json")) as f:
        tokenizer = json.load(f)
    with open(os.path.join(args.tokenizer, "tokenizer_config.json")) as f:
        tokenizer_config = json.load(f)
    ids = list(tokenizer["model"]["vocab"].values()) + [t["id"] for t in tokenizer["added_tokens"]]
    vocab_size = args.vocab_size or max(ids) + 1
    if vocab_size <= max(ids):
        parser.error(f"--vocab-size {vocab_size} is below the tokenizer's {max(ids) + 1} ids")
    bos = token_id(tokenizer, tokenizer_config["bos_token"])
    eos = [token_id(tokenizer, tokenizer_config["eos_token"])]
    for name in ("<|end_of_text|>", "<|eom_id|>"):  # Llama 3's other end-of-sequence ids
        if any(t["content"] == name for t in tokenizer["added_tokens"]):
            eos.append(token_id(tokenizer, name))

    with open(os.path.join(args.model, "config.json")) as f:
        config = json.load(f)
    header, data = read_safetensors(os.path.join(args.model, "model.safetensors"))
    metadata = header.pop("__metadata__", None)
    hidden = config["hidden_size"]
    tensors = []
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if name in ("model.embed_tokens.weight", "lm_head.weight"):
            if info["dtype"] != "BF16":
                parser.error(f"{name} is {info['dtype']}; only BF16 sources are supported")
            raw = random_bf16(vocab_size * hidden, args.seed * 1000 + len(tensors))
            tensors.append((name, "BF16", [vocab_size, hidden], raw))
        else:
            begin, end = info["data_offsets"]
            tensors.append((name, info["dtype"], info["shape"], data[begin:end]))

    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "model.safetensors"), tensors, metadata)
    config.update(vocab_size=vocab_size, bos_token_id=bos, eos_token_id=eos if len(eos) > 1 else eos[0])
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bos, "eos_token_id": eos, "transformers_version": config.get("transformers_version")},
                  f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(args.tokenizer, name), os.path.join(args.out, name))
    print(f"{args.out}: vocabulary {vocab_size} ids, bos {bos}, eos {eos}, hidden {hidden}")


if __name__ == "__main__":
    main()
