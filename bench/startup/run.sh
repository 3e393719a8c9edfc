#!/usr/bin/env bash
# Start-to-/api/status time and idle RSS of castd (issue 2 targets: <= 300 ms, <= 25 MB).
# Usage: bench/startup/run.sh [runs]   (uses target/release/castd; builds it if missing)
# Prints, for a first start (empty data dir: schema + generated password) and for later starts
# (existing data dir), the median and worst start-to-first-200 time over N runs, and the RSS of an
# idle daemon after 3 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-10}
BIN=target/release/castd
[ -x "$BIN" ] || cargo build --release --locked
command -v curl >/dev/null || { echo "needs curl"; exit 1; }

now_ms() { date +%s%3N; }

# start castd on a free port in DIR; prints "ms pid port"
start_once() {
  local dir=$1 log=$1/bench.log port t0 t1 pid
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  t0=$(now_ms)
  "$BIN" --data-dir "$dir" --webserverip 127.0.0.1 --webserverport "$port" --rtmpport 0 --log-level warn 2>"$log" &
  pid=$!
  until curl -fs -o /dev/null "http://127.0.0.1:$port/api/status"; do
    kill -0 "$pid" 2>/dev/null || { echo "castd died:"; cat "$log"; exit 1; }
    sleep 0.002
  done
  t1=$(now_ms)
  echo "$((t1 - t0)) $pid $port"
}

stats() { sort -n | awk '{a[NR]=$1} END {printf "median %d ms, worst %d ms", a[int((NR+1)/2)], a[NR]}'; }

first=(); later=(); rss=()
for i in $(seq "$RUNS"); do
  dir=$(mktemp -d)
  read -r ms pid port < <(start_once "$dir"); first+=("$ms")
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  read -r ms pid port < <(start_once "$dir"); later+=("$ms")
  sleep 3
  rss+=("$(awk '/VmRSS/ {print $2}' /proc/$pid/status)")
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
done
echo "castd start-to-/api/status over $RUNS runs ($(nproc) cores, $(uname -m))"
echo "  first start (new data dir):      $(printf '%s\n' "${first[@]}" | stats)   target <= 300 ms"
echo "  later start (existing data dir): $(printf '%s\n' "${later[@]}" | stats)   target <= 300 ms"
echo "  idle RSS after 3 s:              $(printf '%s\n' "${rss[@]}" | sort -n | awk '{a[NR]=$1} END {printf "median %.1f MB, worst %.1f MB", a[int((NR+1)/2)]/1024, a[NR]/1024}')   target <= 25 MB"
