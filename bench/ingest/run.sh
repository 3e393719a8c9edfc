#!/usr/bin/env bash
# Ingest benchmark (issue: more ways in): the same source published over RTMP, SRT and WHIP to the same
# ladder, side by side in one run. For each protocol it prints
#   - publish -> first playable playlist: ms from starting the publisher to the first variant playlist
#     that lists a segment (a fresh castd each round, so the transcoder's start is included),
#     the median and the spread of ROUNDS rounds;
#   - castd's CPU while ingesting: the castd process alone (its transcoder is a child process and is
#     not counted), in % of one core over MEASURE_SECS of steady publishing, and next to it the idle
#     castd (no publisher) measured the same way, so the difference is what ingesting costs;
#   - the transcoder's CPU over the same window, for scale.
#
# The source: 60 s of testsrc2 1280x720@30 with a 440 Hz tone, x264 veryfast 3 Mbit/s, a keyframe every
# 2 s, AAC 128k, muxed once as MPEG-TS (SRT) and remuxed without re-encoding to FLV (RTMP), both sent with
# `ffmpeg -re -c copy` (looped). WHIP: Chromium (headless, Playwright) publishing the same picture and tone
# from a Y4M/WAV file through its fake capture device (bench/ingest/whip.mjs), encoding H.264 and Opus itself
# (castd turns Opus into AAC), skipped when this castd has no /whip.
#
# Usage: bench/ingest/run.sh   (ROUNDS=3 MEASURE_SECS=20 PROTOCOLS="rtmp srt whip"; builds castd with the
# perf profile unless CASTD_BIN names a binary). Output goes to bench/out/ingest (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=$ROOT/bench/out/ingest
ROUNDS=${ROUNDS:-3}
MEASURE_SECS=${MEASURE_SECS:-20}
PROTOCOLS=${PROTOCOLS:-rtmp srt whip}
WEB_PORT=18580
RTMP_PORT=19580
SRT_PORT=18890
UDP_PORT=18189
KEY=bench-ingest-key
PW=bench-admin-pw
mkdir -p "$OUT"
for tool in ffmpeg curl; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done
if [ -z "${CASTD_BIN:-}" ]; then
  cargo build --profile perf --quiet
  CASTD_BIN=$ROOT/target/perf/castd
fi
BIN=$CASTD_BIN
WEBRTC_ARGS=""
"$BIN" --help | grep -q -- --webrtc-udp-port && WEBRTC_ARGS="--webrtc-udp-port $UDP_PORT"

TS=$OUT/input-720p.ts
FLV=$OUT/input-720p.flv
if [ ! -s "$TS" ] || [ ! -s "$FLV" ]; then
  echo "making the input: 60 s testsrc2 1280x720@30, x264 veryfast 3 Mbit/s, 2 s GOP, AAC 128k"
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=1280x720:rate=30 \
    -f lavfi -i sine=frequency=440:sample_rate=48000 -t 60 \
    -c:v libx264 -preset veryfast -b:v 3M -maxrate 3M -bufsize 6M -g 60 -keyint_min 60 -pix_fmt yuv420p \
    -c:a aac -b:a 128k -f mpegts "$TS"
  ffmpeg -hide_banner -loglevel error -y -i "$TS" -c copy -f flv "$FLV"
fi

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

HZ=$(getconf CLK_TCK)
ticks() { # utime+stime of one process (not its children), in clock ticks
  awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}
now_ms() { date +%s%3N; }
BASE=http://127.0.0.1:$WEB_PORT

start_castd() {
  DATA=$(mktemp -d)
  "$BIN" --data-dir "$DATA" --webserverip 127.0.0.1 --webserverport $WEB_PORT --rtmpport $RTMP_PORT \
    --srtport $SRT_PORT $WEBRTC_ARGS --adminpassword $PW --streamkey $KEY --log-level warn \
    2>"$OUT/castd-$1.log" &
  CASTD=$!
  PIDS+=("$CASTD")
  for _ in $(seq 100); do curl -sf "$BASE/api/status" >/dev/null && return 0; sleep 0.1; done
  echo "castd did not start; see $OUT/castd-$1.log" >&2
  exit 1
}
stop_castd() {
  kill "$CASTD" 2>/dev/null || true
  wait "$CASTD" 2>/dev/null || true
  rm -rf "$DATA"
}
# The transcoder child of castd (the worker), if running.
worker_pid() { pgrep -P "$CASTD" | head -1; }

