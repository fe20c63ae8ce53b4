# Sourced by the tests that drive a real `aerie serve` from outside (openai_client, chat_page):
#   start_serve AERIE_BINARY serve-args...   starts it on a free loopback port (--port 0 is added) and sets
#                                            $server_pid, $port and $log (its output), or exits 1 with the log;
#   stop_serve                               SIGTERM, and exits 1 unless the server then exits 0.
# An EXIT trap kills a server still running and removes the log.
server_pid=""
log="$(mktemp)"
cleanup_serve() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  rm -f "$log"
}
trap cleanup_serve EXIT

start_serve() {
  local aerie="$1"
  shift
  "$aerie" serve "$@" --port 0 >"$log" 2>&1 &
  server_pid=$!
  port=""
  for _ in $(seq 1 300); do
    port="$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log" | head -1)"
    [[ -n "$port" ]] && return 0
    kill -0 "$server_pid" 2>/dev/null || { cat "$log"; echo "FAIL: the server exited"; exit 1; }
    sleep 0.1
  done
  cat "$log"
  echo "FAIL: no port in the server log"
  exit 1
}

stop_serve() {
  kill -TERM "$server_pid"
  local status=0
  wait "$server_pid" || status=$?
  server_pid=""
  if [[ $status -ne 0 ]]; then cat "$log"; echo "FAIL: aerie serve exited $status after SIGTERM"; exit 1; fi
}
