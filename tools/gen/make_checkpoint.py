#!/usr/bin/python3
"""Writes a random Llama 3 checkpoint in the exact published Hugging Face LlamaForCausalLM layout:
config.json, generation_config.json and the weights (safetensors or torch .bin, optionally sharded with
an index), named and shaped as in meta-llama/Llama-3.x. Deterministic from --seed: every tensor has its
own generator seeded by (seed, crc32(name)), so a tensor's values do not depend on sharding or format.

Weights are generated and written tensor by tensor, in chunks of 4M elements, so memory stays bounded
even for the 16 GB 8B preset (the .bin format is the exception: torch.save needs a whole shard in memory).

Initialisation (why these scales): matrices ~ N(0, (gain/sqrt(in_features))^2), so every projection
keeps activations at unit scale (gain 1 gives 0.022 for hidden 2048, close to initializer_range 0.02);
embed_tokens and lm_head ~ N(0, embed_std^2); norm weights ~ 1 + N(0, norm_noise^2). For tiny test models
use a larger --embed-std (0.5 at hidden 64 gives logits of std ~4, so greedy argmax has clear margins)
and --init-gain > 1 (sharper attention than uniform).

Examples:
  tools/gen/make_checkpoint.py --out /tmp/tiny --seed 1 --dtype bf16
  tools/gen/make_checkpoint.py --out /tmp/l1b --preset llama-3.2-1b
  tools/gen/make_checkpoint.py --out /tmp/l8b --preset llama-3.1-8b --shards 4
"""
import argparse
import json
import os
import sys
import time
import zlib

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
from checkpoint_io import DTYPES, to_storage_bits, write_safetensors  # noqa: E402

CHUNK = 1 << 22  # elements generated at a time (16 MB of float32)
TRANSFORMERS_VERSION = "4.45.0.dev0"

PRESETS = {
    "llama-3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_heads=32, num_kv_heads=8, head_dim=64,
                         num_layers=16, vocab_size=128256, tie=True, rope_theta=500000.0, rope_scaling=True,
                         rope_factor=32.0, rope_low_freq_factor=1.0, rope_high_freq_factor=4.0,
                         rope_original_max_pos=8192, max_position_embeddings=131072,
                         bos_token_id=128000, eos_token_id="128001", dtype="bf16", embed_std=0.02),
    "llama-3.1-8b": dict(hidden_size=4096, intermediate_size=14336, num_heads=32, num_kv_heads=8, head_dim=128,
                         num_layers=32, vocab_size=128256, tie=False, rope_theta=500000.0, rope_scaling=True,
                         rope_factor=8.0, rope_low_freq_factor=1.0, rope_high_freq_factor=4.0,
                         rope_original_max_pos=8192, max_position_embeddings=131072,
                         bos_token_id=128000, eos_token_id="128001", dtype="bf16", embed_std=0.02),
}
# Defaults without a preset: a tiny GQA model for tests.
SMALL = dict(hidden_size=64, intermediate_size=160, num_heads=4, num_kv_heads=2, head_dim=16, num_layers=2,
             vocab_size=256, tie=True, rope_theta=500000.0, rope_scaling=True, rope_factor=8.0,
             rope_low_freq_factor=1.0, rope_high_freq_factor=4.0, rope_original_max_pos=64,
             max_position_embeddings=1024, bos_token_id=1, eos_token_id="2", dtype="bf16", embed_std=0.5)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output folder (created)")
    p.add_argument("--preset", choices=sorted(PRESETS), help="real Llama 3 shapes; other flags override it")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hidden-size", type=int)
    p.add_argument("--intermediate-size", type=int)
    p.add_argument("--num-heads", type=int)
    p.add_argument("--num-kv-heads", type=int)
    p.add_argument("--head-dim", type=int)
    p.add_argument("--num-layers", type=int)
    p.add_argument("--vocab-size", type=int)
    p.add_argument("--rope-theta", type=float)
    p.add_argument("--rope-scaling", dest="rope_scaling", action="store_true", default=None,
                   help="llama3 rope_scaling (see --rope-factor etc.)")
    p.add_argument("--no-rope-scaling", dest="rope_scaling", action="store_false", help="rope_scaling: null")
    p.add_argument("--rope-factor", type=float)
    p.add_argument("--rope-low-freq-factor", type=float)
    p.add_argument("--rope-high-freq-factor", type=float)
    p.add_argument("--rope-original-max-pos", type=int, help="original_max_position_embeddings")
    p.add_argument("--max-position-embeddings", type=int)
    p.add_argument("--tie", dest="tie", action="store_true", default=None, help="tie_word_embeddings (no lm_head)")
    p.add_argument("--no-tie", dest="tie", action="store_false")
    p.add_argument("--bos-token-id", type=int)
    p.add_argument("--eos-token-id", help="an id, or a comma-separated list written as a JSON list")
    p.add_argument("--rms-norm-eps", type=float, default=1e-5)
    p.add_argument("--dtype", choices=sorted(DTYPES))
    p.add_argument("--format", choices=["safetensors", "bin"], default="safetensors")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--init-gain", type=float, default=1.0, help="matrix std = gain / sqrt(in_features)")
    p.add_argument("--embed-std", type=float, help="std of embed_tokens and lm_head")
    p.add_argument("--norm-noise", type=float, default=0.1, help="norm weights = 1 + N(0, noise^2)")
    args = p.parse_args(argv)
    base = PRESETS[args.preset] if args.preset else SMALL
    for key, value in base.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.hidden_size is None or args.num_heads is None:
        p.error("missing shapes")
    if args.num_heads % args.num_kv_heads or args.head_dim % 2 or args.shards < 1:
        p.error("num_heads must be a multiple of num_kv_heads, head_dim even, shards >= 1")
    return args


