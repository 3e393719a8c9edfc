#!/usr/bin/env bash
# Channels benchmark (issue 41).
# (1) Three channels live at once: castd (release build) with three channels, each published over RTMP
#     (ffmpeg testsrc2 720p30, x264 ultrafast) and each with a 720p passthrough + 640x360 rung ladder.
#     Over BENCH_SECONDS (60) it prints castd's CPU (castd and its transcoder processes, % of one core),
#     its RSS, and per channel whether it stays real time: the 360p rung's new segments against the
#     seconds elapsed over the segment duration, and the largest segment duration.
# (2) Per-channel overhead of idle channels: castd's RSS, threads and open files with 0, 10 and 50 idle
#     channels (each a complete stack: database, chat, API...), measured 5 s after the last is created.
#
# Usage: bench/channels/run.sh        (builds castd --release first; CASTD_BIN=PATH uses that binary)
# Needs: ffmpeg, curl, python3. Output goes to bench/out/channels/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=$ROOT/bench/out/channels
mkdir -p "$OUT"
SECONDS_LIVE=${BENCH_SECONDS:-60}
PASS=bench-server-admin-pw

if [ -z "${CASTD_BIN:-}" ]; then
  cargo build --release --quiet
  CASTD_BIN=$ROOT/target/release/castd
fi
BIN=$CASTD_BIN

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PIDS_TO_KILL=()
cleanup() { for p in "${PIDS_TO_KILL[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# start castd in a new data dir; sets CASTD_PID, WEB, RTMP
start_castd() {
  local dir=$1
  rm -rf "$dir" && mkdir -p "$dir"
  WEB=$(free_port); RTMP=$(free_port)
  "$BIN" --data-dir "$dir" --webserverip 127.0.0.1 --webserverport "$WEB" --rtmpport "$RTMP" --srtport 0 \
    --webrtc-udp-port 0 --adminpassword "$PASS" --log-level warn 2>"$dir/castd.log" &
  CASTD_PID=$!
  PIDS_TO_KILL+=("$CASTD_PID")
  until curl -fs -o /dev/null "http://127.0.0.1:$WEB/api/status"; do
    kill -0 "$CASTD_PID" 2>/dev/null || { echo "castd died:"; cat "$dir/castd.log"; exit 1; }
    sleep 0.05
  done
}
stop_castd() { kill -TERM "$CASTD_PID"; wait "$CASTD_PID" 2>/dev/null || true; }

api() { curl -fsS -u "admin:$PASS" "$@"; }
create_channel() {
  api -o /dev/null -H 'content-type: application/json' \
    -d "{\"slug\":\"$1\",\"name\":\"Bench $1\",\"adminPassword\":\"$1-bench-admin-pw\"}" \
    "http://127.0.0.1:$WEB/api/admin/channels/create"
}
set_config() { # slug name json-value
  api -o /dev/null -H 'content-type: application/json' -d "{\"value\":$3}" \
    "http://127.0.0.1:$WEB/c/$1/api/admin/config/$2"
}
# castd and every process below it: "cpu-ticks rss-kB threads fds"
proc_tree() {
  python3 - "$1" <<'PY'
import os, sys
root = int(sys.argv[1])
kids = {}
for p in os.listdir('/proc'):
    if not p.isdigit(): continue
    try:
        st = open(f'/proc/{p}/stat').read()
    except OSError: continue
    ppid = int(st.rsplit(')', 1)[1].split()[1])
    kids.setdefault(ppid, []).append(int(p))
todo, tree = [root], []
while todo:
    p = todo.pop(); tree.append(p); todo += kids.get(p, [])
ticks = rss = threads = fds = 0
for p in tree:
    try:
        f = open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()
        ticks += int(f[11]) + int(f[12])
        for line in open(f'/proc/{p}/status'):
            if line.startswith('VmRSS:'): rss += int(line.split()[1])
            if line.startswith('Threads:'): threads += int(line.split()[1])
        fds += len(os.listdir(f'/proc/{p}/fd'))
    except OSError: pass
print(ticks, rss, threads, fds, len(tree))
PY
}
# "media-sequence segments max-extinf target" of a playlist
playlist_state() {
  curl -fs "$1" | python3 -c '
import sys
seq = n = 0; mx = 0.0; target = 0
for l in sys.stdin:
    l = l.strip()
    if l.startswith("#EXT-X-MEDIA-SEQUENCE:"): seq = int(l.split(":")[1])
    elif l.startswith("#EXT-X-TARGETDURATION:"): target = int(l.split(":")[1])
    elif l.startswith("#EXTINF:"): mx = max(mx, float(l[8:].split(",")[0]))
    elif l and not l.startswith("#"): n += 1
print(seq, n, mx, target)' || echo "0 0 0 0"
}

echo "castd channels benchmark ($(nproc) cores, $(uname -m), $BIN)"

# --- (1) three channels live ----------------------------------------------------------------------
start_castd "$OUT/live"
LADDER='[{"name":"720p","videoPassthrough":true},
  {"name":"360p","scaledWidth":640,"scaledHeight":360,"videoBitrate":600,"framerate":30,"cpuUsageLevel":0,"audioPassthrough":true}]'
