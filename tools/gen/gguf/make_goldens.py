#!/usr/bin/python3
"""Reference logits for the GGUF test files (tests/data/gguf/goldens), from two independent sources:

  <stem>.logits.npy     the float64 PyTorch reference on the file's weights dequantised by numpy
                        (ggml_quantize.dequantize, checked bit for bit against ggml's own) and written back in
                        the Hugging Face layout: what the file's weights compute exactly. Llama:
                        tools/gen/reference/llama_ref.py, q/k rows put back in Hugging Face order. DeepSeek-V3
                        (deepseek2): tools/gen/deepseek/deepseek_ref.py, kv_b_proj rebuilt from attn_k_b / attn_v_b
                        (head h: k_b[h]^T over v_b[h]), the stacked experts unstacked;
  <stem>.mtp_logits.npy deepseek2 files with an MTP layer: that layer's logits from the same reference
                        (deepseek_ref.py --out-mtp: row t from the target's final-normed state t and token t + 1);
  <stem>.llama_cpp.npy  llama.cpp's own logits for the same file (an F32 KV cache, flash attention off),
                        written only when --llama-cpp-logits names the tool (tools/gen/gguf/README.md).

Each is [n_ids, n_vocab] float32 for the ids of the source folder's golden.json (Llama files:
tests/data/llama/bf16_gqa_rope_scaled_tied's; deepseek2 files: their source's).

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
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "gen", "reference"))
from checkpoint_io import write_safetensors  # noqa: E402
from gguf_file import GGUFModel  # noqa: E402
from hf_to_gguf import DEEPSEEK_LAYER_NAMES, DEEPSEEK_MTP_NAMES, unpermute_rotate_half  # noqa: E402

DATA = os.path.join(ROOT, "tests", "data")
GGUF = os.path.join(DATA, "gguf")
LLAMA_IDS_SOURCE = "llama/bf16_gqa_rope_scaled_tied"

# Each file and the Hugging Face folder whose config.json it was converted from.
FILES = {
    "llama_f32": "llama/bf16_gqa_rope_scaled_tied",
    "llama_bf16": "llama/bf16_gqa_rope_scaled_tied",
    "llama_q8_0": "llama/bf16_gqa_rope_scaled_tied",
    "llama_k256_q4_k_m": "gguf/llama_k256_src",
    "llama_k256_q5_k_m": "gguf/llama_k256_src",
    "llama_k256_q6_k": "gguf/llama_k256_src",
    "llama_k256_q4_0": "gguf/llama_k256_src",
    "deepseek2_mtp_f32": "deepseek/bf16_qlora_yarn",
    "deepseek2_qproj_q8_0": "deepseek/bf16_qproj_noyarn",
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


def llama_state(model, config):
    """The Llama GGUF's tensors as Hugging Face float32 tensors."""
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
    return state


DEEPSEEK_NAMES = {gguf: hf for hf, gguf in list(DEEPSEEK_LAYER_NAMES.items()) + list(DEEPSEEK_MTP_NAMES.items())}
EXPERT_PROJ = {"ffn_gate_exps.weight": "gate_proj", "ffn_up_exps.weight": "up_proj", "ffn_down_exps.weight": "down_proj"}


def deepseek_state(model, config):
    """The deepseek2 GGUF's tensors as Hugging Face float32 tensors: kv_b_proj [n_head * (nope + v), kv_lora] from
    attn_k_b [n_head, kv_lora, nope] (transposed back) and attn_v_b [n_head, v, kv_lora]; experts unstacked."""
    state, split = {}, {}
    for name in model.tensors:
        w = model.tensor(name)
        if name in MODEL_NAMES:
            state[MODEL_NAMES[name]] = w
            continue
        _, layer, key = name.split(".", 2)
        prefix = f"model.layers.{layer}."
        if key in ("attn_k_b.weight", "attn_v_b.weight"):
            split.setdefault(prefix, {})[key] = w
        elif key in EXPERT_PROJ:
            for e in range(w.shape[0]):
                state[f"{prefix}mlp.experts.{e}.{EXPERT_PROJ[key]}.weight"] = w[e]
        elif key == "attn_kv_b.weight":
            state[prefix + "self_attn.kv_b_proj.weight"] = w
        else:
            state[prefix + DEEPSEEK_NAMES[key]] = w
    for prefix, kv in split.items():
        k_b, v_b = kv["attn_k_b.weight"], kv["attn_v_b.weight"]
        kv_b = np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1)  # [n_head, nope + v, kv_lora]
        state[prefix + "self_attn.kv_b_proj.weight"] = kv_b.reshape(-1, kv_b.shape[-1])
    return state


def dequantised_folder(path, source, out):
    """Writes the GGUF's weights as an F32 Hugging Face folder (the source's config.json) into `out`."""
    model = GGUFModel(path)
    config = json.load(open(os.path.join(DATA, source, "config.json")))
    deepseek = model.get("general.architecture") == "deepseek2"
    state = (deepseek_state if deepseek else llama_state)(model, config)
    config["torch_dtype"] = "float32"
    config["tie_word_embeddings"] = "lm_head.weight" not in state
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f)
    entries = [(n, list(state[n].shape)) for n in sorted(state)]
    write_safetensors(os.path.join(out, "model.safetensors"), entries, "f32",
                      lambda n: [np.ascontiguousarray(state[n], dtype=np.float32).reshape(-1)])
    return deepseek


def reference_logits(folder, deepseek, ids, out, mtp):
    if not deepseek:
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen", "reference", "llama_ref.py"), "--model", folder,
                        "--compute", "f64", "--ids", ids, "--out-logits", out + ".logits.npy"],
                       check=True, stdout=subprocess.DEVNULL)
        return
    command = [sys.executable, os.path.join(ROOT, "tools", "gen", "deepseek", "deepseek_ref.py"), "--model", folder, "--ids",
               ids, "--out-logits", out + ".logits.npy"]
    if mtp:
        command += ["--out-mtp", out + ".mtp_logits.npy"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama-cpp-logits", help="the llama_cpp_logits tool (tools/gen/gguf/llama_cpp_logits.cpp)")
    parser.add_argument("--only", nargs="*", help="file stems to redo (default: all)")
    args = parser.parse_args()
    os.makedirs(os.path.join(GGUF, "goldens"), exist_ok=True)
    for stem, source in FILES.items():
        if args.only and stem not in args.only:
            continue
        ids_source = source if source.startswith("deepseek/") else LLAMA_IDS_SOURCE
        ids = ",".join(str(i) for i in json.load(open(os.path.join(DATA, ids_source, "golden.json")))["ids"])
        path = os.path.join(GGUF, stem + ".gguf")
        out = os.path.join(GGUF, "goldens", stem)
        folder = tempfile.mkdtemp(prefix="aerie_gguf_golden_")
        try:
            deepseek = dequantised_folder(path, source, folder)
            mtp = deepseek and GGUFModel(path).get("deepseek2.nextn_predict_layers", 0) > 0
            reference_logits(folder, deepseek, ids, out, mtp)
        finally:
            shutil.rmtree(folder)
        if args.llama_cpp_logits:
            subprocess.run([args.llama_cpp_logits, path, ids, out + ".llama_cpp.npy"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"{stem}: goldens written")


if __name__ == "__main__":
    main()
