#!/usr/bin/env bash
# Latency and packaging cost of castd's HLS outputs, LL-HLS (latency level 0, CMAF parts) against classic HLS
# (levels 1-4, MPEG-TS), side by side:
#   1. glass-to-glass latency in Debian's chromium through the viewer page (bench/latency/run.mjs; p50/p95 over
#      SECONDS of playback per level);
#   2. CPU cost of packaging: `castd worker` on a pre-encoded 60 s 720p30 FLV with 1 and 3 passthrough variants
#      (no encoding: demux + mux only), CMAF parts vs the HLS muxer's MPEG-TS, user+system CPU seconds, best of 3.
#   WebRTC playback (WHEP, `whep` among the levels) is measured in the same run, per presented frame.
# Usage: bench/latency/run.sh [SECONDS] [LEVELS]   (default 60 s, levels whep,0,1,2,3,4)
# CASTD_BIN picks the binary (default: the perf profile, built here). Output: bench/out/latency (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=$ROOT/bench/out/latency
SECS=${1:-60}
LEVELS=${2:-whep,0,1,2,3,4}
mkdir -p "$OUT"
for tool in ffmpeg node; do command -v "$tool" >/dev/null || { echo "missing $tool (packaging/deps.sh)" >&2; exit 1; }; done
if [ -z "${CASTD_BIN:-}" ]; then
  (cd web && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; } && npm run build >/dev/null)
  cargo build --profile perf --quiet
  CASTD_BIN=$ROOT/target/perf/castd
fi
export CASTD_BIN
(cd tests/web && { [ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund --loglevel=error >/dev/null; })

echo "== glass-to-glass latency ($SECS s per level, levels $LEVELS; $CASTD_BIN)"
node bench/latency/run.mjs "$SECS" "$LEVELS" | tee "$OUT/latency.txt"

echo
echo "== packaging CPU: CMAF parts (LL-HLS) vs MPEG-TS (classic), passthrough variants, 60 s of 720p30 + AAC"
INPUT=$OUT/input-720p.flv
if [ ! -s "$INPUT" ]; then
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=1280x720:rate=30 -f lavfi -i sine=frequency=440 \
    -t 60 -c:v libx264 -preset veryfast -g 30 -b:v 3000k -pix_fmt yuv420p -c:a aac -f flv "$INPUT"
fi
cpu() { # variants low_latency -> best user+sys seconds of 3 runs
  local n=$1 ll=$2 best=""
  local variants
  variants=$(printf '{"videoPassthrough":true,"audioPassthrough":true},%.0s' $(seq "$n"))
  for _ in 1 2 3; do
    local dir
    dir=$(mktemp -d "$OUT/worker.XXXX")
    local cfg="{\"hlsDir\":\"$dir\",\"segmentSeconds\":1,\"listSize\":25,\"variants\":[${variants%,}],\"append\":false,\"segmentId\":\"b\",\"lowLatency\":$ll}"
    local t
    t=$( { TIMEFORMAT='%U %S'; time "$CASTD_BIN" worker --config "$cfg" <"$INPUT" >/dev/null 2>&1; } 2>&1 | awk '{print $1+$2}')
    rm -rf "$dir"
    if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then best=$t; fi
  done
  echo "$best"
}
{
  echo "| variants | MPEG-TS (hls muxer) CPU s | CMAF parts CPU s | CMAF / TS | per variant TS ms/min | per variant CMAF ms/min |"
  echo "|---|---|---|---|---|---|"
  for n in 1 3; do
    ts=$(cpu "$n" false)
    cmaf=$(cpu "$n" true)
    awk -v n="$n" -v ts="$ts" -v c="$cmaf" 'BEGIN{printf "| %d | %.3f | %.3f | %.2fx | %.0f | %.0f |\n", n, ts, c, c/ts, ts*1000/n, c*1000/n}'
  done
} | tee "$OUT/packaging.txt"