def make_config(a):
    """config.json with every key a published Llama 3.x config has (values from the arguments)."""
    eos = [int(x) for x in a.eos_token_id.split(",")]
    rope_scaling = None
    if a.rope_scaling:
        rope_scaling = {"factor": a.rope_factor, "high_freq_factor": a.rope_high_freq_factor,
                        "low_freq_factor": a.rope_low_freq_factor,
                        "original_max_position_embeddings": a.rope_original_max_pos, "rope_type": "llama3"}
    return {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": a.bos_token_id, "eos_token_id": eos[0] if len(eos) == 1 else eos,
        "head_dim": a.head_dim, "hidden_act": "silu", "hidden_size": a.hidden_size, "initializer_range": 0.02,
        "intermediate_size": a.intermediate_size, "max_position_embeddings": a.max_position_embeddings,
        "mlp_bias": False, "model_type": "llama", "num_attention_heads": a.num_heads,
        "num_hidden_layers": a.num_layers, "num_key_value_heads": a.num_kv_heads, "pretraining_tp": 1,
        "rms_norm_eps": a.rms_norm_eps, "rope_scaling": rope_scaling, "rope_theta": a.rope_theta,
        "tie_word_embeddings": a.tie, "torch_dtype": DTYPES[a.dtype][2],
        "transformers_version": TRANSFORMERS_VERSION, "use_cache": True, "vocab_size": a.vocab_size,
    }


def tensor_specs(a):
    """[(name, shape, std, mean)] in the order of LlamaForCausalLM.state_dict()."""
    h, inter = a.hidden_size, a.intermediate_size
    q_dim, kv_dim = a.num_heads * a.head_dim, a.num_kv_heads * a.head_dim
    g = a.init_gain
    specs = [("model.embed_tokens.weight", (a.vocab_size, h), a.embed_std, 0.0)]
    for i in range(a.num_layers):
        pre = f"model.layers.{i}."
        specs += [
            (pre + "self_attn.q_proj.weight", (q_dim, h), g / h ** 0.5, 0.0),
            (pre + "self_attn.k_proj.weight", (kv_dim, h), g / h ** 0.5, 0.0),
            (pre + "self_attn.v_proj.weight", (kv_dim, h), g / h ** 0.5, 0.0),
            (pre + "self_attn.o_proj.weight", (h, q_dim), g / q_dim ** 0.5, 0.0),
            (pre + "mlp.gate_proj.weight", (inter, h), g / h ** 0.5, 0.0),
            (pre + "mlp.up_proj.weight", (inter, h), g / h ** 0.5, 0.0),
            (pre + "mlp.down_proj.weight", (h, inter), g / inter ** 0.5, 0.0),
            (pre + "input_layernorm.weight", (h,), a.norm_noise, 1.0),
            (pre + "post_attention_layernorm.weight", (h,), a.norm_noise, 1.0),
        ]
    specs.append(("model.norm.weight", (h,), a.norm_noise, 1.0))
    if not a.tie:
        specs.append(("lm_head.weight", (a.vocab_size, h), a.embed_std, 0.0))
    return specs


