#!/usr/bin/env bash
# pipeline_load --connect HOST:PORT drives a pipeline_server that is already running: the server starts
# on an ephemeral loopback port, the load generator checks every reply for two seconds and exits 0, and
# the server then stops on SIGTERM with status 0. A --connect value without a port is a usage error.
set -uo pipefail
server_binary="$1" load_binary="$2"
log="${TEST_TMPDIR:-/tmp}/server.log"

"$load_binary" --connect localhost > /dev/null 2> "${TEST_TMPDIR:-/tmp}/usage.txt"
status=$?
if [[ $status -ne 2 ]] || ! grep -q "connect: 'localhost' is not HOST:PORT" "${TEST_TMPDIR:-/tmp}/usage.txt"; then
  echo "FAIL: --connect without a port: status $status, stderr: $(cat "${TEST_TMPDIR:-/tmp}/usage.txt")"
  exit 1
fi

"$server_binary" --port 0 --io-threads 2 --max-payload 65536 > "$log" 2>&1 &
server=$!
port=""
for _ in $(seq 100); do
  port="$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$log")"
  [[ -n "$port" ]] && break
  sleep 0.1
done
if [[ -z "$port" ]]; then
  echo "FAIL: the server did not say where it listens:"; cat "$log"; kill "$server"; exit 1
fi

"$load_binary" --connect="127.0.0.1:$port" --seconds 2 --connections 2 --client-threads 1 \
  --min-bytes 4096 --max-bytes 65536
load_status=$?
kill -TERM "$server"
wait "$server"
server_status=$?
if [[ $load_status -ne 0 || $server_status -ne 0 ]]; then
  echo "FAIL: pipeline_load exited $load_status, the server $server_status; the server's output:"
  cat "$log"
  exit 1
fi
echo "ok: pipeline_load drove the server on port $port; both exited 0"
