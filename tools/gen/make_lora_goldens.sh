#!/usr/bin/env bash
# The LoRA goldens (tests/data/lora/<case>/): a random PEFT adapter for a tiny checkpoint of tests/data/llama,
# and the adapted model's logits from the float64 reference, which merges W + scale * B @ A explicitly
# (tools/gen/reference/llama_ref.py --lora). tests/models/lora_test.cpp checks aerie's unmerged
# low-rank products against them. Deterministic; under a second on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
BASE=tests/data/llama/bf16_gqa_rope_scaled_tied
IDS=1,17,243,99,5,64,128,7,200,31
make_case() {  # name, make_lora.py flags...
  local out=tests/data/lora/$1
  shift
  rm -rf "$out"
  $PY tools/gen/make_lora.py --model $BASE --out "$out" "$@" >/dev/null
  $PY tools/gen/reference/llama_ref.py --model $BASE --lora "$out" --compute f64 --ids $IDS \
    --out-logits "$out/logits.npy" --greedy 6 --out-greedy "$out/golden.json" >/dev/null
}
make_case bf16_all_modules --rank 4 --alpha 8 --dtype bf16 --seed 1
make_case f32_rslora_some_modules --rank 8 --alpha 16 --rslora --targets q_proj,v_proj,down_proj --dtype f32 --seed 2
