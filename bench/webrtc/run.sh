#!/usr/bin/env bash
# N concurrent WHEP (WebRTC) viewers of castd: castd CPU per viewer beside SRS's published figure (2,000 players per
# core at 600 kbit/s: 0.05 % of a core each), frames delivered per viewer, RSS per viewer, time to first frame.
#
# The viewers are `whep_load` (examples/whep_load.rs): N real WebRTC peers in one light Rust process (str0m, as in
# castd; a UDP socket each, ICE, DTLS, SRTP), each a WHEP session that counts the video frames and Opus packets it
# depacketises. For each N a fresh castd (127.0.0.1, ephemeral ports) transcodes an ffmpeg test pattern published
# over RTMP (640x360 30 fps libx264 + AAC) into one 640x360 30 fps variant (the real-time variant WebRTC sends);
# whep_load then measures castd's CPU with no viewers (BASELINE s), opens the N sessions (10 POSTs at a time), waits
# until every viewer has its first frame plus WARMUP s, and measures SECONDS: castd's CPU (utime+stime of the main
# process from /proc; the transcode worker apart), castd's RSS (before the viewers, peak during the window), and per
# viewer the frames it received against the frames the source produced (RTP timeline; gaps reported), and the
# datagrams the kernel dropped at the viewers' sockets and at castd's WebRTC socket (/proc/net/udp), and castd's
# busiest thread over the window (whether the sending is spread over cores). The load average is whep_load's start
# → the window's end.
#
# Usage: bench/webrtc/run.sh [SECONDS] [COUNTS]          default 20 s, N = 10,50,100
#        bench/webrtc/run.sh --chromium [SECONDS] [COUNTS]  the viewers in headless chromium instead (run.mjs;
#                                                         chromium itself takes most of a 2-core machine)
# CASTD_BIN picks castd (default: the perf profile, built here with whep_load); WHEP_LOAD the client (default
# target/perf/examples/whep_load). WARMUP (5) and BASELINE (10) in seconds. Output: bench/out/webrtc (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=$ROOT/bench/out/webrtc
mkdir -p "$OUT"
CHROMIUM=0
if [ "${1:-}" = "--chromium" ]; then CHROMIUM=1; shift; fi
SECS=${1:-20}
COUNTS=${2:-10,50,100}
WARMUP=${WARMUP:-5}
BASELINE=${BASELINE:-10}
for tool in ffmpeg curl; do command -v "$tool" >/dev/null || { echo "missing $tool (packaging/deps.sh)" >&2; exit 1; }; done
[ -d web/dist ] || (cd web && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; } && npm run build >/dev/null)
if [ -z "${CASTD_BIN:-}" ] || { [ -z "${WHEP_LOAD:-}" ] && [ "$CHROMIUM" = 0 ]; }; then
  cargo build --profile perf --quiet --bin castd --example whep_load
fi
CASTD_BIN=${CASTD_BIN:-$ROOT/target/perf/castd}
WHEP_LOAD=${WHEP_LOAD:-$ROOT/target/perf/examples/whep_load}
export CASTD_BIN

