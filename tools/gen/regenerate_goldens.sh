#!/usr/bin/env bash
# Re-runs every generator of committed golden test data, writing into the tree, then checks with git that
# the committed files are what the generators produce today: a generator that drifted (a changed reference,
# a new dependency version) shows up as a modified or new file, named with the step that wrote it.
#
#   tools/gen/regenerate_goldens.sh [--check | --write] [--only STEP[,STEP...]] [--list]
#
#   --check   (default) exit 1 when, after the run, `git diff` or untracked files show tests/data or models
#             differing from the commit; the new files stay in the tree for `git diff` (`git checkout --
#             tests/data models` puts the committed ones back). Each step names the files it changed.
#   --write   regenerate on purpose: same run, exit 0 whatever changed; review and commit the result
#   --only    run only these steps (names from --list); --list prints the steps and exits
#
# Idempotent: every step is deterministic, so a second run changes nothing the first did not. Exits 2 when
# a generator fails. A step whose tools are missing (python3-torch, python3-jinja2, python3-regex, the
# corpus packages, node) is skipped with a message; the tokenizer steps run
# tools/gen/tokenizer/fetch_tokenizers.sh --reference first when the npm reference packages are absent.
#
# BLAS: PyTorch's float32 (and some float64) sums depend on the BLAS library, so each PyTorch step loads,
# through LD_LIBRARY_PATH, the one its committed files were made with: Debian's reference BLAS (libblas3)
# for the llama, eagle and deepseek references (under OpenBLAS their `checks` self-test figures move), and
# OpenBLAS (libopenblas0-openmp, which tools/setup.sh installs for training) for the int8 DeepSeek cases
# (max_abs_logit moves in the last digit) and the trained-model goldens (hidden states and margins move).
# Measured: about 4 minutes on 2 shared cores, plus the npm fetch of the tokenizer references once.
#
# Not regenerated (and why):
#   models/*/ weights, training_summary.json   training runs (tools/gen/trained/train_*.py), minutes to hours
#                                              each on 2 cores; the models' tokenizer files ARE checked
#   tests/fuzz/corpus/                         seeds cut from the current tests' inputs by
#                                              tests/fuzz/make_corpus.py; they follow the tests as they
#                                              grow, so drift there is expected (refresh by hand)
#   tests/data/chat_template/ inputs           publishers' templates (*.jinja, templates/) and the
#   (cases.json, snippets.json, ...)           hand-written cases; their *expected.json ARE checked
#   READMEs, tests/server/openai_client/tokenizer/   written by hand
#   tests/data/regex/formats.json              cut from a JSON-Schema-Test-Suite checkout by
#                                              tools/gen/regex/extract_formats.py (not in this repository)
set -euo pipefail
cd "$(dirname "$0")/../.."

PY=/usr/bin/python3
REFERENCE_BLAS=/usr/lib/x86_64-linux-gnu/blas             # libblas3
OPEN_BLAS=/usr/lib/x86_64-linux-gnu/openblas-openmp       # libopenblas0-openmp
STEPS=(io_npy io_torch_zip json_cases regex_cases chat_template llama lora llama_int8 llama_int4 eagle spec_tiny_vocab16
       deepseek deepseek_heads deepseek_int8 deepseek_tiny_vocab trained_corpus trained_llama trained_deepseek
       tokenizer_expected trained_tokenizer_expected)

mode=check
only=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --check) mode=check; shift ;;
    --write) mode=write; shift ;;
    --only) only="${2:?--only needs step names}"; shift 2 ;;
    --list) printf '%s\n' "${STEPS[@]}"; exit 0 ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    *) echo "regenerate_goldens.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# ---- what a step needs ----------------------------------------------------------------------------------
