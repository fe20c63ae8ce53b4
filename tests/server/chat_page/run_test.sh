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

log="$(mktemp)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  rm -f "$log"
}
trap cleanup EXIT

"$aerie" serve --model "$source_dir/models/aerie-tiny-llama" --draft "$source_dir/models/aerie-tiny-llama-eagle3" \
  --chat-template "$here/chat_template.jinja" --port 0 --served-model-name aerie-chat --api-key sk-page-test \
  --max-length 512 --threads 1 --quiet >"$log" 2>&1 &
server_pid=$!

port=""
for _ in $(seq 1 300); do
  port="$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log" | head -1)"
  [[ -n "$port" ]] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$log"; echo "FAIL: the server exited"; exit 1; }
  sleep 0.1
done
[[ -n "$port" ]] || { cat "$log"; echo "FAIL: no port in the server log"; exit 1; }

status=0
AERIE_URL="http://127.0.0.1:$port" AERIE_API_KEY=sk-page-test AERIE_CHROMIUM="$chromium" \
  node "$here/chat_page_test.mjs" || status=$?

kill -TERM "$server_pid"
server_status=0
wait "$server_pid" || server_status=$?
server_pid=""
if [[ $status -ne 0 ]]; then echo "--- server log ---"; cat "$log"; echo "FAIL: the chat page checks failed"; exit 1; fi
if [[ $server_status -ne 0 ]]; then echo "FAIL: aerie serve exited $server_status after SIGTERM"; exit 1; fi
echo "PASS"