if [ "$CHROMIUM" = 1 ]; then
  command -v node >/dev/null || { echo "missing node (packaging/deps.sh)" >&2; exit 1; }
  (cd tests/web && { [ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund --loglevel=error >/dev/null; })
  node bench/webrtc/run.mjs "$SECS" "$COUNTS" | tee "$OUT/webrtc-chromium.txt"
  exit 0
fi

KEY=bench-webrtc-key
CASTD=""
FFMPEG=""
DATA=""
stop_all() {
  if [ -n "$FFMPEG" ]; then kill "$FFMPEG" 2>/dev/null || true; wait "$FFMPEG" 2>/dev/null || true; fi
  if [ -n "$CASTD" ]; then
    kill "$CASTD" 2>/dev/null || true
    for _ in $(seq 200); do kill -0 "$CASTD" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$CASTD" 2>/dev/null || true
    wait "$CASTD" 2>/dev/null || true
  fi
  if [ -n "$DATA" ]; then rm -rf "$DATA"; fi
  CASTD="" FFMPEG="" DATA=""
}
trap stop_all EXIT

# One run: a fresh castd and publisher, whep_load with N viewers; whep_load's report goes to the terminal, its
# table row to $OUT/rows.
run_one() {
  local n=$1 log=$OUT/castd-$1.log
  DATA=$(mktemp -d)
  CASTD_WEBRTC_UDP_PORT=0 "$CASTD_BIN" --data-dir "$DATA" --webserverip 127.0.0.1 --webserverport 0 --rtmpport 0 \
    --srtport 0 --streamkey "$KEY" 2>"$log" &
  CASTD=$!
  for _ in $(seq 300); do grep -q "castd is ready" "$log" && break; sleep 0.1; done
  local web rtmp udp pass
  web=$(grep -o 'web server listening on http://[0-9.:]*' "$log" | grep -o '[0-9]*$')
  rtmp=$(grep -o 'rtmp server listening on rtmp://[0-9.:]*' "$log" | grep -o '[0-9]*$')
  udp=$(grep -o 'webrtc listening on udp://[0-9.:]*' "$log" | grep -o '[0-9]*$')
  pass=$(cat "$DATA/initial-admin-password")
  api() { curl -sf -u "admin:$pass" -H 'content-type: application/json' "http://127.0.0.1:$web/api/admin/$1" -d "$2" >/dev/null; }
  api config/video/streamoutputvariants \
    '{"value":[{"name":"360p","audioPassthrough":true,"videoBitrate":800,"scaledWidth":640,"scaledHeight":360,"framerate":30,"cpuUsageLevel":0}]}'
  api config/video/streamlatencylevel '{"value":0}'
  api config/webrtc/maxviewers "{\"value\":$((n + 10))}"
  ffmpeg -hide_banner -loglevel error -nostdin \
    -re -f lavfi -i testsrc2=size=640x360:rate=30 -re -f lavfi -i sine=frequency=440 -t 3600 \
    -c:v libx264 -preset ultrafast -tune zerolatency -g 30 -pix_fmt yuv420p -c:a aac \
    -f flv "rtmp://127.0.0.1:$rtmp/live/$KEY" 2>"$OUT/ffmpeg-$n.log" &
  FFMPEG=$!
  local online=0
  for _ in $(seq 300); do
    if curl -sf "http://127.0.0.1:$web/api/status" | grep -q '"online":true'; then online=1; break; fi
    sleep 0.2
  done
  if [ "$online" = 0 ]; then echo "N=$n: the stream did not come online; see $log" >&2; stop_all; return 1; fi
  sleep 3
  "$WHEP_LOAD" --url "http://127.0.0.1:$web" --peers "$n" --castd-pid "$CASTD" --castd-udp-port "$udp" --seconds "$SECS" \
    --warmup "$WARMUP" --baseline "$BASELINE" | tee "$OUT/whep_load-$n.txt"
  grep '^row: ' "$OUT/whep_load-$n.txt" | sed 's/^row: //' >>"$OUT/rows"
  grep -E 'whep: viewer left|dropped' "$log" | tail -n 3 || true
  stop_all
}

: >"$OUT/rows"
echo "castd: $CASTD_BIN; client: $WHEP_LOAD; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for n in ${COUNTS//,/ }; do
  run_one "$n" || true
  echo
done
{
  echo "WHEP viewers (whep_load): $SECS s measured per N after the viewers' first frames + $WARMUP s; one 640x360 30 fps 800 kbit/s variant"
  echo "castd: $CASTD_BIN ($(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')); ended $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores"
  echo "SRS (published, ../shared/ANCHORS.md): 2,000 WebRTC players per core at 600 kbit/s = 0.050 % of a core per viewer"
  echo "| N | playing | castd CPU, no viewers | castd CPU with N | **castd CPU per viewer** | SRS per viewer | castd / SRS | castd's busiest thread | worker CPU | castd RSS | RSS per viewer | video frames per viewer min / median | delivered min / mean | gaps (frames) | datagrams dropped at castd / at the viewers | first frame p50 / p95 | whep_load CPU | load average |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  cat "$OUT/rows"
} | tee "$OUT/webrtc.txt"