def value_chunks(seed, name, shape, std, mean, dtype):
    """Yields the tensor's stored bits, flat, CHUNK elements at a time, from its own generator."""
    rng = np.random.Generator(np.random.PCG64([seed, zlib.crc32(name.encode())]))
    remaining = int(np.prod(shape, dtype=np.int64))
    while remaining:
        n = min(remaining, CHUNK)
        values = rng.standard_normal(n, dtype=np.float32)
        values *= np.float32(std)
        values += np.float32(mean)
        yield to_storage_bits(values, dtype)
        remaining -= n


def assign_shards(specs, n_shards, elem_size):
    """Splits the tensors, in state-dict order, into n_shards runs of about equal bytes (as HF's
    max_shard_size does); within a file tensors are sorted by name, as the safetensors library writes."""
    sizes = [int(np.prod(s[1])) * elem_size for s in specs]
    total, shards, done = sum(sizes), [[] for _ in range(n_shards)], 0
    for spec, size in zip(specs, sizes):
        k = min(n_shards - 1, done * n_shards // total)
        shards[k].append(spec)
        done += size
    if any(not s for s in shards):
        raise SystemExit(f"cannot split {len(specs)} tensors into {n_shards} non-empty shards")
    return [sorted(s, key=lambda spec: spec[0]) for s in shards]


def write_weights(a, specs):
    """Writes the weight file(s) and, when sharded, the index. Returns the total tensor bytes."""
    elem_size = DTYPES[a.dtype][3]
    shards = assign_shards(specs, a.shards, elem_size)
    stem, ext = ("model", "safetensors") if a.format == "safetensors" else ("pytorch_model", "bin")
    names = [f"{stem}.{ext}"] if a.shards == 1 else [
        f"{stem}-{k + 1:05d}-of-{a.shards:05d}.{ext}" for k in range(a.shards)]
    weight_map = {}
    for file_name, shard in zip(names, shards):
        path = os.path.join(a.out, file_name)
        by_name = {spec[0]: spec for spec in shard}
        if a.format == "safetensors":
            write_safetensors(path, [(s[0], s[1]) for s in shard], a.dtype,
                              lambda n: value_chunks(a.seed, n, *by_name[n][1:], a.dtype))
        else:
            torch.save({s[0]: _torch_tensor(a, s) for s in shard}, path)
        weight_map.update({s[0]: file_name for s in shard})
    total = sum(int(np.prod(s[1])) * elem_size for s in specs)
    if a.shards > 1:
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        with open(os.path.join(a.out, f"{stem}.{ext}.index.json"), "w") as f:
            json.dump(index, f, indent=2)
            f.write("\n")
    return total


def _torch_tensor(a, spec):
    """One whole tensor as torch, in the stored dtype, owning its storage (torch.save writes whole storages)."""
    name, shape = spec[0], spec[1]
    bits = np.concatenate(list(value_chunks(a.seed, name, *spec[1:], a.dtype))).reshape(shape)
    if a.dtype == "bf16":
        return torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16).clone()
    return torch.from_numpy(bits).clone()


def main(argv):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    config = make_config(a)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    generation = {"bos_token_id": a.bos_token_id, "do_sample": True, "eos_token_id": config["eos_token_id"],
                  "temperature": 0.6, "top_p": 0.9, "transformers_version": TRANSFORMERS_VERSION}
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump(generation, f, indent=2)
        f.write("\n")
    start = time.time()
    specs = tensor_specs(a)
    total = write_weights(a, specs)
    print(f"{a.out}: {len(specs)} tensors, {total / 1e9:.3f} GB {a.dtype} in {a.shards} {a.format} file(s), "
          f"{time.time() - start:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
