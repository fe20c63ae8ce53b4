#!/usr/bin/env bash
# Writes the DeepSeek-V3 int4 test cases into OUT_DIR for tests/models/deepseek_int4_test.cpp (committed:
# run from the repository root as `bash tools/gen/deepseek/int4_cases.sh tests/data/deepseek_int4`): a BF16 checkpoint with every input width a multiple of 64 (bf16_w64: hidden 64, q_lora and
# kv_lora 64, 2 heads of nope 16 / rope 16 / v 32, dense 128, 4 experts of 64 and one shared, MTP); its GPTQ,
# AWQ (also with the dense and MTP layers left BF16) and compressed-tensors (symmetric, act order) copies
# (make_int4_checkpoint.py, reference logits in float64); an FP8 checkpoint of the same shapes with its exact
# BF16 twin; and an EAGLE-3 MLA head. tests/data/deepseek_int4/pack_g64 is the same source's asymmetric
# pack-quantized copy (make_int4_checkpoint.py --format pack --group 64), committed so that the loader's
# errors are tested without Python.
# Needs /usr/bin/python3 with numpy and torch; without them it writes nothing.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
out="$1"
py=/usr/bin/python3
if ! "$py" -c "import numpy, torch" 2>/dev/null; then
  echo "int4_cases.sh: $py lacks numpy or torch; the DeepSeek int4 cases are not written"
  exit 0
fi
tools="$repo/tools/gen/deepseek"
mkdir -p "$out"
shape=(--seed 37 --hidden-size 64 --intermediate-size 128 --moe-intermediate-size 64 --num-layers 2 --num-heads 2
       --q-lora-rank 64 --kv-lora-rank 64 --qk-nope-head-dim 16 --qk-rope-head-dim 16 --v-head-dim 32
       --n-routed-experts 4 --n-group 2 --topk-group 1 --num-experts-per-tok 2)
"$py" "$tools/make_deepseek_checkpoint.py" --out "$out/bf16_w64" "${shape[@]}" --bf16
# The same shapes in FP8 blocks and their exact BF16 twin (--weights int4 must quantise both alike).
"$py" "$tools/make_deepseek_checkpoint.py" --out "$out/fp8_w64" "${shape[@]}" --fp8
"$py" "$tools/make_deepseek_checkpoint.py" --out "$out/fp8_w64_dequant" "${shape[@]}" --fp8 --dequantize
"$py" "$tools/make_int4_checkpoint.py" --source "$out/bf16_w64" --out "$out/gptq_g64" --format gptq --group 64
"$py" "$tools/make_int4_checkpoint.py" --source "$out/bf16_w64" --out "$out/awq_g64" --format awq --group 64
# As QuantTrio's DeepSeek AWQ checkpoints: the dense first layer and the MTP layer left in BF16.
"$py" "$tools/make_int4_checkpoint.py" --source "$out/bf16_w64" --out "$out/awq_g64_partial" --format awq --group 64 \
  --not-convert model.layers.0. --not-convert model.layers.2.
"$py" "$tools/make_int4_checkpoint.py" --source "$out/bf16_w64" --out "$out/pack_sym_actorder_g64" --format pack \
  --group 64 --symmetric --act-order
"$py" "$tools/make_ds_eagle_head.py" --target "$out/bf16_w64" --out "$out/mla_head" --kind mla --seed 3 \
  --aux-layer-ids 0,1,2
