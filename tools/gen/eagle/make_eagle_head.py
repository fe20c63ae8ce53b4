#!/usr/bin/python3
"""Writes a random EAGLE draft head for a target checkpoint folder, in the layouts people publish:

  EAGLE-1 (yuhuili/EAGLE-LLaMA3-Instruct-8B): pytorch_model.bin (torch.save zip) holding
      fc.weight [H, 2H] (+ fc.bias [H] in older heads), layers.0.self_attn.{q,k,v,o}_proj.weight,
      layers.0.post_attention_layernorm.weight, layers.0.mlp.{gate,up,down}_proj.weight (no
      input_layernorm in layer 0, no final norm, no lm_head), optionally embed_tokens.weight (a copy of
      the target's table); config.json architectures ["LlamaForCausalLM"], rope_theta of the target.
  EAGLE-3 (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B and SpecForge: midlayer.*; NVIDIA/MAX: layers.0.*):
      model.safetensors holding fc.weight [H, 3 H_t], <prefix>self_attn.{q,k,v}_proj.weight [.., 2H],
      <prefix>o_proj, <prefix>{input_layernorm,hidden_norm,post_attention_layernorm}.weight, <prefix>mlp.*,
      norm.weight, lm_head.weight [draft_vocab, H], and with a reduced vocabulary d2t (int64 [draft_vocab],
      target id = draft id + d2t[draft id]) and t2d (bool [vocab]); config.json architectures
      ["LlamaForCausalLMEagle3"] with draft_vocab_size, no rope_theta unless --rope-theta is given (the
      published head then runs at base 10000), optionally eagle_config.eagle_aux_hidden_state_layer_ids.

Deterministic from --seed: each tensor has its own generator seeded by (seed, crc32(name)). Matrices are
N(0, (gain / sqrt(in_features))^2), lm_head N(0, lm_head_std^2), norm weights 1 + N(0, 0.1^2).

  make_eagle_head.py --target tests/data/llama/X --out DIR --kind eagle3 --names midlayer --draft-vocab 64
"""
import argparse
import json
import os
import sys
import zlib

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "reference"))
from checkpoint_io import load_state_dict  # noqa: E402
from head_io import write_safetensors  # noqa: E402

TORCH_DTYPES = {"bf16": (torch.bfloat16, "bfloat16"), "f16": (torch.float16, "float16"),
                "f32": (torch.float32, "float32")}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True, help="target checkpoint folder (config.json + weights)")
    p.add_argument("--out", required=True)
    p.add_argument("--kind", choices=["eagle1", "eagle3"], required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=sorted(TORCH_DTYPES), default="bf16")
    p.add_argument("--names", choices=["midlayer", "layers0"], default="midlayer", help="EAGLE-3 layer prefix")
    p.add_argument("--format", choices=["safetensors", "bin"], help="default: bin for eagle1, safetensors for eagle3")
    p.add_argument("--fc-bias", action="store_true", help="EAGLE-1: fc.bias (older heads)")
    p.add_argument("--bias-key", action="store_true", help="EAGLE-1: write config 'bias' (= --fc-bias)")
    p.add_argument("--embed-copy", action="store_true", help="store embed_tokens.weight (the target's table)")
    p.add_argument("--draft-vocab", type=int, default=0, help="EAGLE-3 reduced vocabulary size (0: full, no d2t)")
    p.add_argument("--no-lm-head", action="store_true",
                   help="EAGLE-3: no lm_head.weight (the head scores through the target's; full vocabulary only)")
    p.add_argument("--intermediate-size", type=int)
    p.add_argument("--num-heads", type=int)
    p.add_argument("--num-kv-heads", type=int)
    p.add_argument("--head-dim", type=int)
    p.add_argument("--rope-theta", type=float, help="EAGLE-3: write rope_theta (absent by default)")
    p.add_argument("--rope-scaling", action="store_true", help="copy the target's rope_scaling into the config")
    p.add_argument("--aux-layer-ids", help="EAGLE-3: eagle_config.eagle_aux_hidden_state_layer_ids, e.g. 0,1,2")
    p.add_argument("--target-hidden-size-key", action="store_true", help="EAGLE-3: write target_hidden_size")
    p.add_argument("--init-gain", type=float, default=2.0)
    p.add_argument("--lm-head-std", type=float, default=0.5)
    p.add_argument("--rms-norm-eps", type=float, default=1e-5)
    return p.parse_args(argv)


def values(seed, name, shape, std, mean):
    rng = np.random.Generator(np.random.PCG64([seed, zlib.crc32(name.encode())]))
    v = rng.standard_normal(int(np.prod(shape)), dtype=np.float32) * np.float32(std) + np.float32(mean)
    return torch.from_numpy(v.reshape(shape))


def layer_specs(prefix, h, n_in, n_ff, q_dim, kv_dim, gain, norms):
    """[(name, shape, std, mean)] of one decoder layer whose q/k/v read n_in features."""
    specs = [(prefix + "self_attn.q_proj.weight", (q_dim, n_in), gain / n_in ** 0.5, 0.0),
             (prefix + "self_attn.k_proj.weight", (kv_dim, n_in), gain / n_in ** 0.5, 0.0),
             (prefix + "self_attn.v_proj.weight", (kv_dim, n_in), gain / n_in ** 0.5, 0.0),
             (prefix + "self_attn.o_proj.weight", (h, q_dim), gain / q_dim ** 0.5, 0.0),
             (prefix + "mlp.gate_proj.weight", (n_ff, h), gain / h ** 0.5, 0.0),
             (prefix + "mlp.up_proj.weight", (n_ff, h), gain / h ** 0.5, 0.0),
             (prefix + "mlp.down_proj.weight", (h, n_ff), gain / n_ff ** 0.5, 0.0)]
    return specs + [(prefix + n + ".weight", (h,), 0.1, 1.0) for n in norms]


