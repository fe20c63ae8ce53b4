#!/usr/bin/env bash
# The main job, end to end on a fresh machine: set-up, build, write a small random Llama 3 checkpoint in
# the published layout, and generate from it.
set -euo pipefail
cd "$(dirname "$0")/.."
AERIE_SETUP_REFERENCE=1 bash tools/setup.sh  # the checkpoint maker uses PyTorch
bash tools/build.sh
model_dir="${AERIE_DEMO_MODEL:-build/demo-llama}"
if [[ ! -f "$model_dir/config.json" ]]; then
  /usr/bin/python3 tools/make_checkpoint.py --out "$model_dir" --seed 1 \
    --hidden-size 256 --intermediate-size 768 --num-heads 8 --num-kv-heads 2 --num-layers 4 \
    --vocab-size 4096 --dtype bf16
fi
./build/aerie generate --model "$model_dir" --ids 1,20,300,4000 --max-tokens 32 --temperature 0.8 --seed 7
