#!/usr/bin/env bash
# Starts `aerie serve` on the shipped tiny Llama with its EAGLE-3 head (models/, a plain chat template from
# here) on a free loopback port and drives the chat page at / in headless Chromium (chat_page_test.mjs,
# puppeteer-core over Debian's chromium), then stops the server with SIGTERM and expects it to exit 0.
#
#   run_test.sh AERIE_BINARY SOURCE_DIR
# Exit 77 (ctest: skipped) when chromium or the puppeteer-core package is missing.
set -euo pipefail
aerie="$1"
source_dir="$2"
here="$(cd "$(dirname "$0")" && pwd)"

chromium="$(command -v chromium || command -v chromium-browser || true)"
if [[ -z "$chromium" ]]; then
  echo "SKIP: no chromium (apt-get install chromium; tools/setup.sh does)"
  exit 77
fi
if [[ ! -d "$here/node_modules/puppeteer-core" ]]; then
  npm install --prefix "$here" --offline --no-audit --no-fund >/dev/null 2>&1 || true
fi
if [[ ! -d "$here/node_modules/puppeteer-core" ]]; then
  echo "SKIP: the puppeteer-core npm package is not installed (npm install --prefix $here)"
  exit 77
fi

source "$here/../serve_for_test.sh"
start_serve "$aerie" --model "$source_dir/models/aerie-tiny-llama" --draft "$source_dir/models/aerie-tiny-llama-eagle3" \
  --chat-template "$here/chat_template.jinja" --served-model-name aerie-chat --api-key sk-page-test \
  --max-length 512 --threads 1 --quiet

status=0
AERIE_URL="http://127.0.0.1:$port" AERIE_API_KEY=sk-page-test AERIE_CHROMIUM="$chromium" \
  node "$here/chat_page_test.mjs" || status=$?

if [[ $status -ne 0 ]]; then echo "--- server log ---"; cat "$log"; echo "FAIL: the chat page checks failed"; exit 1; fi
stop_serve
echo "PASS"
