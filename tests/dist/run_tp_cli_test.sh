#!/usr/bin/env bash
# Tensor-parallel Llama through the CLI (issue 22), mpirun on loopback:
#   logits CHECKPOINT...: `aerie logits` at T=2 equals the single-process logits within 1e-4 of max |logit|;
#   logits-at N CHECKPOINT...: the same at T=N (checkpoints whose kv heads N divides);
#   generate MODEL [HEAD]: greedy `aerie generate` at T=2 gives the same ids as T=1 (with HEAD: T=2 speculative
#                         with that draft head on rank 0, chains and draft trees, gives plain T=1's ids);
#   serve MODEL HEAD:     `aerie serve` at T=2 with the head answers a greedy completion as one process does,
#                         again after an idle spell longer than the collective timeout (the heartbeat), and
#                         every rank exits after SIGTERM; with a hung follower, a request gets 503 and
#                         the job exits non-zero;
#   refusals MODEL MQA:   T=3 on MODEL (2 kv heads), T=2 on MQA (1 kv head), T=2 without mpirun,
#                         `aerie bench-accept` with T=2, and --data-parallel on Llama or beside an unequal
#                         --expert-parallel or any --tensor-parallel each fail with their message.
#   deepseek-logits CHECKPOINT...: DeepSeek-V3 `aerie logits` with --tensor-parallel 2 and 3 and
#                         --expert-parallel 2 and 3 each equal one process within 1e-4 (FP8 checkpoints whose
#                         heads cut a 128x128 tile: expert parallel only, and tensor parallel's refusal); then
#                         an FP8 checkpoint made here with tile-aligned heads, at --tensor-parallel 2 and
#                         --expert-parallel 2 and 4;
#                         every layout at 4 ranks on the first checkpoint; --data-parallel 3 on every
#                         checkpoint (one sequence: rank 0 runs its attention, the others add zero rows),
#                         and 2 and 4 on the tile-aligned one;
#   deepseek-gguf-logits FILE...: DeepSeek-V3 GGUF files at --expert-parallel and --data-parallel 2 and 3 and
#                         --tensor-parallel 2 each equal one process within 1e-4; a Q8_0 file's --tensor-parallel 3
#                         refusal;
#   deepseek-generate MODEL HEAD: greedy `aerie generate` with --expert-parallel 2 and the MTP drafter, and
#                         with --expert-parallel 3 and HEAD, gives one process's plain ids and reports every
#                         rank's expert load;
#   deepseek-serve MODEL HEAD: `aerie serve --data-parallel 2` with HEAD, drafting chains and then trees,
#                         answers four concurrent greedy completions as one process does, both ranks run
#                         attention for some of them (aerie_attention_rows_total, and rank 1's own count),
#                         and both ranks exit after SIGTERM.
# usage: run_tp_cli_test.sh MPIRUN AERIE COMPARE MODE ARGS...
set -uo pipefail
mpirun=$1 aerie=$2 compare=$3 mode=$4
shift 4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 AERIE_DIST_TIMEOUT_S=20
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
# timeout: a wedged job must fail the test, never hang it.
ranks() { local n=$1; shift; timeout 60 "$mpirun" --oversubscribe -np "$n" --mca btl self,vader "$@"; }
# expect_error MESSAGE COMMAND...: the command fails and its output holds MESSAGE.
expect_error() {
  local expected=$1; shift
  if "$@" >"$work/log" 2>&1; then fail "exited 0: $*"; return; fi
  grep -qF -- "$expected" "$work/log" || { cat "$work/log"; fail "no '$expected' from: $*"; }
}

