#!/usr/bin/env bash
# Chat fan-out benchmark: castd's hub against a naive axum broadcast hub (ANCHORS.md "Chat fan-out"),
# both on this machine with the load generator, 20 senders x 1 msg/s, N listening clients.
# Usage: bench/chat/run.sh [CLIENT_COUNTS...]   (default: 2000 5000 10000)  SECONDS=20 to change the window.
set -euo pipefail
cd "$(dirname "$0")/../.."
ulimit -n "$(ulimit -Hn)"
COUNTS=("${@:-2000 5000 10000}"); COUNTS=(${COUNTS[*]})
SECS="${SECONDS_PER_RUN:-20}"
# CASTD_BIN picks the castd binary and BENCH_TARGET the profile directory with the load generator and the
# anchor (bench/compare runs two revisions against one load generator); by default both are built here.
if [ -z "${CASTD_BIN:-}" ]; then
  cargo build --profile perf --bin castd --example chat-load --example chat-anchor-hub >&2
fi
BIN=${BENCH_TARGET:-target/perf}
CASTD=${CASTD_BIN:-$BIN/castd}
echo "machine: $(nproc) cores, $(awk '/MemTotal/{print int($2/1024)" MiB"}' /proc/meminfo), open files $(ulimit -n); window ${SECS}s"
for n in "${COUNTS[@]}"; do
  # castd
  dir=$(mktemp -d)
  "$CASTD" --data-dir "$dir" --webserverip 127.0.0.1 --webserverport 0 --rtmpport 0 --log-level warn,castd=info 2>"$dir/log" &
  pid=$!
  for _ in $(seq 100); do grep -q "castd is ready" "$dir/log" 2>/dev/null && break; sleep 0.1; done
  port=$(sed -n 's/.*web server listening on http:\/\/[^ ]*:\([0-9]*\).*/\1/p' "$dir/log" | head -1)
  "$BIN/examples/chat-load" --target castd --addr "127.0.0.1:$port" --clients "$n" --pid "$pid" --seconds "$SECS" || true
  kill "$pid"; wait "$pid" 2>/dev/null || true; rm -rf "$dir"
  sleep 2
  # anchor
  "$BIN/examples/chat-anchor-hub" 0 >/tmp/anchor.$$ &
  apid=$!
  for _ in $(seq 100); do grep -q "listening" /tmp/anchor.$$ && break; sleep 0.1; done
  aport=$(awk '{print $4}' /tmp/anchor.$$)
  "$BIN/examples/chat-load" --target anchor --addr "127.0.0.1:$aport" --clients "$n" --pid "$apid" --seconds "$SECS" || true
  kill "$apid"; wait "$apid" 2>/dev/null || true; rm -f /tmp/anchor.$$
  sleep 2
done
