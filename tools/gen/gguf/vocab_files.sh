#!/usr/bin/env bash
# Writes the real Llama 3.1 and DeepSeek-V3 tokenizers (tools/gen/tokenizer/fetch_tokenizers.sh) as
# vocabulary-only GGUF files into OUT_DIR, for tests/tokenizer/gguf_tokenizer_test.cpp (ctest fixture
# gguf_vocab). A tokenizer that was not fetched is left out; the test then skips it.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
out="$1"
dir="${AERIE_TOKENIZER_DIR:-$repo/.cache/tokenizers}"
mkdir -p "$out"
for pair in llama3_1:llama deepseek_v3:deepseek2; do
  model="${pair%%:*}"
  if [[ -f "$dir/$model/tokenizer.json" ]]; then
    /usr/bin/python3 "$repo/tools/gen/gguf/vocab_gguf.py" "$dir/$model" "$out/$model.gguf" --arch "${pair##*:}"
  fi
done
