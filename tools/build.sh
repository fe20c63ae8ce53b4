#!/usr/bin/env bash
# Configures and builds aerie (Release) into ${AERIE_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${AERIE_BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