missing=""
need_python() { "$PY" -c "import $1" 2>/dev/null || missing+=" python module $1 (${2:-Debian python3-$1})"; }
need_command() { command -v "$1" >/dev/null 2>&1 || missing+=" $1"; }
need_file() { [[ -e "$1" ]] || missing+=" $1 ($2)"; }
with_reference_blas() {
  if [[ -e "$REFERENCE_BLAS/libblas.so.3" ]]; then LD_LIBRARY_PATH="$REFERENCE_BLAS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
  else echo "warning: no reference BLAS in $REFERENCE_BLAS (libblas3): float32 check figures may move"; "$@"; fi
}
with_openblas() {
  if [[ -e "$OPEN_BLAS/libblas.so.3" ]]; then LD_LIBRARY_PATH="$OPEN_BLAS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
  else echo "warning: no OpenBLAS in $OPEN_BLAS (libopenblas0-openmp): float32 figures may move"; "$@"; fi
}
npm_reference="$PWD/.cache/npm-tokenizers/node_modules/@huggingface/transformers"
need_node_reference() {
  need_command node
  [[ -n "$missing" ]] && return
  if [[ ! -d "$npm_reference" ]]; then
    bash tools/gen/tokenizer/fetch_tokenizers.sh --reference >/dev/null 2>&1 || true
  fi
  need_file "$npm_reference" "tools/gen/tokenizer/fetch_tokenizers.sh --reference (npm) failed"
}

# ---- the steps: needs_<step> checks, run_<step> writes, outputs_<step> lists what it writes --------------
L=tests/data/llama
D=tests/data/deepseek

outputs_io_npy() { echo tests/data/io/numpy_2x3.npy tests/data/io/numpy_5.npy tests/data/io/numpy_f64_2x2.npy; }
needs_io_npy() { need_python numpy; }
run_io_npy() { "$PY" tools/gen/io/make_npy_data.py tests/data/io; }

outputs_io_torch_zip() { echo tests/data/io/state_dict.bin; }
needs_io_torch_zip() { need_python torch; }
run_io_torch_zip() { "$PY" tools/gen/io/make_torch_zip_data.py tests/data/io/state_dict.bin; }

outputs_json_cases() { echo tests/data/sample/json_cases.json; }
needs_json_cases() { :; }
run_json_cases() { "$PY" tools/gen/structured/make_json_cases.py --out tests/data/sample/json_cases.json --seed 1; }

outputs_regex_cases() { echo tests/data/regex/random_cases.json; }
needs_regex_cases() { :; }
run_regex_cases() { "$PY" tools/gen/regex/make_cases.py > tests/data/regex/random_cases.json; }

outputs_chat_template() {
  echo tests/data/chat_template/expected.json tests/data/chat_template/snippets_expected.json \
    tests/data/chat_template/publisher_expected.json
}
needs_chat_template() { need_python jinja2; }
run_chat_template() { "$PY" tools/gen/chat_template/render_reference.py; }

outputs_llama() { echo "$L"; }
needs_llama() { need_python torch; }
run_llama() { with_reference_blas "$PY" tools/gen/reference/make_goldens.py; }

outputs_lora() { echo tests/data/lora; }
needs_lora() { need_python torch; }
run_lora() { with_reference_blas bash tools/gen/make_lora_goldens.sh; }

outputs_llama_int8() { echo tests/data/llama_int8; }
needs_llama_int8() { need_python torch; }
run_llama_int8() {
  with_reference_blas "$PY" tools/gen/reference/int8_checkpoint.py --source "$L/bf16_gqa_rope_scaled_tied" \
    --out tests/data/llama_int8/int8_channel_bf16scale --group 0 --scale-dtype bf16
  with_reference_blas "$PY" tools/gen/reference/int8_checkpoint.py --source "$L/bf16_gqa_rope_scaled_tied" \
    --out tests/data/llama_int8/int8_group32_f32scale --group 32 --scale-dtype f32
}

outputs_llama_int4() { echo tests/data/llama_int4; }
needs_llama_int4() { need_python torch; }
run_llama_int4() {
  local out=tests/data/llama_int4
  with_reference_blas "$PY" tools/gen/reference/int4_checkpoint.py --source "$L/bf16_sharded_untied" \
    --out "$out/gptq_g64" --format gptq --group 64
  with_reference_blas "$PY" tools/gen/reference/int4_checkpoint.py --source "$L/bf16_sharded_untied" \
    --out "$out/gptq_actorder_sym_g64" --format gptq --group 64 --symmetric --act-order
  with_reference_blas "$PY" tools/gen/reference/int4_checkpoint.py --source "$L/bf16_sharded_untied" \
    --out "$out/awq_g64" --format awq --group 64
}

outputs_eagle() { echo tests/data/eagle; }
needs_eagle() { need_python torch; }
run_eagle() { with_reference_blas "$PY" tools/gen/eagle/make_goldens.py; }

