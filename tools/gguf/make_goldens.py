#!/usr/bin/python3
"""Reference logits for the Llama GGUF test files (tests/data/gguf/goldens), from two independent sources:

  <stem>.logits.npy     the float64 PyTorch reference (tools/reference/llama_ref.py) on the file's weights
                        dequantised by numpy (ggml_quantize.dequantize, checked bit for bit against ggml's own),
                        q/k rows put back in Hugging Face order: what the file's weights compute exactly;
  <stem>.llama_cpp.npy  llama.cpp's own logits for the same file (an F32 KV cache, flash attention off),
                        written only when --llama-cpp-logits names the tool (tools/gguf/README.md).

Each is [n_ids, n_vocab] float32 for the ids of tests/data/llama/bf16_gqa_rope_scaled_tied/golden.json.

  make_goldens.py [--llama-cpp-logits /tmp/perf/llama_cpp_logits] [--only STEM ...]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
from checkpoint_io import write_safetensors  # noqa: E402
from gguf_file import GGUFModel  # noqa: E402
from hf_to_gguf import unpermute_rotate_half  # noqa: E402

DATA = os.path.join(ROOT, "tests", "data")
GGUF = os.path.join(DATA, "gguf")
IDS_SOURCE = os.path.join(DATA, "llama", "bf16_gqa_rope_scaled_tied", "golden.json")

# Each file and the Hugging Face folder whose config.json it was converted from.
FILES = {
    "llama_f32": "llama/bf16_gqa_rope_scaled_tied",
    "llama_bf16": "llama/bf16_gqa_rope_scaled_tied",
    "llama_q8_0": "llama/bf16_gqa_rope_scaled_tied",
    "llama_k256_q4_k_m": "gguf/llama_k256_src",
    "llama_k256_q5_k_m": "gguf/llama_k256_src",
    "llama_k256_q6_k": "gguf/llama_k256_src",
    "llama_k256_q4_0": "gguf/llama_k256_src",
}

LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
MODEL_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
               "output.weight": "lm_head.weight"}


def dequantised_folder(path, source, out):
    """Writes the GGUF's weights as an F32 Hugging Face folder (the source's config.json) into `out`."""
    model = GGUFModel(path)
    config = json.load(open(os.path.join(DATA, source, "config.json")))
    n_head, n_head_kv = config["num_attention_heads"], config.get("num_key_value_heads", config["num_attention_heads"])
    state = {}
    for name in model.tensors:
        if name == "rope_freqs.weight":
            continue  # the config's rope_scaling says the same (hf_to_gguf.llama3_rope_factors)
        w = model.tensor(name)
        if name in MODEL_NAMES:
            state[MODEL_NAMES[name]] = w
            continue
        _, layer, key = name.split(".", 2)
        if key == "attn_q.weight":
            w = unpermute_rotate_half(w, n_head)
        elif key == "attn_k.weight":
            w = unpermute_rotate_half(w, n_head_kv)
        state[f"model.layers.{layer}.{LAYER_NAMES[key]}"] = w
    config["torch_dtype"] = "float32"
    config["tie_word_embeddings"] = "lm_head.weight" not in state
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f)
    entries = [(n, list(state[n].shape)) for n in sorted(state)]
    write_safetensors(os.path.join(out, "model.safetensors"), entries, "f32",
                      lambda n: [np.ascontiguousarray(state[n], dtype=np.float32).reshape(-1)])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama-cpp-logits", help="the llama_cpp_logits tool (tools/gguf/llama_cpp_logits.cpp)")
    parser.add_argument("--only", nargs="*", help="file stems to redo (default: all)")
    args = parser.parse_args()
    ids = ",".join(str(i) for i in json.load(open(IDS_SOURCE))["ids"])
    os.makedirs(os.path.join(GGUF, "goldens"), exist_ok=True)
    for stem, source in FILES.items():
        if args.only and stem not in args.only:
            continue
        path = os.path.join(GGUF, stem + ".gguf")
        out = os.path.join(GGUF, "goldens", stem)
        folder = tempfile.mkdtemp(prefix="aerie_gguf_golden_")
        try:
            dequantised_folder(path, source, folder)
            subprocess.run([sys.executable, os.path.join(ROOT, "tools", "reference", "llama_ref.py"), "--model", folder,
                            "--compute", "f64", "--ids", ids, "--out-logits", out + ".logits.npy"],
                           check=True, stdout=subprocess.DEVNULL)
        finally:
            shutil.rmtree(folder)
        if args.llama_cpp_logits:
            subprocess.run([args.llama_cpp_logits, path, ids, out + ".llama_cpp.npy"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"{stem}: goldens written")


if __name__ == "__main__":
    main()
