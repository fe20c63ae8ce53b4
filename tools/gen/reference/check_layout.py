#!/usr/bin/python3
"""Checks that a checkpoint folder has exactly the tensors a published Llama 3 LlamaForCausalLM has (names,
shapes, one dtype) and, for safetensors, that every file is well formed: header length + header a
multiple of 8, "__metadata__": {"format": "pt"}, tensors contiguous from offset 0 with no gaps, file size
= 8 + header + data; for sharded checkpoints, that the index's weight_map and total_size match the files.
Reads only headers for safetensors (fast on multi-GB files).

  check_layout.py DIR [--expect-tensors 146]
The published meta-llama/Llama-3.2-1B has 146 tensors (16 layers x 9 + embed_tokens + norm; tied);
Llama-3.1-8B has 291 (32 x 9 + embed_tokens + norm + lm_head).
"""
import argparse
import json
import math
import os
import struct
import sys

import torch

ELEM_SIZE = {"BF16": 2, "F16": 2, "F32": 4}


def expected_tensors(c):
    """{name: shape} of a LlamaForCausalLM state dict, from config.json (the published naming)."""
    h, ff, n_head, n_kv = c["hidden_size"], c["intermediate_size"], c["num_attention_heads"], c["num_key_value_heads"]
    d = c.get("head_dim") or h // n_head
    shapes = {"model.embed_tokens.weight": [c["vocab_size"], h], "model.norm.weight": [h]}
    if not c.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = [c["vocab_size"], h]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h],
            p + "self_attn.q_proj.weight": [n_head * d, h], p + "self_attn.k_proj.weight": [n_kv * d, h],
            p + "self_attn.v_proj.weight": [n_kv * d, h], p + "self_attn.o_proj.weight": [h, n_head * d],
            p + "mlp.gate_proj.weight": [ff, h], p + "mlp.up_proj.weight": [ff, h],
            p + "mlp.down_proj.weight": [h, ff],
        })
    return shapes


def safetensors_entries(path):
    """{name: (dtype, shape)} from the header, after checking the file's framing."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    assert (8 + n) % 8 == 0, f"{path}: data does not start 8-aligned"
    assert header.pop("__metadata__", None) == {"format": "pt"}, f"{path}: metadata is not format pt"
    spans = sorted((info["data_offsets"], name) for name, info in header.items())
    end = 0
    for (begin, stop), name in spans:
        info = header[name]
        count = math.prod(info["shape"])
        assert begin == end, f"{path}: gap or overlap before {name}"
        assert stop - begin == count * ELEM_SIZE[info["dtype"]], f"{path}: {name} size mismatch"
        end = stop
    assert os.path.getsize(path) == 8 + n + end, f"{path}: file size is not 8 + header + data"
    return {name: (info["dtype"], info["shape"]) for name, info in header.items()}


def file_entries(path):
    if path.endswith(".safetensors"):
        return safetensors_entries(path)
    state = torch.load(path, map_location="cpu")
    names = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32"}
    return {name: (names[t.dtype], list(t.shape)) for name, t in state.items()}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder")
    p.add_argument("--expect-tensors", type=int)
    a = p.parse_args(argv)
    with open(os.path.join(a.folder, "config.json")) as f:
        config = json.load(f)
    files = sorted(x for x in os.listdir(a.folder) if x.endswith((".safetensors", ".bin")))
    indexes = [x for x in os.listdir(a.folder) if x.endswith(".index.json")]
    entries, owner = {}, {}
    for name in files:
        for tensor, info in file_entries(os.path.join(a.folder, name)).items():
            assert tensor not in entries, f"{tensor} stored twice"
            entries[tensor], owner[tensor] = info, name
    for index_name in indexes:
        with open(os.path.join(a.folder, index_name)) as f:
            index = json.load(f)
        assert index["weight_map"] == owner, f"{index_name}: weight_map differs from the files"
        total = sum(math.prod(shape) * ELEM_SIZE[dtype] for dtype, shape in entries.values())
        stated = index["metadata"]["total_size"]
        assert stated == total, f"{index_name}: total_size {stated} != {total}"
    expected = expected_tensors(config)
    missing, extra = sorted(set(expected) - set(entries)), sorted(set(entries) - set(expected))
    assert not missing and not extra, f"missing {missing[:5]}, unexpected {extra[:5]}"
    for tensor, shape in expected.items():
        assert list(entries[tensor][1]) == shape, f"{tensor}: shape {entries[tensor][1]} != {shape}"
    dtypes = {dtype for dtype, _ in entries.values()}
    assert len(dtypes) == 1, f"mixed dtypes {dtypes}"
    if a.expect_tensors is not None:
        assert len(entries) == a.expect_tensors, f"{len(entries)} tensors, expected {a.expect_tensors}"
    print(f"{a.folder}: OK, {len(entries)} tensors in {len(files)} file(s), dtype {dtypes.pop()}")


if __name__ == "__main__":
    main(sys.argv[1:])
