#!/usr/bin/env bash
# A fault test: mpirun -np 2 of mpi_collectives with one rank made to die or hang (AERIE_DIST_FAULT) must end
# non-zero, within the timeout plus a margin, with the surviving rank's error naming rank and operation.
# usage: run_fault_test.sh MPIRUN EXE FAULT EXPECTED_MESSAGE
set -uo pipefail
mpirun=$1 exe=$2 fault=$3 expected=$4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 AERIE_DIST_TIMEOUT_S=2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
# timeout: the test itself must never hang, even if the fault handling does.
timeout 60 "$mpirun" --oversubscribe -np 2 --mca btl self,vader -x AERIE_DIST_FAULT="$fault" -x AERIE_DIST_TIMEOUT_S \
  "$exe" >"$log" 2>&1
rc=$?
elapsed=$((SECONDS - start))
cat "$log"
if ((rc == 0)); then echo "FAIL: the job exited 0 with AERIE_DIST_FAULT=$fault"; exit 1; fi
if ((rc == 124)); then echo "FAIL: the job hung (killed after 60 s)"; exit 1; fi
if ! grep -qF -- "$expected" "$log"; then echo "FAIL: no '$expected' in the output"; exit 1; fi
echo "ok: exit $rc after ${elapsed}s with '$expected'"
