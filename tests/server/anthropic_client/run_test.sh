#!/usr/bin/env bash
# Starts `aerie serve` on the small test checkpoint (tests/data/llama/bf16_gqa_rope_scaled_tied with the
# byte-level tokenizer of ../openai_client/tokenizer) on a free loopback port, runs the official
# @anthropic-ai/sdk npm client against its /v1/messages (anthropic_client_test.mjs), then stops the server
# with SIGTERM and expects it to exit 0.
#
#   run_test.sh AERIE_BINARY TEST_DATA_DIR
# Exit 77 (ctest: skipped) when the package is not installed and cannot be installed offline.
set -euo pipefail
aerie="$1"
data="$2"
here="$(cd "$(dirname "$0")" && pwd)"

if [[ ! -d "$here/node_modules/@anthropic-ai/sdk" ]]; then
  # tools/test.sh installs it; here only from the local npm cache.
  npm install --prefix "$here" --offline --no-audit --no-fund >/dev/null 2>&1 || true
fi
if [[ ! -d "$here/node_modules/@anthropic-ai/sdk" ]]; then
  echo "SKIP: the @anthropic-ai/sdk npm package is not installed (npm install --prefix $here)"
  exit 77
fi

source "$here/../serve_for_test.sh"
start_serve "$aerie" --model "$data/llama/bf16_gqa_rope_scaled_tied" --tokenizer "$here/../openai_client/tokenizer" \
  --served-model-name aerie-test --api-key sk-aerie-test --max-length 1024 --kv-cache-memory 8388608 \
  --threads 1 --quiet

status=0
AERIE_BASE_URL="http://127.0.0.1:$port" AERIE_API_KEY=sk-aerie-test AERIE_MODEL=aerie-test \
  node "$here/anthropic_client_test.mjs" || status=$?

if [[ $status -ne 0 ]]; then echo "--- server log ---"; cat "$log"; echo "FAIL: the anthropic client checks failed"; exit 1; fi
stop_serve
echo "PASS"