def main(argv):
    a = parse_args(argv)
    with open(os.path.join(a.target, "config.json")) as f:
        tc = json.load(f)
    h, vocab = tc["hidden_size"], tc["vocab_size"]
    n_head = a.num_heads or tc["num_attention_heads"]
    n_head_kv = a.num_kv_heads or tc["num_key_value_heads"]
    head_dim = a.head_dim or tc.get("head_dim") or h // n_head
    n_ff = a.intermediate_size or tc["intermediate_size"]
    dtype, dtype_name = TORCH_DTYPES[a.dtype]
    q_dim, kv_dim, g = n_head * head_dim, n_head_kv * head_dim, a.init_gain

    if a.kind == "eagle1":
        specs = [("fc.weight", (h, 2 * h), g / (2 * h) ** 0.5, 0.0)]
        if a.fc_bias:
            specs.append(("fc.bias", (h,), 0.1, 0.0))
        specs += layer_specs("layers.0.", h, h, n_ff, q_dim, kv_dim, g, ["post_attention_layernorm"])
        architecture, fmt = "LlamaForCausalLM", a.format or "bin"
    else:
        prefix = "midlayer." if a.names == "midlayer" else "layers.0."
        draft_vocab = a.draft_vocab or vocab
        specs = [("fc.weight", (h, 3 * h), g / (3 * h) ** 0.5, 0.0)]
        specs += layer_specs(prefix, h, 2 * h, n_ff, q_dim, kv_dim, g,
                             ["input_layernorm", "hidden_norm", "post_attention_layernorm"])
        specs += [("norm.weight", (h,), 0.1, 1.0)]
        if a.no_lm_head:
            assert not a.draft_vocab, "--no-lm-head needs the full vocabulary"
        else:
            specs += [("lm_head.weight", (draft_vocab, h), a.lm_head_std, 0.0)]
        architecture, fmt = "LlamaForCausalLMEagle3", a.format or "safetensors"

    tensors = {name: values(a.seed, name, shape, std, mean).to(dtype) for name, shape, std, mean in specs}
    if a.embed_copy:
        tensors["embed_tokens.weight"] = load_state_dict(a.target)["model.embed_tokens.weight"].to(dtype).clone()
    if a.kind == "eagle3" and a.draft_vocab:
        # The draft vocabulary: draft_vocab target ids, ascending (SpecForge keeps the most frequent ones).
        rng = np.random.Generator(np.random.PCG64([a.seed, zlib.crc32(b"d2t")]))
        chosen = np.sort(rng.choice(vocab, size=a.draft_vocab, replace=False)).astype(np.int64)
        tensors["d2t"] = torch.from_numpy(chosen - np.arange(a.draft_vocab, dtype=np.int64))
        t2d = torch.zeros(vocab, dtype=torch.bool)
        t2d[torch.from_numpy(chosen)] = True
        tensors["t2d"] = t2d

    config = {"architectures": [architecture], "bos_token_id": tc.get("bos_token_id"),
              "eos_token_id": tc.get("eos_token_id"), "hidden_act": "silu", "hidden_size": h,
              "initializer_range": 0.02, "intermediate_size": n_ff, "max_position_embeddings": 2048,
              "model_type": "llama", "num_attention_heads": n_head, "num_hidden_layers": 1,
              "num_key_value_heads": n_head_kv, "pad_token_id": 0, "pretraining_tp": 1,
              "rms_norm_eps": a.rms_norm_eps, "tie_word_embeddings": False, "torch_dtype": dtype_name,
              "transformers_version": "4.28.1", "use_cache": True, "vocab_size": vocab}
    if head_dim != h // n_head:
        config["head_dim"] = head_dim
    if a.kind == "eagle1":
        config["rope_theta"] = tc["rope_theta"]
        config["rope_scaling"] = tc.get("rope_scaling") if a.rope_scaling else None
        if a.bias_key:
            config["bias"] = a.fc_bias
    else:
        config["draft_vocab_size"] = a.draft_vocab or vocab
        if a.rope_theta is not None:
            config["rope_theta"] = a.rope_theta
        if a.rope_scaling:
            config["rope_scaling"] = tc.get("rope_scaling")
        if a.target_hidden_size_key:
            config["target_hidden_size"] = h
        if a.aux_layer_ids:
            config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [int(x) for x in a.aux_layer_ids.split(",")],
                                      "use_aux_hidden_state": True}

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    if fmt == "bin":
        torch.save(tensors, os.path.join(a.out, "pytorch_model.bin"))
    else:
        write_safetensors(os.path.join(a.out, "model.safetensors"), tensors)
    print(f"{a.out}: {a.kind} head, {len(tensors)} tensors, {fmt}, {a.dtype}")


if __name__ == "__main__":
    main(sys.argv[1:])
