#!/usr/bin/env bash
# Simulcast cost: castd's CPU and RSS while live with 0, 1, 3 and 5 `source` targets.
#
# castd transcodes a 1280x720 30 fps RTMP publish (ffmpeg, real time, x264 veryfast 3 Mbit/s) into one
# 720p x264 variant; each target is an `ffmpeg -listen 1` RTMP sink on loopback (demux, -f null; its CPU is not
# castd's). For each target count the targets are set (fresh ids, so every target connects anew), the run
# settles for SETTLE s, then castd's main process (where forwarding runs) and its transcode worker are sampled
# from /proc for SAMPLE s: CPU % of one core and the main process's RSS.
#
# Usage: bench/simulcast/run.sh       (CASTD_BIN=PATH picks the binary; default target/release/castd if built,
#                                      else target/debug/castd; SETTLE=5 SAMPLE=20 by default)
# Output goes to bench/out/simulcast/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=$ROOT/bench/out/simulcast
mkdir -p "$OUT"
SETTLE=${SETTLE:-5}
SAMPLE=${SAMPLE:-20}
if [ -z "${CASTD_BIN:-}" ]; then
  if [ -x target/release/castd ]; then CASTD_BIN=$ROOT/target/release/castd; else
    cargo build --quiet
    CASTD_BIN=$ROOT/target/debug/castd
  fi
fi
echo "castd: $CASTD_BIN"
INPUT=$OUT/input-720p30.flv
if [ ! -s "$INPUT" ]; then
  echo "making the input: 30 s testsrc2 1280x720@30 + sine, x264 veryfast 3 Mbit/s, g=60, AAC, FLV"
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=1280x720:rate=30 \
    -f lavfi -i sine=frequency=440:sample_rate=48000 -t 30 \
    -c:v libx264 -preset veryfast -b:v 3M -maxrate 3M -bufsize 6M -g 60 -pix_fmt yuv420p \
    -c:a aac -b:a 128k -f flv "$INPUT"
fi

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

DATA=$(mktemp -d)
KEY=bench-simulcast-key
"$CASTD_BIN" --data-dir "$DATA" --webserverip 127.0.0.1 --webserverport 0 --rtmpport 0 --srtport 0 \
  --streamkey "$KEY" --log-level info 2>"$OUT/castd.log" &
CASTD=$!
PIDS+=("$CASTD")
for _ in $(seq 100); do grep -q "castd is ready" "$OUT/castd.log" && break; sleep 0.1; done
WEB=$(grep -o 'web server listening on http://[0-9.:]*' "$OUT/castd.log" | grep -o '[0-9]*$')
RTMP=$(grep -o 'rtmp server listening on rtmp://[0-9.:]*' "$OUT/castd.log" | grep -o '[0-9]*$')
PASS=$(cat "$DATA/initial-admin-password")
api() { curl -sf -u "admin:$PASS" -H 'content-type: application/json' "http://127.0.0.1:$WEB/api/admin/$1" ${2:+-d "$2"}; }
api config/video/streamoutputvariants \
  '{"value":[{"name":"720p","videoBitrate":2500,"framerate":30,"cpuUsageLevel":2,"audioPassthrough":true}]}' >/dev/null

ffmpeg -hide_banner -loglevel error -re -stream_loop -1 -i "$INPUT" -c copy -f flv \
  "rtmp://127.0.0.1:$RTMP/live/$KEY" &
PIDS+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$WEB/api/status" | grep -q '"online":true' && break; sleep 0.2; done

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
HZ=$(getconf CLK_TCK)
SINKS=()
printf '\n%-8s %14s %14s %12s %s\n' targets "castd CPU %" "worker CPU %" "castd RSS MB" "targets live"
for N in 0 1 3 5; do
  for p in "${SINKS[@]}"; do kill "$p" 2>/dev/null || true; done
  SINKS=()
  TARGETS=""
  for K in $(seq 1 "$N"); do
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    ffmpeg -hide_banner -loglevel error -listen 1 -i "rtmp://127.0.0.1:$PORT/live/sink" -c copy -f null - &
    SINKS+=($!)
    PIDS+=($!)
    TARGETS+="${TARGETS:+,}{\"id\":\"n${N}t$K\",\"name\":\"sink $K\",\"url\":\"rtmp://127.0.0.1:$PORT/live\",\"streamKey\":\"sink\",\"enabled\":true}"
  done
  sleep 0.5
  api config/simulcast/targets "{\"value\":[$TARGETS]}" >/dev/null
  sleep "$SETTLE"
  WORKER=$(pgrep -P "$CASTD" -f ' worker ' | head -1 || true)
  C0=$(ticks "$CASTD"); W0=$( [ -n "$WORKER" ] && ticks "$WORKER" || echo 0 ); T0=$(date +%s.%N)
  RSS_MAX=0
  for _ in $(seq "$SAMPLE"); do
    sleep 1
    R=$(rss_kb "$CASTD"); [ "$R" -gt "$RSS_MAX" ] && RSS_MAX=$R
  done
  C1=$(ticks "$CASTD"); W1=$( [ -n "$WORKER" ] && ticks "$WORKER" || echo 0 ); T1=$(date +%s.%N)
  LIVE=$(api simulcast/status | { grep -o '"state":"live"' || true; } | wc -l)
  python3 -c "
n,c0,c1,w0,w1,t0,t1,hz,rss,live=$N,$C0,$C1,$W0,$W1,$T0,$T1,$HZ,$RSS_MAX,$LIVE
el=t1-t0
print(f'{n:<8} {100*(c1-c0)/hz/el:14.1f} {100*(w1-w0)/hz/el:14.1f} {rss/1024:12.1f} {live}/{n}')"
done
