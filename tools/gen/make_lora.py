#!/usr/bin/python3
"""Writes a random LoRA adapter for a Llama checkpoint folder in PEFT's saved layout:
adapter_config.json (peft_type LORA, r, lora_alpha, target_modules, use_rslora) and
adapter_model.safetensors with PEFT's tensor names,
  base_model.model.model.layers.<i>.<self_attn|mlp>.<module>.lora_A.weight  [r, n_in]
  base_model.model.model.layers.<i>.<self_attn|mlp>.<module>.lora_B.weight  [n_out, r]
Shapes come from the checkpoint's config.json. Deterministic from --seed. PEFT initialises B to zero (an
untrained adapter changes nothing); here both factors are random so that the adapted model differs from the
base: A ~ N(0, 1/n_in), B ~ N(0, (b_std / sqrt(r))^2), so scale * B A x has about b_std * scale the size of x.

  make_lora.py --model DIR --out ADAPTER [--rank 4 --alpha 8 --targets q_proj,v_proj --dtype bf16 --seed 1]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
from checkpoint_io import to_storage_bits, write_safetensors  # noqa: E402

MODULES = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
           "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}


def projection_shapes(config):
    """module -> (n_out, n_in) of a Llama decoder layer."""
    n_embd, n_ff = config["hidden_size"], config["intermediate_size"]
    n_head, n_head_kv = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or n_embd // n_head
    q, kv = n_head * head_dim, n_head_kv * head_dim
    return {"q_proj": (q, n_embd), "k_proj": (kv, n_embd), "v_proj": (kv, n_embd), "o_proj": (n_embd, q),
            "gate_proj": (n_ff, n_embd), "up_proj": (n_ff, n_embd), "down_proj": (n_embd, n_ff)}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="the base checkpoint folder (its config.json)")
    p.add_argument("--out", required=True, help="adapter folder (created)")
    p.add_argument("--rank", type=int, default=4)
    p.add_argument("--alpha", type=float, default=8.0)
    p.add_argument("--rslora", action="store_true", help="use_rslora: scale alpha / sqrt(r) instead of alpha / r")
    p.add_argument("--targets", default=",".join(MODULES), help="comma-separated module names")
    p.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16")
    p.add_argument("--b-std", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    with open(os.path.join(a.model, "config.json")) as f:
        config = json.load(f)
    targets = [t for t in a.targets.split(",") if t]
    for t in targets:
        if t not in MODULES:
            raise SystemExit(f"unknown target module {t!r}; one of {', '.join(MODULES)}")
    shapes = projection_shapes(config)
    rng = np.random.default_rng(a.seed)
    tensors = {}
    for i in range(config["num_hidden_layers"]):
        for t in targets:
            n_out, n_in = shapes[t]
            stem = f"base_model.model.model.layers.{i}.{MODULES[t]}.{t}"
            tensors[stem + ".lora_A.weight"] = rng.normal(0, 1 / np.sqrt(n_in), (a.rank, n_in)).astype(np.float32)
            tensors[stem + ".lora_B.weight"] = rng.normal(0, a.b_std / np.sqrt(a.rank), (n_out, a.rank)).astype(np.float32)
    os.makedirs(a.out, exist_ok=True)
    entries = [(name, t.shape) for name, t in sorted(tensors.items())]
    write_safetensors(os.path.join(a.out, "adapter_model.safetensors"), entries, a.dtype,
                      lambda name: [to_storage_bits(tensors[name].reshape(-1), a.dtype)])
    adapter_config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": a.model,
                      "r": a.rank, "lora_alpha": a.alpha, "lora_dropout": 0.0, "target_modules": targets,
                      "use_rslora": a.rslora, "bias": "none", "fan_in_fan_out": False, "modules_to_save": None,
                      "layers_to_transform": None, "layers_pattern": None, "rank_pattern": {}, "alpha_pattern": {},
                      "use_dora": False, "inference_mode": True}
    with open(os.path.join(a.out, "adapter_config.json"), "w") as f:
        json.dump(adapter_config, f, indent=2)
        f.write("\n")
    print(f"{a.out}: rank {a.rank}, alpha {a.alpha}, {len(targets)} modules x {config['num_hidden_layers']} layers")


if __name__ == "__main__":
    main(sys.argv[1:])
