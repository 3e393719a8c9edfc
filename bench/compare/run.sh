#!/usr/bin/env bash
# Before/after on the same machine in one run: builds two revisions of castd (perf profile, each from a git
# worktree with its own web/dist, one shared target directory) and runs the regression benchmarks against
# both, one revision after the other for each benchmark, with this checkout's bench scripts (same harness,
# same load generator, same inputs):
#   hls        bench/hls/run.sh        castd/nginx requests/s while live (segment and playlist, 64 and 512 conns)
#   latency    bench/latency/run.sh    LL-HLS glass-to-glass p50/p95 in chromium (level 0)
#   transcode  bench/transcode/run.sh  castd worker CPU vs the ffmpeg CLI (Owncast's arguments)
#   chat       bench/chat/run.sh       fan-out p99 and CPU at CHAT_CLIENTS clients, castd vs the anchor hub
#   webrtc     bench/webrtc/run.sh     WHEP_VIEWERS (50) whep_load viewers: castd CPU per viewer, frames delivered
# Usage: bench/compare/run.sh BEFORE [AFTER] [BENCHES]   e.g. bench/compare/run.sh 58cb6d3 HEAD "hls latency"
#   AFTER defaults to HEAD; BENCHES to "hls latency transcode chat webrtc". HLS_SECONDS (8), LATENCY_SECONDS
#   (40), CHAT_CLIENTS (2000), SECONDS_PER_RUN (chat, 15), WHEP_VIEWERS (50) and WHEP_SECONDS (15) size the runs.
#   REPEAT (1) runs each benchmark that many times per side, alternating before and after, so the spread between
#   a side's runs (the noise) stands beside the difference. Output: bench/out/compare (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BEFORE=${1:?usage: bench/compare/run.sh BEFORE [AFTER] [BENCHES]}
AFTER=${2:-HEAD}
BENCHES=${3:-hls latency transcode chat webrtc}
REPEAT=${REPEAT:-1}
OUT=$ROOT/bench/out/compare
export CARGO_TARGET_DIR=$OUT/target
mkdir -p "$OUT"

build() { # name rev -> prints the binary path
  local name=$1 rev=$2 src=$OUT/src-$1
  local sha
  sha=$(git rev-parse --verify "$rev^{commit}")
  if [ ! -d "$src" ] || [ "$(git -C "$src" rev-parse HEAD)" != "$sha" ]; then
    git worktree remove --force "$src" 2>/dev/null || rm -rf "$src"
    git worktree add --detach "$src" "$sha" >&2
  fi
  (cd "$src/web" && { [ -d node_modules ] || cp -a "$ROOT/web/node_modules" . 2>/dev/null || npm ci --no-audit --no-fund --loglevel=error; } \
    && npm run build >/dev/null) >&2
  (cd "$src" && cargo build --profile perf --quiet --bin castd) >&2
  # Each revision gets its own copy: the shared target directory holds one castd per profile.
  cp "$CARGO_TARGET_DIR/perf/castd" "$OUT/castd-$name"
  echo "$OUT/castd-$name"
}

echo "== building $BEFORE (before) and $AFTER (after)"
BIN_BEFORE=$(build before "$BEFORE")
BIN_AFTER=$(build after "$AFTER")
if [[ " $BENCHES " == *" chat "* ]]; then
  cargo build --profile perf --quiet --example chat-load --example chat-anchor-hub
fi
if [[ " $BENCHES " == *" webrtc "* ]]; then
  cargo build --profile perf --quiet --example whep_load
fi
[ -n "${BUILD_ONLY:-}" ] && exit 0
echo "machine: $(nproc) cores, $(awk '/MemTotal/{print int($2/1024)" MiB"}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "before: $(git log -1 --format='%h %s' "$BEFORE" | cut -c1-100)"
echo "after:  $(git log -1 --format='%h %s' "$AFTER" | cut -c1-100)"

for bench in $BENCHES; do
  for round in $(seq "$REPEAT"); do
  for side in before after; do
    bin=$BIN_BEFORE; [ "$side" = after ] && bin=$BIN_AFTER
    log=$OUT/$bench-$side-$round.txt
    echo
    echo "######## $bench, $side ($bin), round $round, $(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg)"
    case $bench in
      hls) CASTD_BIN=$bin bench/hls/run.sh "${HLS_SECONDS:-8}" 2>&1 | tee "$log" ;;
      latency) CASTD_BIN=$bin bench/latency/run.sh "${LATENCY_SECONDS:-40}" 0 2>&1 | tee "$log" ;;
      transcode) CASTD_BIN=$bin bench/transcode/run.sh 2>&1 | tee "$log" ;;
      chat) CASTD_BIN=$bin BENCH_TARGET=$CARGO_TARGET_DIR/perf SECONDS_PER_RUN=${SECONDS_PER_RUN:-15} \
              bench/chat/run.sh "${CHAT_CLIENTS:-2000}" 2>&1 | tee "$log" ;;
      webrtc) CASTD_BIN=$bin WHEP_LOAD=$CARGO_TARGET_DIR/perf/examples/whep_load \
                bench/webrtc/run.sh "${WHEP_SECONDS:-15}" "${WHEP_VIEWERS:-50}" 2>&1 | tee "$log" ;;
      *) echo "unknown benchmark $bench" >&2; exit 2 ;;
    esac
  done
  done
done

echo
echo "================ summary (before | after; each round a line)"
for bench in $BENCHES; do
  for side in before after; do
  for round in $(seq "$REPEAT"); do
    log=$OUT/$bench-$side-$round.txt
    s="$side #$round"
    case $bench in
      hls) grep -E "castd/nginx" "$log" | tr -s ' ' | paste -sd' ' | sed "s/^/hls $s: /" ;;
      latency) grep -E "^\| 0 \|" "$log" | awk -F'|' -v s="$s" '{printf "latency %s: LL-HLS glass p50 %s s, p95 %s s\n", s, $6, $7}' ;;
      transcode) grep -E "castd / CLI CPU time" "$log" | sed "s/^/transcode $s: /" ;;
      chat) grep -E "p99=" "$log" | awk -v s="$s" '{printf "chat %s: %s %s", s, $1, $2; for (i = 3; i <= NF; i++) if ($i ~ /^(delivered|p50|p99|server_cpu|rss\/conn)=/) printf " %s", $i; print ""}' ;;
      webrtc) grep -E "^\| [0-9]+ \|" "$log" | awk -F'|' -v s="$s" '{printf "webrtc %s: N %s, CPU per viewer %s, delivered min/mean %s, castd CPU %s\n", s, $2, $6, $11, $5}' ;;
    esac
  done
  done
done