outputs_spec_tiny_vocab16() { echo tests/data/spec; }
needs_spec_tiny_vocab16() { need_python torch; }
run_spec_tiny_vocab16() {
  local out=tests/data/spec
  "$PY" tools/gen/make_checkpoint.py --out "$out/tiny_vocab16" --seed 7 --hidden-size 32 --intermediate-size 64 \
    --num-heads 4 --num-kv-heads 2 --head-dim 16 --num-layers 2 --vocab-size 16 --dtype f32 --tie \
    --init-gain 1.5 --embed-std 0.3
  "$PY" tools/gen/eagle/make_eagle_head.py --target "$out/tiny_vocab16" --out "$out/tiny_vocab16_eagle1" \
    --kind eagle1 --dtype f32 --seed 1 --init-gain 1.0
  "$PY" tools/gen/eagle/make_eagle_head.py --target "$out/tiny_vocab16" --out "$out/tiny_vocab16_eagle3" \
    --kind eagle3 --dtype bf16 --names midlayer --draft-vocab 12 --aux-layer-ids 0,1,2 --seed 1 --init-gain 1.0
}

outputs_deepseek() { echo "$D"; }
needs_deepseek() { need_python torch; }
run_deepseek() { with_reference_blas "$PY" tools/gen/deepseek/make_goldens.py; }

outputs_deepseek_heads() { echo tests/data/deepseek_heads; }
needs_deepseek_heads() { need_python torch; }
run_deepseek_heads() { with_reference_blas "$PY" tools/gen/deepseek/make_head_goldens.py; }

outputs_deepseek_int8() { echo tests/data/deepseek_int8; }
needs_deepseek_int8() { need_python torch; }
run_deepseek_int8() {
  with_openblas "$PY" tools/gen/deepseek/make_int8_checkpoint.py --source "$D/bf16_qlora_yarn" \
    --out tests/data/deepseek_int8/bf16_qlora_yarn_int8_bf16scale --group 0 --scale-dtype bf16
  with_openblas "$PY" tools/gen/deepseek/make_int8_checkpoint.py --source "$D/fp8_qlora_yarn" \
    --out tests/data/deepseek_int8/fp8_qlora_yarn_int8_f32scale --group 0 --scale-dtype f32
}

outputs_deepseek_tiny_vocab() {
  echo tests/data/deepseek_tiny_vocab tests/data/deepseek_tiny_vocab_mla_head tests/data/deepseek_tiny_vocab_mha_head
}
needs_deepseek_tiny_vocab() { need_python torch; }
run_deepseek_tiny_vocab() {
  local target=tests/data/deepseek_tiny_vocab
  "$PY" tools/gen/deepseek/make_deepseek_checkpoint.py --out "$target" --seed 1 --vocab-size 16 --hidden-size 32 \
    --num-layers 2 --num-heads 2 --q-lora-rank 16 --kv-lora-rank 16 --qk-nope-head-dim 8 --qk-rope-head-dim 8 \
    --v-head-dim 8 --n-routed-experts 4 --n-group 2 --topk-group 1 --num-experts-per-tok 2 \
    --moe-intermediate-size 16 --intermediate-size 64 --first-k-dense-replace 1 --embed-std 0.35
  "$PY" tools/gen/deepseek/make_ds_eagle_head.py --target "$target" --out "${target}_mla_head" --kind mla \
    --n-fused 3 --aux-layer-ids 0,1,2 --lm-head-std 0.35 --seed 1
  "$PY" tools/gen/deepseek/make_ds_eagle_head.py --target "$target" --out "${target}_mha_head" --kind mha \
    --names midlayer --draft-vocab 12 --n-fused 3 --aux-layer-ids 0,1,2 --rope plain --lm-head-std 0.35 --seed 1
}

# The held-out prompts and validation sample, and the trained tokenizer (deterministic BPE training on the
# same corpus, 2 s), which both tiny models ship.
outputs_trained_corpus() {
  echo tests/data/trained/prompts.json tests/data/trained/validation_sample.json \
    models/aerie-tiny-llama/tokenizer.json models/aerie-tiny-llama/tokenizer_config.json \
    models/aerie-tiny-deepseek/tokenizer.json models/aerie-tiny-deepseek/tokenizer_config.json
}
needs_trained_corpus() {
  need_python regex "Debian python3-regex"
  need_command Rscript
  local package
  for package in r-cran-janeaustenr jargon-text dict-devil bible-kjv-text bible-kjv; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=" Debian $package"
  done
}
run_trained_corpus() {
  "$PY" tools/gen/trained/make_corpus.py --out "$tmp/corpus" --test-data tests/data/trained
  "$PY" tools/gen/trained/train_tokenizer.py --corpus "$tmp/corpus" --out "$tmp/tokenizer"
  for model in aerie-tiny-llama aerie-tiny-deepseek; do
    cp "$tmp/tokenizer/tokenizer.json" "$tmp/tokenizer/tokenizer_config.json" "models/$model/"
  done
}

