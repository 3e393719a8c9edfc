#!/usr/bin/env bash
# Replays benchmark (issue 31), two figures:
#  1. The cost of recording while live: the same passthrough publish (SECS seconds of a 1280x720 test pattern,
#     latency level 1) with replays on and off; the castd daemon's CPU seconds (utime+stime, /proc/PID/stat, the
#     transcode worker child excluded: it writes the segments either way) and bytes it wrote to disk
#     (/proc/PID/io write_bytes), and the link count of the recorded files (2 = a hard link, no second copy).
#  2. The time to the first byte (and to the whole file) of download.mp4 for a HOURS-hour replay: an hour of
#     2 s segments (320x180, made once with ffmpeg, not in real time) is placed into the data directory and the
#     database as a finished replay, then `curl` fetches /replay/<id>/download.mp4.
# Usage: bench/replays/run.sh [SECS] [HOURS]   (default: 60 1); CASTD_BIN (default target/debug/castd)
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS="${1:-60}"; HOURS="${2:-1}"
BIN="${CASTD_BIN:-target/debug/castd}"
[ -x "$BIN" ] || { echo "no castd at $BIN: cargo build first" >&2; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
echo "castd: $BIN; machine: $(nproc) cores, $(awk '/MemTotal/{print int($2/1024)" MiB"}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg); data dir on $(df -T "$work" | awk 'NR==2{print $2}')"

# Start castd on $1 (data dir); sets PID, WEB, RTMP.
start() {
  local dir=$1
  mkdir -p "$dir"
  "$BIN" --data-dir "$dir" --webserverip 127.0.0.1 --webserverport 0 --rtmpport 0 --srtport 0 --streamkey bench-key-123 >"$dir/log" 2>&1 &
  PID=$!; pids+=("$PID")
  for _ in $(seq 300); do grep -q "castd is ready" "$dir/log" 2>/dev/null && break; sleep 0.1; done
  WEB=$(grep -o 'web server listening on http://[0-9.:]*' "$dir/log" | head -1 | sed 's/.*http:\/\///')
  RTMP=$(grep -o 'rtmp server listening on rtmp://[0-9.:]*' "$dir/log" | head -1 | sed 's/.*rtmp:\/\///')
  PASS=$(cat "$dir/initial-admin-password")
}
set_cfg() { curl -sf -u "admin:$PASS" -H 'content-type: application/json' -d "{\"value\": $2}" "http://$WEB/api/admin/config/$1" >/dev/null; }
cpu() { awk '{print ($14+$15)/100}' "/proc/$1/stat"; }
written() { awk '/^write_bytes/{print $2}' "/proc/$1/io"; }

record_run() {
  local on=$1 dir="$work/rec-$1"
  start "$dir"
  set_cfg video/streamoutputvariants '[{"name":"source","videoPassthrough":true,"audioPassthrough":true}]'
  set_cfg video/streamlatencylevel 1
  set_cfg replay/enable "$on"
  local c0 w0; c0=$(cpu "$PID"); w0=$(written "$PID")
  ffmpeg -hide_banner -loglevel error -nostdin -re -f lavfi -i testsrc2=size=1280x720:rate=30 -f lavfi -i sine=frequency=440 \
    -t "$SECS" -c:v libx264 -preset ultrafast -g 60 -b:v 3M -c:a aac -f flv "rtmp://$RTMP/live/bench-key-123"
  sleep 4
  local c1 w1; c1=$(cpu "$PID"); w1=$(written "$PID")
  local rec_bytes links
  rec_bytes=$(du -sb "$dir/replays" 2>/dev/null | cut -f1)
  links=$(find "$dir/replays" -name '*.ts' -printf '%n\n' 2>/dev/null | sort | uniq -c | tr '\n' ' ')
  printf '%-13s daemon CPU %6.2f s, daemon disk writes %8.1f MB; replays folder %7.1f MB; link counts of recorded files: %s\n' \
    "replays $on:" "$(echo "$c1 - $c0" | bc)" "$(echo "($w1 - $w0)/1000000" | bc -l)" "$(echo "${rec_bytes:-0}/1000000" | bc -l)" "${links:-none}"
  kill "$PID"; wait "$PID" 2>/dev/null || true
}

echo "1. recording while live: ${SECS} s passthrough publish, 1280x720 3 Mbit/s, 2 s segments"
record_run false
record_run true

echo "2. download.mp4 of a ${HOURS} h replay"
segs="$work/segs"; mkdir -p "$segs"
t0=$(date +%s.%N)
ffmpeg -hide_banner -loglevel error -nostdin -f lavfi -i testsrc2=size=320x180:rate=30 -f lavfi -i sine=frequency=440 \
  -t "$((HOURS * 3600))" -c:v libx264 -preset ultrafast -g 60 -c:a aac -f hls -hls_time 2 -hls_list_size 0 \
  -hls_segment_filename "$segs/s-%05d.ts" "$segs/index.m3u8"
echo "   (made $(ls "$segs"/*.ts | wc -l) segments in $(echo "$(date +%s.%N) - $t0" | bc | cut -c1-5) s)"
dir="$work/dl"
start "$dir"; kill "$PID"; wait "$PID" 2>/dev/null || true
mkdir -p "$dir/replays/benchhour/0"
cp "$segs"/*.ts "$dir/replays/benchhour/0/"
python3 - "$dir/castd.db" "$segs/index.m3u8" "$dir/replays/benchhour/0" <<'PY'
import os, sqlite3, sys
db, playlist, folder = sys.argv[1:]
c = sqlite3.connect(db)
c.execute("INSERT INTO replays (id, title, stream_title, start_time, end_time, status) VALUES ('benchhour', 'One hour', '', '2026-01-01T00:00:00.000Z', '2026-01-01T01:00:00.000Z', 'finished')")
offset, seq, dur = 0.0, 0, None
for line in open(playlist):
    line = line.strip()
    if line.startswith('#EXTINF:'):
        dur = float(line[8:].split(',')[0])
    elif line and not line.startswith('#'):
        size = os.path.getsize(os.path.join(folder, line))
        c.execute("INSERT INTO replay_segments (replay_id, variant, seq, file, duration, media_offset, bytes) VALUES ('benchhour', 0, ?, ?, ?, ?, ?)", (seq, line, dur, offset, size))
        offset += dur; seq += 1
c.commit()
print(f"   replay: {seq} segments, {offset/3600:.2f} h")
PY
start "$dir"
for run in 1 2 3; do
  curl -s -u "admin:$PASS" -o "$work/out.mp4" -w "   run $run: first byte %{time_starttransfer} s, whole file %{time_total} s, %{size_download} bytes\n" "http://$WEB/replay/benchhour/download.mp4"
done
ffprobe -v error -show_entries format=duration -of default=noprint_wrappers=1 "$work/out.mp4" | sed 's/^/   ffprobe of the download: /'
