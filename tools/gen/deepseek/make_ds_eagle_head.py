#!/usr/bin/python3
"""Writes a random EAGLE-3 draft head for a DeepSeek-V3 target folder, in the published layouts:

  MLA head (vLLM deepseek_eagle3.py: Eagle3DeepseekV2ForCausalLM / Eagle3DeepseekV3ForCausalLM):
      config.json = the target's config (MoE keys and all, as published heads carry them) with
      architectures ["Eagle3DeepseekV3ForCausalLM"], num_hidden_layers 1, intermediate_size of the head's
      dense MLP, q_lora_rank (or null), draft_vocab_size, optionally eagle_config.
      eagle_aux_hidden_state_layer_ids, fc_norm, target_hidden_size; rope_theta / rope_scaling copied
      (or null with --rope plain). Tensors (model.safetensors, BF16 unless --dtype):
        fc.weight [H, k H], [fc_norm.{i}.weight [H]], <p>input_layernorm / hidden_norm /
        post_attention_layernorm .weight [H], <p>self_attn.q_a_proj.weight [q_lora, 2H] +
        q_a_layernorm [q_lora] + q_b_proj [heads (nope + rope), q_lora] (or q_proj [heads (nope + rope), 2H]),
        <p>self_attn.kv_a_proj_with_mqa.weight [kv_lora + rope, 2H] + kv_a_layernorm [kv_lora] +
        kv_b_proj [heads (nope + v), kv_lora], <p>self_attn.o_proj.weight [H, heads v],
        <p>mlp.{gate,up,down}_proj.weight, norm.weight [H], lm_head.weight [draft_vocab, H], d2t / t2d.
  MHA head (LlamaForCausalLMEagle3, SpecForge / SGLang / vLLM llama_eagle3.py) on the DeepSeek target:
      config.json is a Llama config (model_type llama) with the head's own rope_theta and, with
      --rope yarn, rope_scaling {"rope_type": "yarn", factor, original_max_position_embeddings,
      beta_fast, beta_slow} (no mscale keys: transformers and vLLM then agree on the cos/sin factor
      0.1 ln(factor) + 1); tensors as tools/gen/eagle/make_eagle_head.py writes them, with the layer under
      <p> = midlayer. | layers.0. | model.layers.0. (the last also puts fc, norm, fc_norm under model.).

<p> is set by --names. Deterministic from --seed (each tensor from (seed, crc32(name))): matrices
N(0, (gain / sqrt(in))^2), lm_head N(0, lm_head_std^2), norm weights 1 + N(0, 0.1^2).

  make_ds_eagle_head.py --target tests/data/deepseek/bf16_qlora_yarn --out DIR --kind mla --names layers0
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
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "eagle"))
from head_io import write_safetensors  # noqa: E402

DTYPES = {"bf16": (torch.bfloat16, "bfloat16"), "f32": (torch.float32, "float32")}
PREFIXES = {"layers0": "layers.0.", "midlayer": "midlayer.", "model_layers0": "model.layers.0."}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--kind", choices=["mla", "mha"], required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--names", choices=sorted(PREFIXES), default="layers0")
    p.add_argument("--n-fused", type=int, choices=[2, 3], default=3, help="target layers fc fuses")
    p.add_argument("--aux-layer-ids", help="eagle_config.eagle_aux_hidden_state_layer_ids, e.g. 1,3")
    p.add_argument("--fc-norm", action="store_true", help="per-chunk fc_norm.{i}.weight (config fc_norm: true)")
    p.add_argument("--draft-vocab", type=int, default=0, help="reduced vocabulary with d2t/t2d (0: full)")
    p.add_argument("--no-lm-head", action="store_true", help="no lm_head.weight: the head scores through the target's")
    p.add_argument("--rope", choices=["target", "plain", "yarn"], default="target",
                   help="MLA: target (copy) or plain (null); MHA: plain or yarn")
    p.add_argument("--rope-theta", type=float, default=10000.0, help="MHA head rope_theta")
    p.add_argument("--yarn-factor", type=float, default=4.0)
    p.add_argument("--yarn-original-max-pos", type=int, default=64)
    p.add_argument("--q-lora-rank", type=int, default=-1, help="MLA: -1 copies the target's, 0 writes null")
    p.add_argument("--intermediate-size", type=int, default=64)
    p.add_argument("--num-heads", type=int, default=4, help="MHA heads (MLA: the target's)")
    p.add_argument("--num-kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=16)
    p.add_argument("--init-gain", type=float, default=2.0)
    p.add_argument("--lm-head-std", type=float, default=0.5)
    return p.parse_args(argv)


def values(seed, name, shape, std, mean):
    rng = np.random.Generator(np.random.PCG64([seed, zlib.crc32(name.encode())]))
    v = rng.standard_normal(int(np.prod(shape)), dtype=np.float32) * np.float32(std) + np.float32(mean)
    return torch.from_numpy(v.reshape(shape))


def matrix(name, n_out, n_in, gain):
    return (name, (n_out, n_in), gain / n_in ** 0.5, 0.0)


def norm(name, n):
    return (name, (n,), 0.1, 1.0)


def mla_specs(a, tc, p, h, q_lora):
    g, heads = a.init_gain, tc["num_attention_heads"]
    nope, rope, v, kv = tc["qk_nope_head_dim"], tc["qk_rope_head_dim"], tc["v_head_dim"], tc["kv_lora_rank"]
    s = p + "self_attn."
    specs = []
    if q_lora:
        specs += [matrix(s + "q_a_proj.weight", q_lora, 2 * h, g), norm(s + "q_a_layernorm.weight", q_lora),
                  matrix(s + "q_b_proj.weight", heads * (nope + rope), q_lora, g)]
    else:
        specs.append(matrix(s + "q_proj.weight", heads * (nope + rope), 2 * h, g))
    return specs + [matrix(s + "kv_a_proj_with_mqa.weight", kv + rope, 2 * h, g), norm(s + "kv_a_layernorm.weight", kv),
                    matrix(s + "kv_b_proj.weight", heads * (nope + v), kv, g),
                    matrix(s + "o_proj.weight", h, heads * v, g)]


def mha_specs(a, p, h):
    g, q_dim, kv_dim = a.init_gain, a.num_heads * a.head_dim, a.num_kv_heads * a.head_dim
    s = p + "self_attn."
    return [matrix(s + "q_proj.weight", q_dim, 2 * h, g), matrix(s + "k_proj.weight", kv_dim, 2 * h, g),
            matrix(s + "v_proj.weight", kv_dim, 2 * h, g), matrix(s + "o_proj.weight", h, q_dim, g)]


def main(argv):
    a = parse_args(argv)
    with open(os.path.join(a.target, "config.json")) as f:
        tc = json.load(f)
    h, vocab, n_ff, g = tc["hidden_size"], tc["vocab_size"], a.intermediate_size, a.init_gain
    p = PREFIXES[a.names]
    top = "model." if a.names == "model_layers0" else ""
    dtype, dtype_name = DTYPES[a.dtype]
    q_lora = tc.get("q_lora_rank") if a.q_lora_rank < 0 else (a.q_lora_rank or None)
    draft_vocab = a.draft_vocab or vocab

    specs = [matrix(top + "fc.weight", h, a.n_fused * h, g)]
    if a.fc_norm:
        specs += [norm(f"{top}fc_norm.{i}.weight", h) for i in range(a.n_fused)]
    specs += [norm(p + n + ".weight", h) for n in ["input_layernorm", "hidden_norm", "post_attention_layernorm"]]
    specs += mla_specs(a, tc, p, h, q_lora) if a.kind == "mla" else mha_specs(a, p, h)
    specs += [matrix(p + "mlp.gate_proj.weight", n_ff, h, g), matrix(p + "mlp.up_proj.weight", n_ff, h, g),
              matrix(p + "mlp.down_proj.weight", h, n_ff, g), norm(top + "norm.weight", h)]
    if a.no_lm_head:
        assert not a.draft_vocab, "--no-lm-head needs the full vocabulary"
    else:
        specs.append(("lm_head.weight", (draft_vocab, h), a.lm_head_std, 0.0))
    tensors = {name: values(a.seed, name, shape, std, mean).to(dtype) for name, shape, std, mean in specs}
    if a.draft_vocab:
        rng = np.random.Generator(np.random.PCG64([a.seed, zlib.crc32(b"d2t")]))
        chosen = np.sort(rng.choice(vocab, size=a.draft_vocab, replace=False)).astype(np.int64)
        tensors["d2t"] = torch.from_numpy(chosen - np.arange(a.draft_vocab, dtype=np.int64))
        t2d = torch.zeros(vocab, dtype=torch.bool)
        t2d[torch.from_numpy(chosen)] = True
        tensors["t2d"] = t2d

    if a.kind == "mla":
        config = dict(tc)
        for key in ("quantization_config", "auto_map", "num_nextn_predict_layers"):
            config.pop(key, None)
        config.update({"architectures": ["Eagle3DeepseekV3ForCausalLM"], "num_hidden_layers": 1,
                       "intermediate_size": n_ff, "q_lora_rank": q_lora, "draft_vocab_size": draft_vocab,
                       "torch_dtype": dtype_name})
        if a.rope == "plain":
            config["rope_scaling"] = None
    else:
        config = {"architectures": ["LlamaForCausalLMEagle3"], "bos_token_id": tc.get("bos_token_id"),
                  "eos_token_id": tc.get("eos_token_id"), "hidden_act": "silu", "hidden_size": h,
                  "intermediate_size": n_ff, "max_position_embeddings": 2048, "model_type": "llama",
                  "num_attention_heads": a.num_heads, "num_hidden_layers": 1, "num_key_value_heads": a.num_kv_heads,
                  "head_dim": a.head_dim, "rms_norm_eps": tc["rms_norm_eps"], "rope_theta": a.rope_theta,
                  "tie_word_embeddings": False, "torch_dtype": dtype_name, "vocab_size": vocab,
                  "draft_vocab_size": draft_vocab}
        if a.rope == "yarn":
            config["rope_scaling"] = {"rope_type": "yarn", "factor": a.yarn_factor, "beta_fast": 32.0, "beta_slow": 1.0,
                                      "original_max_position_embeddings": a.yarn_original_max_pos}
    if a.fc_norm:
        config["fc_norm"] = True
    if a.aux_layer_ids:
        config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [int(x) for x in a.aux_layer_ids.split(",")],
                                  "use_aux_hidden_state": True}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(a.out, "model.safetensors"), tensors)
    print(f"{a.out}: {a.kind} EAGLE-3 head, {len(tensors)} tensors, names {p}*, {a.dtype}")


if __name__ == "__main__":
    main(sys.argv[1:])
