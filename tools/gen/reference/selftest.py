#!/usr/bin/python3
"""Self-test of the checkpoint tools (about 15 s, writes only under a temporary folder):
  - the presets' config.json equals the published meta-llama configs (key for key, values included) and
    they have the published tensor counts (1B: 146, 8B: 291) and total sizes;
  - one seed written as safetensors, sharded safetensors, .bin and sharded .bin holds bit-identical tensors,
    each passing check_layout, and gives identical reference logits;
  - a bf16 or f16 checkpoint equals the f32 checkpoint of the same seed rounded to that dtype;
  - llama_ref's forward is deterministic and its greedy run agrees with its own logits.

  selftest.py
"""
import io
import contextlib
import os
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import check_layout  # noqa: E402
import make_checkpoint  # noqa: E402
from checkpoint_io import load_state_dict  # noqa: E402
from llama_ref import LlamaRef, forward, greedy  # noqa: E402

# meta-llama/Llama-3.2-1B config.json as published (transformers 4.45.0.dev0).
PUBLISHED_1B = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": False,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0", "use_cache": True, "vocab_size": 128256,
}
SIZES = {"llama-3.2-1b": (146, 2471628800), "llama-3.1-8b": (291, 16060522496)}  # tensors, total_size bytes


def write(out, *flags):
    with contextlib.redirect_stdout(io.StringIO()):
        make_checkpoint.main(["--out", out, "--seed", "7", "--no-tie", *flags])
        check_layout.main([out])
    return load_state_dict(out)


def test_presets():
    config = make_checkpoint.make_config(make_checkpoint.parse_args(["--out", "x", "--preset", "llama-3.2-1b"]))
    assert config == PUBLISHED_1B, {k: v for k, v in config.items() if PUBLISHED_1B.get(k) != v}
    for preset, (count, total) in SIZES.items():
        args = make_checkpoint.parse_args(["--out", "x", "--preset", preset])
        specs = make_checkpoint.tensor_specs(args)
        assert len(specs) == count and sum(2 * int(np.prod(s[1])) for s in specs) == total, preset


def test_formats(tmp):
    base = write(os.path.join(tmp, "st"))
    ids = [1, 9, 200, 3, 77]
    reference, _ = forward(LlamaRef(os.path.join(tmp, "st")), ids)
    for name, flags in {"st3": ["--shards", "3"], "bin": ["--format", "bin"],
                        "bin2": ["--format", "bin", "--shards", "2"]}.items():
        other = write(os.path.join(tmp, name), *flags)
        assert base.keys() == other.keys(), name
        for key in base:
            assert torch.equal(base[key].view(torch.int16), other[key].view(torch.int16)), (name, key)
        logits, _ = forward(LlamaRef(os.path.join(tmp, name)), ids)
        assert torch.equal(logits, reference), name


def test_dtypes(tmp):
    f32 = write(os.path.join(tmp, "f32"), "--dtype", "f32")
    for dtype, torch_dtype in (("bf16", torch.bfloat16), ("f16", torch.float16)):
        low = write(os.path.join(tmp, dtype), "--dtype", dtype)
        for key in f32:
            assert low[key].dtype == torch_dtype and torch.equal(f32[key].to(torch_dtype), low[key]), (dtype, key)


def test_greedy(tmp):
    model = LlamaRef(os.path.join(tmp, "st"))
    ids = [1, 9, 200, 3, 77]
    tokens, margins = greedy(model, ids, 4)
    logits, _ = forward(model, ids + tokens[:-1])
    assert logits[len(ids) - 1:].argmax(-1).tolist() == tokens
    assert all(m >= 0 for m in margins)
    again, _ = forward(model, ids + tokens[:-1])
    assert torch.equal(logits, again)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for test in (test_presets, lambda: test_formats(tmp), lambda: test_dtypes(tmp), lambda: test_greedy(tmp)):
            test()
    print("selftest: OK")


if __name__ == "__main__":
    main()