PUBS=()
for ch in one two three; do
  create_channel "$ch"
  set_config "$ch" video/streamoutputvariants "$LADDER"
  key=$(curl -fsS -u "admin:$ch-bench-admin-pw" "http://127.0.0.1:$WEB/c/$ch/api/admin/serverconfig" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["streamKeys"][0]["key"])')
  ffmpeg -hide_banner -loglevel error -re -f lavfi -i testsrc2=size=1280x720:rate=30 \
    -f lavfi -i sine=frequency=440 -t $((SECONDS_LIVE + 60)) \
    -c:v libx264 -preset ultrafast -tune zerolatency -b:v 2500k -g 60 -c:a aac -f flv \
    "rtmp://127.0.0.1:$RTMP/live/$key" </dev/null 2>"$OUT/live/ffmpeg-$ch.log" &
  PUBS+=($!); PIDS_TO_KILL+=($!)
done
for ch in one two three; do
  for _ in $(seq 60); do
    curl -fs "http://127.0.0.1:$WEB/c/$ch/hls/1/stream.m3u8" >/dev/null && break
    sleep 1
  done
done
sleep 4 # warm-up: the transcoders settle
declare -A SEQ0 N0
for ch in one two three; do read -r s n _ _ < <(playlist_state "http://127.0.0.1:$WEB/c/$ch/hls/1/stream.m3u8"); SEQ0[$ch]=$s; N0[$ch]=$n; done
read -r T0 _ _ _ _ < <(proc_tree "$CASTD_PID")
W0=$(date +%s.%N)
RSS_MAX=0
for _ in $(seq "$SECONDS_LIVE"); do
  sleep 1
  read -r _ rss _ _ _ < <(proc_tree "$CASTD_PID")
  [ "$rss" -gt "$RSS_MAX" ] && RSS_MAX=$rss
done
read -r T1 RSS THREADS FDS NPROC < <(proc_tree "$CASTD_PID")
W1=$(date +%s.%N)
HZ=$(getconf CLK_TCK)
python3 -c "
t0,t1,w0,w1,hz=$T0,$T1,$W0,$W1,$HZ
print(f'three channels live for {w1-w0:.0f} s (720p30 passthrough + 360p30 x264 each):')
print(f'  castd CPU: {(t1-t0)/hz/(w1-w0)*100:.0f}% of one core (castd + transcoders, {$NPROC} processes)')
print(f'  castd RSS: {$RSS/1024:.0f} MB at the end, {$RSS_MAX/1024:.0f} MB peak; {$THREADS} threads, {$FDS} open files')"
printf '  %-8s %10s %10s %10s %12s %s\n' channel segments expected target max-EXTINF "real time"
for ch in one two three; do
  read -r s n mx target < <(playlist_state "http://127.0.0.1:$WEB/c/$ch/hls/1/stream.m3u8")
  python3 -c "
made = ($s + $n) - (${SEQ0[$ch]} + ${N0[$ch]})
target = $target or 1
expected = ($W1 - $W0) / target
ok = made >= expected * 0.9 and $mx <= target * 1.5
print(f'  {\"$ch\":8} {made:10d} {expected:10.1f} {target:9d}s {$mx:11.2f}s {\"yes\" if ok else \"NO\"}')"
done
for p in "${PUBS[@]}"; do kill "$p" 2>/dev/null || true; done
stop_castd

# --- (2) idle channels ----------------------------------------------------------------------------
start_castd "$OUT/idle"
HZ=$(getconf CLK_TCK)
echo "idle channels (each a whole channel stack), 5 s after the last is created:"
printf '  %-9s %9s %13s %8s %11s %14s\n' channels "RSS MB" "MB/channel" threads "open files" "idle CPU %"
made=0; base_rss=0
for n in 0 10 50; do
  while [ "$made" -lt "$n" ]; do made=$((made + 1)); create_channel "idle$made"; done
  sleep 5
  read -r ta rss threads fds _ < <(proc_tree "$CASTD_PID"); wa=$(date +%s.%N)
  sleep 5
  read -r tb _ _ _ _ < <(proc_tree "$CASTD_PID"); wb=$(date +%s.%N)
  [ "$n" = 0 ] && base_rss=$rss
  python3 -c "
n,rss,base=$n,$rss,$base_rss
per = f'{(rss-base)/1024/n:.2f}' if n else '-'
print(f'  {n:<9} {rss/1024:9.1f} {per:>13} {$threads:8d} {$fds:11d} {($tb-$ta)/$HZ/($wb-$wa)*100:14.1f}')"
done
stop_castd