publish() { # protocol -> starts the publisher in the background, sets PUB
  case $1 in
    rtmp) ffmpeg -hide_banner -loglevel error -re -stream_loop -1 -i "$FLV" -c copy -f flv \
            "rtmp://127.0.0.1:$RTMP_PORT/live/$KEY" & ;;
    srt) ffmpeg -hide_banner -loglevel error -re -stream_loop -1 -i "$TS" -c copy -f mpegts \
            "srt://127.0.0.1:$SRT_PORT?streamid=$KEY&pkt_size=1316" & ;;
    whip) node "$ROOT/bench/ingest/whip.mjs" "$BASE/whip" "$KEY" "$OUT/input-720p.y4m" "$OUT/input.wav" \
            >"$OUT/whip.log" 2>&1 & ;;
  esac
  PUB=$!
  PIDS+=("$PUB")
}
unpublish() { kill "$PUB" 2>/dev/null || true; wait "$PUB" 2>/dev/null || true; }

# ms until a variant playlist lists a segment (polled every 20 ms), or "timeout" after 60 s.
first_playlist() {
  local t0=$1 deadline=$(( $1 + 60000 ))
  while [ "$(now_ms)" -lt $deadline ]; do
    if curl -sf "$BASE/hls/0/stream.m3u8" 2>/dev/null | grep -q '^[^#].*\.\(ts\|m4s\|mp4\)'; then
      echo $(( $(now_ms) - t0 ))
      return
    fi
    sleep 0.02
  done
  echo timeout
}

# castd's and its transcoder's CPU (% of one core) over MEASURE_SECS.
cpu_window() {
  local w c0 w0 c1 w1
  w=$(worker_pid || true)
  c0=$(ticks "$CASTD"); w0=$([ -n "$w" ] && ticks "$w" || echo 0)
  sleep "$MEASURE_SECS"
  c1=$(ticks "$CASTD"); w1=$([ -n "$w" ] && ticks "$w" || echo 0)
  awk -v c=$((c1 - c0)) -v w=$((w1 - w0)) -v hz="$HZ" -v s="$MEASURE_SECS" \
    'BEGIN { printf "%.1f %.1f\n", c * 100 / hz / s, w * 100 / hz / s }'
}

median() { sort -n | awk '{a[NR]=$1} END { if (NR == 0) print "-"; else print a[int((NR + 1) / 2)] }'; }

has_whip() {
  start_castd probe
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' -X OPTIONS "$BASE/whip" || true)
  stop_castd
  [ "$code" != 404 ] && [ "$code" != 405 ] && [ "$code" != 000 ]
}

if [[ " $PROTOCOLS " == *" whip "* ]]; then
  if ! has_whip || [ ! -f "$ROOT/bench/ingest/whip.mjs" ]; then
    echo "(this castd has no WHIP endpoint: WHIP skipped)"
    PROTOCOLS=${PROTOCOLS//whip/}
  elif [ ! -s "$OUT/input-720p.y4m" ]; then
    ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=1280x720:rate=30 -t 10 -pix_fmt yuv420p \
      "$OUT/input-720p.y4m"
    ffmpeg -hide_banner -loglevel error -y -f lavfi -i sine=frequency=440:sample_rate=48000 -t 10 "$OUT/input.wav"
  fi
fi

echo "castd $($BIN --version 2>/dev/null || echo "$BIN"); $(nproc) cores; ladder: castd's default; $ROUNDS rounds"
# Idle: castd with no publisher.
start_castd idle
sleep 2
read -r IDLE_CPU _ < <(cpu_window)
stop_castd

declare -A FIRST CPU WCPU
for p in $PROTOCOLS; do
  firsts=() cpus=() wcpus=()
  for r in $(seq "$ROUNDS"); do
    start_castd "$p"
    t0=$(now_ms)
    publish "$p"
    f=$(first_playlist "$t0")
    firsts+=("$f")
    if [ "$r" = 1 ] && [ "$f" != timeout ]; then
      sleep 3
      read -r c w < <(cpu_window)
      cpus+=("$c"); wcpus+=("$w")
    fi
    unpublish
    stop_castd
    echo "  $p round $r: first playlist after $f ms"
  done
  FIRST[$p]="$(printf '%s\n' "${firsts[@]}" | grep -v timeout | median) ms (rounds: ${firsts[*]})"
  CPU[$p]=${cpus[0]:--}
  WCPU[$p]=${wcpus[0]:--}
done

printf '\n%-6s  %-40s  %-22s  %s\n' protocol "publish -> first playable playlist" "castd CPU (idle ${IDLE_CPU}%)" "transcoder CPU"
for p in $PROTOCOLS; do
  printf '%-6s  %-40s  %-22s  %s\n' "$p" "${FIRST[$p]}" "${CPU[$p]}%" "${WCPU[$p]}%"
done
