#!/usr/bin/env bash
# Chat across a cluster (issue 33): origin + 2 edges sharing one chat through redis-server, with
# 3 x N listening clients spread over the three nodes, against one castd with N clients; 20 senders
# x 1 msg/s (bench/chat's load generator, chat-load). Prints chat-load's line for each, side by side:
# delivered %, p50/p99/max latency (send stamp to receipt at every client), server CPU and RSS
# (summed over the three nodes for the cluster).
# Usage: bench/cluster/run.sh [PER_NODE_COUNTS...]   (default: 1000 3000 10000)  SECONDS_PER_RUN=20.
# SETUPS="single cluster" (default) picks the runs: SETUPS=single bench/cluster/run.sh 9000 gives the
# one-node figure at the same total as a 3 x 3000 cluster.
# CASTD_BIN=path runs that castd binary (nothing is built; the load generator must be built already).
# LOAD_THREADS=2: the load generator's threads per node (one node's run gets 2, the cluster's 6), so
# the cluster's 3 x N clients are not read slower than one node's N (before issue 44 the generator
# had 2 threads in all; HOPS=1's "last write" figures are the servers' side alone).
# PIN_CPUS=k (0, the default: no pinning): as if every node had its own machine, each castd runs on k
# cores of its own (taskset; one node / the origin on cores 0..k-1, the edges on the next k each) and
# the load generator and Redis on the cores after 3k, the same cores in both setups. Without it the
# three nodes' fan-out threads (one per core each, up to 8) and the generator share every core, so a
# cluster row also measures three processes crowding one box. On 16 cores: PIN_CPUS=3 leaves the
# generator 7 cores, enough for the cluster's 3 x LOAD_THREADS threads.
# HOPS=1: every castd writes each message's hops (CASTD_DEBUG_CHAT_HOPS, src/chat/hops.rs) and the
# per-hop breakdown (bench/cluster/hops.py: p50/p99 of each hop and since the client's stamp) is printed
# under each run's line. The marks cost a file write each, so take the end-to-end figures without it.
set -euo pipefail
cd "$(dirname "$0")/../.."
ulimit -n "$(ulimit -Hn)"
COUNTS=("${@:-1000 3000 10000}"); COUNTS=(${COUNTS[*]})
SECS="${SECONDS_PER_RUN:-20}"
LT="${LOAD_THREADS:-2}"
PIN="${PIN_CPUS:-0}"
if [ "$PIN" -gt 0 ] && [ $((3 * PIN + 1)) -gt "$(nproc)" ]; then
  echo "PIN_CPUS=$PIN needs more than $((3 * PIN)) cores (this machine has $(nproc))"; exit 1
fi
# pin GROUP: sets PFX to what runs a command on the cores of GROUP (0: one node / the origin, 1-2:
# the edges, 3: the load generator and Redis), empty without PIN_CPUS. (A prefix, not a function: a
# function sent to the background would fork, and $! would not be the process's id.)
pin() {
  PFX=()
  if [ "$PIN" -eq 0 ]; then return; fi
  if [ "$1" -lt 3 ]; then PFX=(taskset -c "$(($1 * PIN))-$(($1 * PIN + PIN - 1))")
  else PFX=(taskset -c "$((3 * PIN))-$(($(nproc) - 1))")
  fi
}
if [ -z "${CASTD_BIN:-}" ]; then
  cargo build --profile perf --bin castd --example chat-load >&2
