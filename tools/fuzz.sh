#!/usr/bin/env bash
# Fuzzes every parser of untrusted bytes (tests/fuzz: OpenAI requests, tool-call text, JSON schemas, grammars, chat
# templates, tokenizer.json, safetensors, torch zip, pickle) under ASan + UBSan, in the sanitizer stage's
# build folder ${AERIE_ASAN_BUILD_DIR:-build-asan}. Each target first replays its committed corpus
# (tests/fuzz/corpus/<target>: real inputs and the inputs of past crashes), then mutates it for
# FUZZ_SECONDS (default 15) seconds; AERIE_JOBS targets run at once. Exits non-zero on any crash, hang or
# out-of-memory, printing the reproducer's path; replay one with build-asan/tests/fuzz/fuzz_<target> PATH.
#
#   FUZZ_TARGETS="jinja pickle"   only these targets
#   FUZZ_SEED=N                   repeat a run's mutations (each target prints its seed)
#   AERIE_FUZZ_ENGINE=libfuzzer   clang + libFuzzer (coverage-guided) in ${AERIE_FUZZ_BUILD_DIR:-build-fuzz}
#                                 (AERIE_FUZZ_CC / AERIE_FUZZ_CXX: the compilers, default clang / clang++),
#                                 for long local runs; new inputs it finds go to <build>/fuzz-out/corpus-*
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-15}"
jobs="${AERIE_JOBS:-$(nproc)}"
all_targets="openai_request tool_parser json_schema grammar jinja tokenizer safetensors torch_zip pickle gguf"
read -r -a targets <<< "${FUZZ_TARGETS:-$all_targets}"

if [[ "${AERIE_FUZZ_ENGINE:-driver}" == libfuzzer ]]; then
  build_dir="${AERIE_FUZZ_BUILD_DIR:-build-fuzz}"
  CC="${AERIE_FUZZ_CC:-clang}" CXX="${AERIE_FUZZ_CXX:-clang++}" cmake -S . -B "$build_dir" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAERIE_SANITIZE=ON -DAERIE_FUZZ_LIBFUZZER=ON -DAERIE_BUILD_BENCH=OFF >/dev/null
else
  # The sanitizer stage's configuration (tools/sanitize_test.sh): its libraries are reused as built.
  build_dir="${AERIE_ASAN_BUILD_DIR:-build-asan}"
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAERIE_SANITIZE=ON -DAERIE_BUILD_BENCH=OFF >/dev/null
fi
# aerie_fuzz builds them all in parallel (the Makefile generator builds several --target goals one after
# another).
if [[ -z "${FUZZ_TARGETS:-}" ]]; then
  cmake --build "$build_dir" -j"$jobs" --target aerie_fuzz
else
  cmake --build "$build_dir" -j"$jobs" --target "${targets[@]/#/fuzz_}"
fi
echo "fuzz.sh: built ${#targets[@]} fuzz targets in ${SECONDS}s"
echo "fuzz.sh build: ${SECONDS}s" >> "${AERIE_STAGE_LOG:-/dev/null}"

# A finding stops the target at once; one allocation over 2 GiB, or 3 GiB resident, is a finding too.
# Leaks are checked once, at each target's exit.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:allocator_may_return_null=0:max_allocation_size_mb=2048"
ASAN_OPTIONS+=":detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
out="$build_dir/fuzz-out"
rm -rf "$out"
mkdir -p "$out"

# Runs one target; its log and exit status land in $out/<target>.{log,rc}.
run_target() {
  local target="$1" args=() status=0
  args+=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=3072 -artifact_prefix="$out/$target-")
  args+=(-dict="tests/fuzz/dict/$target.dict")
  if [[ -n "${FUZZ_SEED:-}" ]]; then args+=(-seed="$FUZZ_SEED"); fi
  if [[ "${AERIE_FUZZ_ENGINE:-driver}" == libfuzzer ]]; then
    mkdir -p "$out/corpus-$target"
    args+=("$out/corpus-$target")  # libFuzzer adds what it finds to its first folder
  fi
  "$build_dir/tests/fuzz/fuzz_$target" "${args[@]}" "tests/fuzz/corpus/$target" > "$out/$target.log" 2>&1 || status=$?
  echo "$status" > "$out/$target.rc"
}

fuzz_seconds=$SECONDS
for target in "${targets[@]}"; do
  while (( $(jobs -rp | wc -l) >= jobs )); do wait -n || true; done  # at most $jobs at once
  run_target "$target" &
done
wait
failed=()
for target in "${targets[@]}"; do
  if [[ "$(cat "$out/$target.rc")" == 0 ]]; then
    echo "fuzz.sh: $target: $(grep -E 'aerie-fuzz: done|^Done' "$out/$target.log" | tail -1)"
    continue
  fi
  failed+=("$target")
  echo "fuzz.sh: $target FAILED (exit $(cat "$out/$target.rc")); the end of $out/$target.log:"
  tail -60 "$out/$target.log"
  # A target killed outright leaves its input as <target>-in-progress-*.
  for path in "$out/$target-"*; do
    if [[ -e "$path" ]]; then echo "fuzz.sh: $target reproducer: $path"; fi
  done
done
echo "fuzz.sh: fuzzing took $((SECONDS - fuzz_seconds))s"
if (( ${#failed[@]} )); then
  echo "fuzz.sh: findings in: ${failed[*]}"
  exit 1
fi