ids=1,17,5,42,9,33,2,7,100,64,3,11
case $mode in
  logits)
    for model in "$@"; do
      name=$(basename "$model")
      "$aerie" logits --model "$model" --ids $ids --out "$work/$name.t1.npy" --quiet || fail "T=1 logits on $name"
      ranks 2 "$aerie" logits --model "$model" --ids $ids --out "$work/$name.t2.npy" --quiet --tensor-parallel 2 ||
        fail "T=2 logits on $name"
      "$compare" "$work/$name.t1.npy" "$work/$name.t2.npy" 1e-4 || fail "T=2 logits differ on $name"
    done ;;
  logits-at)
    # logits-at N CHECKPOINT...: the same at --tensor-parallel N.
    n=$1; shift
    for model in "$@"; do
      name=$(basename "$model")
      "$aerie" logits --model "$model" --ids $ids --out "$work/$name.t1.npy" --quiet || fail "T=1 logits on $name"
      ranks "$n" "$aerie" logits --model "$model" --ids $ids --out "$work/$name.t$n.npy" --quiet --tensor-parallel "$n" ||
        fail "T=$n logits on $name"
      "$compare" "$work/$name.t1.npy" "$work/$name.t$n.npy" 1e-4 || fail "T=$n logits differ on $name"
    done ;;
  generate)
    model=$1
    run=("$aerie" generate --model "$model" --prompt "Once upon a time, a little fox" --max-tokens 32 --ignore-eos --json
         --quiet)
    "${run[@]}" >"$work/t1.json" || fail "T=1 generate"
    ranks 2 "${run[@]}" --tensor-parallel 2 >"$work/t2.json" || fail "T=2 generate"
    # Only rank 0 writes: exactly one JSON line.
    [[ $(wc -l <"$work/t2.json") == 1 ]] || fail "T=2 wrote $(wc -l <"$work/t2.json") lines to stdout, not 1"
    t1=$(grep -o '"ids":\[[0-9,]*\]' "$work/t1.json") t2=$(grep -o '"ids":\[[0-9,]*\]' "$work/t2.json")
    echo "T=1 $t1"; echo "T=2 $t2"
    [[ -n $t1 && $t1 == "$t2" ]] || fail "greedy ids differ between T=1 and T=2"
    if (($# > 1)); then
      ranks 2 "${run[@]}" --tensor-parallel 2 --draft "$2" >"$work/t2s.json" || fail "T=2 speculative generate"
      t2s=$(grep -o '"ids":\[[0-9,]*\]' "$work/t2s.json")
      echo "T=2 with $2: $t2s"
      [[ $t1 == "$t2s" ]] || fail "T=2 speculative ids differ from plain T=1"
      grep -q '"accepted_tokens":[1-9]' "$work/t2s.json" || fail "T=2 speculative accepted no draft"
      # Draft trees: the followers repeat rank 0's moves of each verified path into place.
      ranks 2 "${run[@]}" --tensor-parallel 2 --draft "$2" --spec-tree-top-k 2 --spec-tree-depth 4 \
        --spec-tree-tokens 6 >"$work/t2t.json" || fail "T=2 generate with draft trees"
      t2t=$(grep -o '"ids":\[[0-9,]*\]' "$work/t2t.json")
      echo "T=2 with $2, tree 2:4:6: $t2t"
      [[ $t1 == "$t2t" ]] || fail "T=2 tree ids differ from plain T=1"
      grep -q '"mean_acceptance_length":[2-9]' "$work/t2t.json" || fail "T=2 trees accepted less than one draft a round"
    fi ;;
  serve)
    model=$1 head=$2
    body='{"model":"m","prompt":"It is a truth universally","max_tokens":16,"temperature":0}'
    # serve_port LOG: waits for the server that logs to LOG to be ready, prints its port.
    serve_port() {
      for _ in $(seq 120); do grep -q "ready" "$1" && break; sleep 0.5; done
      grep -o 'http://127.0.0.1:[0-9]*' "$1" | head -1 | sed 's/.*://'
    }
    # serve_text LOG: the text of a greedy completion from that server.
    serve_text() {
      curl -s --max-time 30 "http://127.0.0.1:$(serve_port "$1")/v1/completions" -H 'Content-Type: application/json' \
        -d "$body" | grep -o '"text":"[^"]*"'
    }
    # serve_status LOG: the HTTP status of a completion request to that server.
    serve_status() {
      curl -s -o /dev/null -w '%{http_code}' --max-time 30 "http://127.0.0.1:$(serve_port "$1")/v1/completions" \
        -H 'Content-Type: application/json' -d "$body"
    }
    "$aerie" serve --model "$model" --served-model-name m --port 0 --threads 1 --draft "$head" 2>"$work/s1.log" &
    one=$!
    text1=$(serve_text "$work/s1.log")
    kill -TERM $one; wait $one
    # A collective timeout shorter than the idle spell: only the heartbeat keeps the follower waiting.
    # The tag marks this job's ranks apart from other tests' ranks running beside it.
    AERIE_TEST_TAG=$work AERIE_DIST_TIMEOUT_S=3 ranks 2 "$aerie" serve --model "$model" --served-model-name m --port 0 --threads 1 \
      --draft "$head" --tensor-parallel 2 2>"$work/s2.log" &
    two=$!
    text2=$(serve_text "$work/s2.log")
    sleep 5
    text3=$(serve_text "$work/s2.log")
    # SIGTERM to rank 0, as mpirun passes it on: rank 0 drains and stops the follower, and both exit 0.
    for p in $(pgrep -f -- "--tensor-parallel 2"); do
      env=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null)
      grep -qx "AERIE_TEST_TAG=$work" <<<"$env" && grep -qx 'OMPI_COMM_WORLD_RANK=0' <<<"$env" && kill -TERM "$p"
    done
    wait $two || fail "T=2 serve exited $? after SIGTERM"
    grep -q "timed out" "$work/s2.log" && { cat "$work/s2.log"; fail "a collective timed out"; }
    echo "T=1 $text1"; echo "T=2 $text2"; echo "T=2 after idle $text3"
    [[ -n $text1 && $text1 == "$text2" && $text2 == "$text3" ]] || { cat "$work/s2.log"; fail "T=2 serve differs"; }
    pgrep -f -- "aerie serve .*--tensor-parallel 2" && fail "a rank outlived SIGTERM"
    # A follower that hangs (AERIE_DIST_FAULT): the request in flight is answered 503, and the job ends with
    # a failing status, for a supervisor to restart.
    AERIE_DIST_TIMEOUT_S=2 AERIE_DIST_FAULT=1:broadcast:hang ranks 2 "$aerie" serve --model "$model" \
      --served-model-name m --port 0 --threads 1 --tensor-parallel 2 2>"$work/s3.log" &
    three=$!
    status=$(serve_status "$work/s3.log")
    wait $three && fail "T=2 serve with a hung rank exited 0"
    [[ $status == 503 ]] || { cat "$work/s3.log"; fail "a hung rank answered $status, not 503"; }
    grep -q "ranks are out of step; exiting" "$work/s3.log" || fail "no exit message for the hung rank"
    # A follower that dies in the middle of a forward (its 5th all-reduce): mpirun sends rank 0 SIGTERM and,
    # after odls_base_sigkill_timeout (1 s by default, 20 here: a long grace as docs/multi-process.md advises), SIGKILL;
    # rank 0's collective times out first, so the request in flight is answered 503 and the job exits
    # non-zero. Rank 0 then ends itself within seconds (MPI_Abort, and _exit if that blocks): it used to
    # stay in MPI_Abort (or MPI_Finalize) until the SIGKILL. (mpirun itself still sleeps out the grace
    # before it exits: Open MPI's kill sequence waits the full odls_base_sigkill_timeout.)
    AERIE_TEST_TAG=$work.s4 AERIE_DIST_TIMEOUT_S=2 AERIE_DIST_FAULT=1:all_reduce_sum:exit:5 ranks 2 \
      --mca odls_base_sigkill_timeout 20 "$aerie" serve --model "$model" --served-model-name m --port 0 --threads 1 \
      --tensor-parallel 2 2>"$work/s4.log" &
    four=$!
    serve_port "$work/s4.log" >/dev/null
    rank0=""
    for p in $(pgrep -f -- "--tensor-parallel 2"); do
      env=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null)
      grep -qx "AERIE_TEST_TAG=$work.s4" <<<"$env" && grep -qx 'OMPI_COMM_WORLD_RANK=0' <<<"$env" && rank0=$p
    done
    status=$(serve_status "$work/s4.log")
    answered=$SECONDS
    # Alive: a process that is not a zombie (mpirun reaps its ranks only after its kill sequence).
    alive() { local state; state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [[ $state != Z ]]; }
    while [[ -n $rank0 ]] && alive "$rank0" && ((SECONDS - answered < 15)); do sleep 0.2; done
    lingered=$((SECONDS - answered))
    wait $four && fail "T=2 serve with a dead rank exited 0"
    [[ $status == 503 ]] || { cat "$work/s4.log"; fail "a dead rank answered $status, not 503"; }
    [[ -n $rank0 ]] || fail "rank 0 of the dead-rank job not found"
    ((lingered < 10)) || { cat "$work/s4.log"; fail "rank 0 outlived its 503 by ${lingered}s"; }
    echo "a dead rank: 503, rank 0 ended ${lingered}s after it" ;;
  refusals)
    model=$1 mqa=$2
    expect_error "n_head_kv 2 is not divisible by 3" \
      ranks 3 "$aerie" logits --model "$model" --ids 1,2 --out "$work/x.npy" --quiet --tensor-parallel 3
    expect_error "n_head_kv 1 is not divisible by 2" \
      ranks 2 "$aerie" logits --model "$mqa" --ids 1,2 --out "$work/x.npy" --quiet --tensor-parallel 2
    expect_error "--tensor-parallel 2 needs exactly 2 ranks" \
      "$aerie" logits --model "$model" --ids 1,2 --out "$work/x.npy" --quiet --tensor-parallel 2
    expect_error "run tensor parallel so far" \
      "$aerie" bench-accept --model "$model" --draft ngram --quiet --tensor-parallel 2
    expect_error "LlamaForCausalLM has none" \
      ranks 2 "$aerie" logits --model "$model" --ids 1,2 --out "$work/x.npy" --quiet --expert-parallel 2
    expect_error "--tensor-parallel 2 and --expert-parallel 3 differ" \
      "$aerie" logits --model "$model" --ids 1,2 --out "$work/x.npy" --quiet --tensor-parallel 2 --expert-parallel 3
    expect_error "LlamaForCausalLM has no experts to share" \
      ranks 2 "$aerie" logits --model "$model" --ids 1,2 --out "$work/x.npy" --quiet --data-parallel 2
    expect_error "--data-parallel 2 and --tensor-parallel 2 exclude each other" \
      "$aerie" logits --model "$model" --ids 1,2 --out "$work/x.npy" --quiet --data-parallel 2 --tensor-parallel 2
    expect_error "--data-parallel 2 and --expert-parallel 3 differ" \
      "$aerie" logits --model "$model" --ids 1,2 --out "$work/x.npy" --quiet --data-parallel 2 --expert-parallel 3 ;;
  deepseek-logits)
    # same_logits NAME MODEL RANKS FLAG: the run at RANKS ranks with FLAG equals $work/NAME.t1.npy.
    same_logits() {
      ranks "$3" "$aerie" logits --model "$2" --ids $ids --out "$work/$1.$4$3.npy" --quiet "$4" "$3" ||
        { fail "$4 $3 logits on $1"; return; }
      "$compare" "$work/$1.t1.npy" "$work/$1.$4$3.npy" 1e-4 || fail "$4 $3 logits differ on $1"
    }
    for model in "$@"; do
      name=$(basename "$model")
      "$aerie" logits --model "$model" --ids $ids --out "$work/$name.t1.npy" --quiet || fail "one-process logits on $name"
      same_logits "$name" "$model" 3 --data-parallel
      for n in 2 3; do
        same_logits "$name" "$model" $n --expert-parallel
        if grep -q '"quant_method": *"fp8"' "$model/config.json"; then
          expect_error "an FP8 projection splits on its 128x128 scale tiles only" \
            ranks $n "$aerie" logits --model "$model" --ids $ids --out "$work/x.npy" --quiet --tensor-parallel $n
        else
          same_logits "$name" "$model" $n --tensor-parallel
        fi
      done
    done
    # Four ranks, one head and two experts each, in every layout.
    for flag in --tensor-parallel --expert-parallel --data-parallel; do same_logits bf16_qlora_yarn "$1" 4 $flag; done
    # FP8 heads of 192 q rows and 256 kv_b rows: two heads a rank keep whole tiles.
    /usr/bin/python3 "$(dirname "$0")/../../tools/gen/deepseek/make_deepseek_checkpoint.py" --out "$work/fp8_tiles" --fp8 \
      --seed 7 --hidden-size 128 --num-heads 4 --qk-nope-head-dim 128 --qk-rope-head-dim 64 --v-head-dim 128 \
      --q-lora-rank 128 --kv-lora-rank 128 --intermediate-size 256 --moe-intermediate-size 128 --n-routed-experts 4 \
      --n-group 2 --topk-group 1 --num-experts-per-tok 2 --n-shared-experts 1 --num-layers 2 --first-k-dense-replace 1 \
      --vocab-size 256 --yarn --mtp 0 --norm-topk-prob >/dev/null || fail "making the FP8 checkpoint"
    "$aerie" logits --model "$work/fp8_tiles" --ids $ids --out "$work/fp8_tiles.t1.npy" --quiet || fail "FP8 one process"
    same_logits fp8_tiles "$work/fp8_tiles" 2 --tensor-parallel
    same_logits fp8_tiles "$work/fp8_tiles" 2 --expert-parallel
    same_logits fp8_tiles "$work/fp8_tiles" 4 --expert-parallel
    same_logits fp8_tiles "$work/fp8_tiles" 2 --data-parallel
    same_logits fp8_tiles "$work/fp8_tiles" 4 --data-parallel ;;
  deepseek-gguf-logits)
    # GGUF deepseek2 files (block types read in place, kv_b split into attn_k_b / attn_v_b): --expert-parallel
    # and --data-parallel 2 and 3 and --tensor-parallel 2 each equal one process within 1e-4; a Q8_0 file at
    # --tensor-parallel 3 (one head's o_proj columns cut a block) is refused naming --expert-parallel.
    for model in "$@"; do
      name=$(basename "$model" .gguf)
      "$aerie" logits --model "$model" --ids $ids --out "$work/$name.t1.npy" --quiet || fail "one-process logits on $name"
      for run in "2 --expert-parallel" "3 --expert-parallel" "2 --data-parallel" "3 --data-parallel" "2 --tensor-parallel"; do
        read -r n flag <<<"$run"
        ranks "$n" "$aerie" logits --model "$model" --ids $ids --out "$work/$name$flag$n.npy" --quiet "$flag" "$n" ||
          { fail "$flag $n logits on $name"; continue; }
        "$compare" "$work/$name.t1.npy" "$work/$name$flag$n.npy" 1e-4 || fail "$flag $n logits differ on $name"
      done
      if [[ $name == *q8_0 ]]; then
        expect_error "a Q8_0 projection splits on its blocks of 32 values only" \
          ranks 3 "$aerie" logits --model "$model" --ids $ids --out "$work/x.npy" --quiet --tensor-parallel 3
      fi
    done ;;
  deepseek-generate)
    model=$1 head=$2
    run=("$aerie" generate --model "$model" --prompt "Once upon a time, a little fox" --max-tokens 32 --ignore-eos --json
         --quiet)
    "${run[@]}" >"$work/t1.json" || fail "one-process generate"
    ranks 2 "${run[@]}" --expert-parallel 2 --draft mtp >"$work/e2.json" || fail "--expert-parallel 2 generate with MTP"
    ranks 3 "${run[@]}" --expert-parallel 3 --draft "$head" >"$work/e3.json" || fail "--expert-parallel 3 generate"
    # Data parallel: the one sequence's rows stay on rank 0, the MTP head reads the gathered last layer, and
    # rank 1 only serves its experts (whose load every rank learns from the dispatch counts).
    ranks 2 "${run[@]}" --data-parallel 2 --draft mtp >"$work/d2.json" || fail "--data-parallel 2 generate with MTP"
    t1=$(grep -o '"ids":\[[0-9,]*\]' "$work/t1.json")
    for f in e2 e3 d2; do
      got=$(grep -o '"ids":\[[0-9,]*\]' "$work/$f.json")
      echo "$f $got"
      [[ $t1 == "$got" ]] || fail "$f speculative ids differ from plain one-process ids"
      grep -q '"accepted_tokens":[1-9]' "$work/$f.json" || fail "$f accepted no draft"
    done
    for f in e2 d2; do
      grep -q '"expert_rows_per_rank":\[[1-9][0-9]*,[1-9][0-9]*\]' "$work/$f.json" || fail "$f: no expert load of 2 ranks"
    done
    grep -q '"expert_rows_per_rank":\[[1-9][0-9]*,[1-9][0-9]*,[1-9][0-9]*\]' "$work/e3.json" ||
      fail "no expert load of 3 ranks" ;;
  deepseek-serve)
    model=$1 head=$2
    prompts=("Once upon a time" "The king said" "In the morning, the little" "She looked at the sea and")
    port_of() {
      for _ in $(seq 120); do grep -q "ready" "$1" && break; sleep 0.5; done
      grep -o 'http://127.0.0.1:[0-9]*' "$1" | head -1 | sed 's/.*://'
    }
    # complete_all LOG TAG: the four prompts at once (the same server, concurrently), texts in $work/TAG.N.
    complete_all() {
      local port pids=(); port=$(port_of "$1")
      for i in "${!prompts[@]}"; do
        curl -s --max-time 60 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
          -d "{\"model\":\"m\",\"prompt\":\"${prompts[$i]}\",\"max_tokens\":24,\"temperature\":0}" |
          grep -o '"text":"[^"]*"' >"$work/$2.$i" &
        pids+=($!)
      done
      wait "${pids[@]}"  # the curls, not the server
    }
    "$aerie" serve --model "$model" --served-model-name m --port 0 --threads 1 2>"$work/one.log" &
    one=$!
    complete_all "$work/one.log" one
    kill -TERM $one; wait $one
    # serve_dp TAG ARGS...: the four at once from `serve --data-parallel 2 ARGS`, its metrics in $work/TAG.metrics,
    # then SIGTERM to rank 0: both ranks exit 0.
    serve_dp() {
      local tag=$1 port dp; shift
      AERIE_TEST_TAG=$work ranks 2 "$aerie" serve --model "$model" --served-model-name m --port 0 --threads 1 \
        --data-parallel 2 "$@" 2>"$work/$tag.log" &
      dp=$!
      port=$(port_of "$work/$tag.log")
      complete_all "$work/$tag.log" "$tag"
      curl -s --max-time 10 "http://127.0.0.1:$port/metrics" >"$work/$tag.metrics"
      for p in $(pgrep -f -- "--data-parallel 2"); do
        env=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null)
        grep -qx "AERIE_TEST_TAG=$work" <<<"$env" && grep -qx 'OMPI_COMM_WORLD_RANK=0' <<<"$env" && kill -TERM "$p"
      done
      wait $dp || fail "$tag: D=2 serve exited $? after SIGTERM"
      for i in "${!prompts[@]}"; do
        echo "one process: $(cat "$work/one.$i")"; echo "$tag:$(printf '%*s' $((11 - ${#tag})) '') $(cat "$work/$tag.$i")"
        [[ -s $work/one.$i ]] && cmp -s "$work/one.$i" "$work/$tag.$i" || fail "$tag: completion $i differs"
      done
      grep aerie_attention_rows_total "$work/$tag.metrics"
      grep -q 'aerie_attention_rows_total{rank="0"} [1-9]' "$work/$tag.metrics" &&
        grep -q 'aerie_attention_rows_total{rank="1"} [1-9]' "$work/$tag.metrics" ||
        { cat "$work/$tag.log"; fail "$tag: rank 0 did not schedule rows for both ranks"; }
      grep -q "rank 1 ran the attention of [1-9][0-9]* rows" "$work/$tag.log" ||
        { cat "$work/$tag.log"; fail "$tag: rank 1 ran no attention"; }
      grep -q "timed out" "$work/$tag.log" && { cat "$work/$tag.log"; fail "$tag: a collective timed out"; }
    }
    serve_dp chain --draft "$head"
    # Draft trees: each rank moves only its own sequences' verified paths into place.
    serve_dp tree --draft "$head" --spec-tree-top-k 2 --spec-tree-depth 3 --spec-tree-tokens 4 ;;
  *) fail "unknown mode $mode" ;;
esac
((failed == 0)) && echo "ok: $mode"
exit $failed
