#!/usr/bin/python3
"""Writes a vocabulary-only GGUF (general.architecture and the tokenizer.* keys, no tensors) from a
tokenizer.json folder, with tokenizer keys exactly as hf_to_gguf.py writes them: what the tokenizer tests
read (the ctest fixture gguf_vocab runs this for the real Llama 3.1 and DeepSeek-V3 tokenizers).

  vocab_gguf.py TOKENIZER_DIR OUT.gguf [--arch llama|deepseek2]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_tokenizer  # noqa: E402
from gguf_file import GGUFWriter  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tokenizer")
    parser.add_argument("out")
    parser.add_argument("--arch", default="llama", choices=["llama", "deepseek2"])
    args = parser.parse_args()
    tok, tok_config, folder = hf_tokenizer.load_tokenizer(args.tokenizer)
    ids = list(tok["model"]["vocab"].values()) + [a["id"] for a in tok.get("added_tokens", [])]
    writer = GGUFWriter()
    writer.add_string("general.architecture", args.arch)
    writer.add_string("general.type", "vocab")
    for key, vtype, value in hf_tokenizer.tokenizer_keys(tok, tok_config, folder, {}, max(ids) + 1):
        writer.add(key, vtype, value)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    writer.write(args.out)


if __name__ == "__main__":
    main()
