#!/usr/bin/env bash
# The main job, end to end on a fresh machine: set-up, build, write a small random Llama 3 checkpoint in
# the published layout with the real Llama 3.1 tokenizer beside it, and generate from a chat prompt.
# (Random weights: the text is gibberish, but every step is the real one.)
set -euo pipefail
cd "$(dirname "$0")/.."
AERIE_SETUP_REFERENCE=1 bash tools/setup.sh  # the checkpoint maker uses PyTorch
bash tools/build.sh
bash tools/tokenizer/fetch_tokenizers.sh
model_dir="${AERIE_DEMO_MODEL:-build/demo-llama}"
if [[ ! -f "$model_dir/config.json" ]]; then
  /usr/bin/python3 tools/make_checkpoint.py --out "$model_dir" --seed 1 \
    --hidden-size 256 --intermediate-size 768 --num-heads 8 --num-kv-heads 2 --num-layers 4 \
    --vocab-size 128256 --bos-token-id 128000 --eos-token-id 128001,128009 --dtype bf16
  cp .cache/tokenizers/llama3_1/tokenizer.json .cache/tokenizers/llama3_1/tokenizer_config.json "$model_dir/"
fi
./build/aerie generate --model "$model_dir" --chat --system "You are a helpful assistant." \
  --prompt "Write a haiku about speculative decoding." --max-tokens 32 --temperature 0.8 --seed 7 --show-prompt