fi
BIN=${BENCH_TARGET:-target/perf}
CASTD=${CASTD_BIN:-$BIN/castd}
command -v redis-server >/dev/null || { echo "redis-server is needed (packaging/deps.sh)"; exit 1; }
echo "machine: $(nproc) cores, $(awk '/MemTotal/{print int($2/1024)" MiB"}' /proc/meminfo), open files $(ulimit -n); window ${SECS}s; $(redis-server --version | cut -d' ' -f1-3); load generator threads $LT per node"
echo "castd: $CASTD ($(date -u -r "$CASTD" '+built %F %T UTC')); load generator: $BIN/examples/chat-load"
[ "$PIN" -gt 0 ] && echo "pinned: $PIN cores per node (0-$((PIN - 1)), $PIN-$((2 * PIN - 1)), $((2 * PIN))-$((3 * PIN - 1))); generator and Redis $((3 * PIN))-$(($(nproc) - 1))"
load() { echo "  (load average ${1:-before} the run: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%F %T UTC'))"; }

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# start_castd NAME GROUP ARGS...: prints "PID PORT"
start_castd() {
  local name=$1 group=$2; shift 2
  mkdir -p "$work/$name"
  local hops=()
  [ "${HOPS:-0}" = 1 ] && hops=(env "CASTD_DEBUG_CHAT_HOPS=$work/hops-$name.tsv")
  pin "$group"
  "${PFX[@]}" "${hops[@]}" "$CASTD" --data-dir "$work/$name" --webserverip 127.0.0.1 --webserverport 0 --rtmpport 0 --srtport 0 \
    --log-level warn,castd=info "$@" 2>"$work/$name/log" &
  local pid=$!
  for _ in $(seq 200); do grep -q "castd is ready" "$work/$name/log" 2>/dev/null && break; sleep 0.1; done
  local port
  port=$(sed -n 's/.*web server listening on http:\/\/[^ ]*:\([0-9]*\).*/\1/p' "$work/$name/log" | head -1)
  echo "$pid $port"
}

SETUPS="${SETUPS:-single cluster}"
for n in "${COUNTS[@]}"; do
  # one node, N clients
  if [[ " $SETUPS " == *" single "* ]]; then
    load
    read -r pid port < <(start_castd "single-$n" 0)
    pin 3
    "${PFX[@]}" "$BIN/examples/chat-load" --target castd --addr "127.0.0.1:$port" --clients "$n" --pid "$pid" --seconds "$SECS" --threads "$LT" \
      | sed 's/^castd  /single /' || true
    load after
    kill "$pid"; wait "$pid" 2>/dev/null || true
    [ "${HOPS:-0}" = 1 ] && python3 bench/cluster/hops.py "one node, N=$n" "single=$work/hops-single-$n.tsv"
    sleep 2
  fi
  [[ " $SETUPS " == *" cluster "* ]] || continue

  # origin + 2 edges over Redis, 3N clients
  load
  rport=$(free_port)
  mkdir -p "$work/redis-$n"
  pin 3
  "${PFX[@]}" redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$work/redis-$n" >/dev/null &
  rpid=$!
  for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
  head -c 24 /dev/urandom | base64 > "$work/secret"
  cl=(--redis-url "redis://127.0.0.1:$rport/0" --cluster-secret "$work/secret")
  read -r opid oport < <(start_castd "origin-$n" 0 "${cl[@]}")
  read -r e1pid e1port < <(start_castd "edge1-$n" 1 "${cl[@]}" --origin "http://127.0.0.1:$oport")
  read -r e2pid e2port < <(start_castd "edge2-$n" 2 "${cl[@]}" --origin "http://127.0.0.1:$oport")
  pids+=("$rpid" "$opid" "$e1pid" "$e2pid")
  pin 3
  "${PFX[@]}" "$BIN/examples/chat-load" --target castd --addr "127.0.0.1:$oport,127.0.0.1:$e1port,127.0.0.1:$e2port" \
    --clients "$((3 * n))" --pid "$opid,$e1pid,$e2pid" --seconds "$SECS" --threads "$((3 * LT))" | sed 's/^castd  /cluster/' || true
  load after
  kill "$opid" "$e1pid" "$e2pid" "$rpid" 2>/dev/null || true
  wait "$opid" "$e1pid" "$e2pid" "$rpid" 2>/dev/null || true
  pids=()
  [ "${HOPS:-0}" = 1 ] && python3 bench/cluster/hops.py "origin + 2 edges, N=$n per node" \
    "origin=$work/hops-origin-$n.tsv" "edge1=$work/hops-edge1-$n.tsv" "edge2=$work/hops-edge2-$n.tsv"
  sleep 2
done
