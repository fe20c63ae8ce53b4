#!/usr/bin/env bash
# The first thing to run on a fresh machine: set-up, build, then generate with the model aerie ships
# (models/aerie-tiny-llama, trained by tools/gen/trained/ on public-domain English text) and its trained EAGLE-3
# head — the speculative run and the plain one, so the two speed lines can be compared.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/build.sh
prompt="${AERIE_DEMO_PROMPT:-It is a truth universally acknowledged, that}"
echo "== with the shipped EAGLE-3 head (the default when no --model is given)"
./build/aerie generate --prompt "$prompt" --max-tokens 128
echo "== plain decoding (--draft none)"
./build/aerie generate --prompt "$prompt" --max-tokens 128 --draft none --quiet