outputs_trained_llama() { echo tests/data/trained/model_golden; }
needs_trained_llama() { need_python torch; need_python regex "Debian python3-regex"; }
run_trained_llama() { with_openblas "$PY" tools/gen/trained/make_model_goldens.py; }

outputs_trained_deepseek() { echo tests/data/trained/deepseek_golden; }
needs_trained_deepseek() { need_python torch; }
run_trained_deepseek() { with_openblas "$PY" tools/gen/trained/make_deepseek_goldens.py; }

outputs_tokenizer_expected() { echo tests/data/tokenizer; }
needs_tokenizer_expected() { need_node_reference; }
run_tokenizer_expected() { node tools/gen/tokenizer/make_expected.mjs; }

outputs_trained_tokenizer_expected() { echo tests/data/trained/tokenizer_expected.json; }
needs_trained_tokenizer_expected() { need_node_reference; }
run_trained_tokenizer_expected() { node tools/gen/trained/make_tokenizer_expected.mjs; }

# ---- run ------------------------------------------------------------------------------------------------
selected=("${STEPS[@]}")
if [[ -n "$only" ]]; then
  IFS=, read -r -a selected <<< "$only"
  for step in "${selected[@]}"; do
    [[ " ${STEPS[*]} " == *" $step "* ]] || { echo "regenerate_goldens.sh: no step '$step' (see --list)" >&2; exit 2; }
  done
fi

# What git already sees as changed under a step's outputs is not the step's doing: listed, never blamed.
changed_files() { git status --porcelain=v1 --untracked-files=all -- "$@" | cut -c4-; }
before="$(changed_files tests/data models)"
if [[ -n "$before" ]]; then
  echo "regenerate_goldens.sh: already changed before this run (not counted):"
  printf '  %s\n' $before
fi

drifted=()
failed=()
skipped=()
start=$SECONDS
for step in "${selected[@]}"; do
  missing=""
  "needs_$step"
  if [[ -n "$missing" ]]; then
    skipped+=("$step")
    echo "SKIP   $step: missing$missing"
    continue
  fi
  step_start=$SECONDS
  read -r -a outputs <<< "$("outputs_$step")"
  # A subshell with -e of its own: a step stops at its first failing generator.
  set +e
  (set -e; "run_$step") > "$tmp/$step.log" 2>&1
  status=$?
  set -e
  if [[ $status -ne 0 ]]; then
    failed+=("$step")
    echo "FAIL   $step (exit status $status); the end of its output:"
    tail -n 20 "$tmp/$step.log" | sed 's/^/       /'
    continue
  fi
  now="$(comm -13 <(printf '%s\n' $before | sort) <(changed_files "${outputs[@]}" | sort))"
  if [[ -n "$now" ]]; then
    drifted+=("$step")
    echo "DRIFT  $step ($((SECONDS - step_start)) s) changed:"
    printf '         %s\n' $now
  else
    echo "ok     $step ($((SECONDS - step_start)) s)"
  fi
done

echo "regenerate_goldens.sh: ${#selected[@]} steps in $((SECONDS - start)) s: ${#drifted[@]} drifted," \
  "${#failed[@]} failed, ${#skipped[@]} skipped${skipped[*]:+ (${skipped[*]})}"
if ((${#failed[@]})); then exit 2; fi
# The verdict is git's, whoever changed the files: the tree must hold exactly the committed goldens.
untracked="$(git ls-files --others --exclude-standard -- tests/data models)"
if git --no-pager diff --exit-code --stat -- tests/data models && [[ -z "$untracked" ]]; then
  echo "regenerate_goldens.sh: tests/data and models are what the generators write"
  exit 0
fi
[[ -z "$untracked" ]] || printf 'untracked: %s\n' $untracked
if [[ "$mode" == check ]]; then
  echo "regenerate_goldens.sh: tests/data or models differ from the commit${drifted[*]:+ (written by: ${drifted[*]})};" \
    "inspect with git diff, restore with: git checkout -- tests/data models" >&2
  exit 1
fi
exit 0
