#!/usr/bin/env bash
# Transcode benchmark: castd's worker vs the ffmpeg CLI with Owncast's argument set, same input, same
# ladder (720p 1800 kbps + 640x360 600 kbps, x264 veryfast, 30 fps, 2 s segments), in one run.
# Then the publish-to-first-playable-master-playlist time of the daemon over RTMP.
#
# Usage: bench/transcode/run.sh            (builds castd --release first; CASTD_BIN=PATH uses that binary)
# ROUNDS=N alternating runs (median; default 3), BEFORE_BIN=PATH a second castd in the same run,
# BENCH_QUALITY=0 / BENCH_HW=0 / BENCH_PUBLISH=0 skip the quality, hardware and publish parts.
# Output goes to bench/out/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=$ROOT/bench/out/transcode
mkdir -p "$OUT"

if [ -z "${CASTD_BIN:-}" ]; then
  cargo build --release --quiet
  CASTD_BIN=$ROOT/target/release/castd
fi
BIN=$CASTD_BIN
INPUT=$OUT/input-1080p30-60s.flv
if [ ! -s "$INPUT" ]; then
  echo "making the input: 60 s testsrc2 1920x1080@30 + sine, x264 veryfast 6 Mbit/s, AAC, FLV"
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=1920x1080:rate=30 \
    -f lavfi -i sine=frequency=440:sample_rate=48000 -t 60 \
    -c:v libx264 -preset veryfast -b:v 6M -maxrate 6M -bufsize 12M -g 60 -pix_fmt yuv420p \
    -c:a aac -b:a 128k -f flv "$INPUT"
fi
MEDIA_SECONDS=60

# (a) castd's worker: decode once (one thread), a thread per variant, 720p by the 3:2 area scaler,
#     360p halved from the 720p picture, x264 with the same options and one thread per encode.
CONFIG_TEMPLATE=$(cat <<EOF
{"hlsDir":"@DIR@","segmentSeconds":2,"listSize":100,"encoder":"libx264","append":false,"segmentId":"bench",
 "variants":[
  {"name":"720p","scaledWidth":1280,"scaledHeight":720,"videoBitrate":1800,"framerate":30,"cpuUsageLevel":2,"audioPassthrough":true},
  {"name":"360p","scaledWidth":640,"scaledHeight":360,"videoBitrate":600,"framerate":30,"cpuUsageLevel":2,"audioPassthrough":false,"audioBitrate":96}]}
EOF
)
CONFIG=${CONFIG_TEMPLATE//@DIR@/$OUT/castd}
run_castd() { # BIN DIR TIMEFILE
  rm -rf "$2" && mkdir -p "$2"
  /usr/bin/time -f "%e %U %S %M" -o "$3" "$1" --log-level warn worker --config "${CONFIG_TEMPLATE//@DIR@/$2}" \
    <"$INPUT" >"$2.events"
}

# (b) the ffmpeg CLI with Owncast's arguments for the same ladder (owncast-compat.md §4).
run_cli() { # DIR TIMEFILE
  rm -rf "$1" && mkdir -p "$1/0" "$1/1"
  /usr/bin/time -f "%e %U %S %M" -o "$2" ffmpeg -hide_banner -loglevel warning \
    -fflags +genpts -flags +cgop -i pipe:0 \
    -map v:0 -c:v:0 libx264 -b:v:0 1608k -maxrate:v:0 1736k -g:v:0 60 -keyint_min:v:0 60 -r:v:0 30 \
    -x264-params:v:0 scenecut=0:open_gop=0 -bufsize:v:0 1736k -profile:v:0 high \
    -sws_flags bilinear -filter:v:0 scale=1280:720 -preset veryfast \
    -map 'a:0?' -c:a:0 copy \
    -map v:0 -c:v:1 libx264 -b:v:1 408k -maxrate:v:1 440k -g:v:1 60 -keyint_min:v:1 60 -r:v:1 30 \
    -x264-params:v:1 scenecut=0:open_gop=0 -bufsize:v:1 440k -profile:v:1 high \
    -sws_flags bilinear -filter:v:1 scale=640:360 -preset veryfast \
    -map 'a:0?' -c:a:1 aac -b:a:1 96k \
    -var_stream_map "v:0,a:0 v:1,a:1" \
    -f hls -hls_time 2 -hls_list_size 100 \
    -hls_flags program_date_time+independent_segments+omit_endlist \
    -segment_format_options mpegts_flags=mpegts_copyts=1 \
    -tune zerolatency -pix_fmt yuv420p -sc_threshold 0 \
    -master_pl_name stream.m3u8 -hls_segment_filename "$1/%v/stream-bench-%d.ts" \
    -max_muxing_queue_size 400 "$1/%v/stream.m3u8" <"$INPUT"
}

# ROUNDS (default 3) alternating runs of each; BEFORE_BIN adds another castd build (e.g. main before a
# change) as a third row in the same run. The median run of each is printed.
ROUNDS=${ROUNDS:-3}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  run_castd "$BIN" "$OUT/castd" "$OUT/castd.time.$r"
  run_cli "$OUT/cli" "$OUT/cli.time.$r"
  if [ -n "${BEFORE_BIN:-}" ]; then run_castd "$BEFORE_BIN" "$OUT/before" "$OUT/before.time.$r"; fi
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT" "$ROUNDS" "$MEDIA_SECONDS" "${BEFORE_BIN:+before}" <<'EOF'
import sys, statistics
out, rounds, media = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
names = [("castd", "castd worker"), ("cli", "ffmpeg CLI (Owncast)")] + ([("before", "castd before")] if sys.argv[4:] and sys.argv[4] else [])
rows = {}
for key, _ in names:
    runs = []
    for r in range(1, rounds + 1):
        w, u, s, m = map(float, open(f"{out}/{key}.time.{r}").read().split())
        runs.append((u + s, w, m))
    rows[key] = runs
print()
print(f"transcode 60 s 1080p30 -> 720p + 360p, x264 veryfast, median of {rounds} alternating runs (2 cores shared)")
print(f"{'':22}{'CPU-s':>8}{'CPU-s/media-s':>15}{'wall-s':>9}{'realtime x':>12}{'peak RSS MB':>13}   CPU-s of each run")
med = {}
for key, label in names:
    cpu = statistics.median(r[0] for r in rows[key]); wall = statistics.median(r[1] for r in rows[key])
    rss = max(r[2] for r in rows[key]); med[key] = cpu
    print(f"{label:22}{cpu:8.1f}{cpu/media:15.3f}{wall:9.1f}{media/wall:12.2f}{rss/1024:13.0f}   " + " ".join(f"{r[0]:.1f}" for r in rows[key]))
ratio = med["castd"] / med["cli"]
print(f"castd / CLI CPU time: {ratio:.2f}x  (issue 44's target <= 0.75x: {'met' if ratio <= 0.75 else 'NOT met'})")
if "before" in med:
    print(f"castd before / CLI: {med['before'] / med['cli']:.2f}x; after / before: {med['castd'] / med['before']:.2f}x")
EOF
for d in castd cli; do
  for n in 0 1; do
    seg=$(ls "$OUT/$d/$n"/*.ts | sort -V | tail -2 | head -1)
    printf '%-6s variant %s: %s\n' "$d" "$n" \
      "$(ffprobe -v error -select_streams v:0 -show_entries stream=codec_name,width,height,profile -of csv=p=0 "$seg" | head -1)"
  done
done

# Picture quality of each rung against the source (scaled with lanczos to the rung's size), for castd and
# the CLI (and the before build): PSNR and SSIM (Debian's ffmpeg has no libvmaf), so a CPU saving is not
# bought with worse pictures. BENCH_QUALITY=0 skips it.
quality() { # DIR VARIANT W H -> "psnr ssim offset"
  # Frames are matched by index, not timestamp: the FLV input's millisecond timestamps against the
  # outputs' exact 1/30 s make the filters' timestamp sync compare most frames with the one before.
  # The first frame to compare is found among the rung's first three (the CLI's -r 30 duplicates its
  # first frame), by PSNR over 90 frames.
  local list best=0 bestp=0
  list=$(mktemp)
  for f in $(ls "$1/$2"/*.ts | sort -V); do echo "file '$f'" >>"$list"; done
  for off in 0 1 2; do
    local p
    p=$(ffmpeg -hide_banner -nostats -f concat -safe 0 -i "$list" -i "$INPUT" -lavfi \
      "[0:v]trim=start_frame=$off,setpts=N/30/TB,trim=end_frame=90[a];[1:v]setpts=N/30/TB,scale=$3:$4:flags=lanczos,trim=end_frame=90[r];[a][r]psnr" \
      -f null - 2>&1 | sed -n 's/.*average:\([0-9.]*\).*/\1/p' | tail -1)
    if awk "BEGIN{exit !(${p:-0} > $bestp)}"; then bestp=${p:-0}; best=$off; fi
  done
  ffmpeg -hide_banner -nostats -loglevel info -f concat -safe 0 -i "$list" -i "$INPUT" -lavfi \
    "[0:v]trim=start_frame=$best,setpts=N/30/TB,split[a0][a1];[1:v]setpts=N/30/TB,scale=$3:$4:flags=lanczos,split[r0][r1];[a0][r0]psnr;[a1][r1]ssim" \
    -f null - 2>&1 | awk -v off="$best" '/PSNR/ { for (i = 1; i <= NF; i++) if ($i ~ /^average:/) { sub("average:", "", $i); p = $i } }
      /SSIM/ { for (i = 1; i <= NF; i++) if ($i ~ /^All:/) { sub("All:", "", $i); s = $i } } END { print p, s, off }'
  rm -f "$list"
}
if [ "${BENCH_QUALITY:-1}" = 1 ]; then
  echo
  echo "quality against the source (lanczos-scaled to the rung), all 60 s, frame by frame:"
  printf '%-14s %-8s %10s %10s %14s\n' build rung PSNR-dB SSIM first-frame
  for d in castd cli ${BEFORE_BIN:+before}; do
    for v in "0 1280 720" "1 640 360"; do
      read -r n w h <<<"$v"
      read -r P S O <<<"$(quality "$OUT/$d" "$n" "$w" "$h")"
      printf '%-14s %-8s %10s %10s %14s\n' "$d" "${h}p" "$P" "$S" "$O"
    done
  done
fi

# Hardware encoders: when `castd encoders --json` finds one available, the same ladder on it beside x264,
# then (BENCH_HW_LADDER=1, default on) N concurrent 1080p30 -> 1080/720/480/360 ladders until realtime breaks.
HW_LIST=""
if [ "${BENCH_HW:-1}" = 1 ]; then
  HW_LIST=$("$BIN" --log-level error encoders --json | python3 -c '
import json, sys
print(" ".join(e["name"] for e in json.load(sys.stdin) if e["available"] and e["kind"] != "software"))')
fi
if [ -z "$HW_LIST" ]; then
  echo "hardware encoders: no hardware encoder available: skipped"
else
  for HW in $HW_LIST; do
    rm -rf "$OUT/hw-$HW" && mkdir -p "$OUT/hw-$HW"
    HWCONFIG=${CONFIG//\"encoder\":\"libx264\"/\"encoder\":\"$HW\"}
    HWCONFIG=${HWCONFIG//$OUT\/castd/$OUT\/hw-$HW}
    if /usr/bin/time -f "%e %U %S %M" -o "$OUT/hw-$HW.time" "$BIN" --log-level warn worker --config "$HWCONFIG" \
      <"$INPUT" >"$OUT/hw-$HW.events"; then
      read -r HW_W HW_U HW_S HW_M <"$OUT/hw-$HW.time"
      python3 -c "
w,u,s,m,media=$HW_W,$HW_U,$HW_S,$HW_M,$MEDIA_SECONDS
print(f'{\"castd $HW\":22}{u+s:8.1f}{(u+s)/media:15.3f}{w:9.1f}{media/w:12.2f}{m/1024:13.0f}   (x264 above: castd worker)')"
    else
      echo "$HW: the worker failed: $(tail -1 "$OUT/hw-$HW.events")"
      continue
    fi
    [ "${BENCH_HW_LADDER:-1}" = 1 ] || continue
    LADDER='[{"scaledWidth":1920,"scaledHeight":1080,"videoBitrate":6000,"framerate":30,"cpuUsageLevel":2},
      {"scaledWidth":1280,"scaledHeight":720,"videoBitrate":3000,"framerate":30,"cpuUsageLevel":2},
      {"scaledWidth":854,"scaledHeight":480,"videoBitrate":1500,"framerate":30,"cpuUsageLevel":2},
      {"scaledWidth":640,"scaledHeight":360,"videoBitrate":800,"framerate":30,"cpuUsageLevel":2}]'
    for N in $(seq 1 "${BENCH_HW_MAX_LADDERS:-32}"); do
      PIDS=()
      START=$(date +%s.%N)
      for K in $(seq 1 "$N"); do
        D=$OUT/hw-ladder-$HW/$K && rm -rf "$D" && mkdir -p "$D"
        "$BIN" --log-level error worker --config "{\"hlsDir\":\"$D\",\"segmentSeconds\":2,\"listSize\":15,\"encoder\":\"$HW\",\"append\":false,\"segmentId\":\"b\",\"variants\":$LADDER}" \
          <"$INPUT" >/dev/null & PIDS+=($!)
      done
      FAIL=0
      for P in "${PIDS[@]}"; do wait "$P" || FAIL=1; done
      X=$(python3 -c "import time; print(f'{$MEDIA_SECONDS/(time.time()-$START):.2f}')")
      echo "$HW: $N concurrent 1080p30 ladders (1080/720/480/360): ${X}x realtime$([ $FAIL = 1 ] && echo ', a worker failed')"
      if [ $FAIL = 1 ] || python3 -c "import sys; sys.exit(0 if $X < 1.0 else 1)"; then
        echo "$HW: realtime breaks at $N ladders (the last that kept up: $((N - 1)))"
        break
      fi
    done
  done
fi

# Publish-to-first-playable-master: the daemon over RTMP, real time (-re), for latency levels 1 and 2.
# BENCH_PUBLISH=0 skips it.
[ "${BENCH_PUBLISH:-1}" = 1 ] || exit 0
for LEVEL in 1 2; do
  DATA=$OUT/daemon-$LEVEL
  rm -rf "$DATA" && mkdir -p "$DATA"
  : >"$DATA/log"
  "$BIN" --data-dir "$DATA" --webserverip 127.0.0.1 --webserverport 0 --rtmpport 0 \
    --adminpassword benchpw --streamkey benchkey 2>"$DATA/log" &
  PID=$!
  for _ in $(seq 100); do grep -q "castd is ready" "$DATA/log" && break; sleep 0.1; done
  WEB=$(grep -o 'web server listening on http://[0-9.:]*' "$DATA/log" | sed 's/.*://')
  RTMP=$(grep -o 'rtmp server listening on rtmp://[0-9.:]*' "$DATA/log" | sed 's/.*://')
  API=http://127.0.0.1:$WEB
  curl -s -u admin:benchpw -X POST "$API/api/admin/config/video/streamlatencylevel" -d "{\"value\":$LEVEL}" >/dev/null
  curl -s -u admin:benchpw -X POST "$API/api/admin/config/video/streamoutputvariants" -d '{"value":[
    {"scaledWidth":1280,"scaledHeight":720,"videoBitrate":1800,"framerate":30,"cpuUsageLevel":2,"audioPassthrough":true},
    {"scaledWidth":640,"scaledHeight":360,"videoBitrate":600,"framerate":30,"cpuUsageLevel":2,"audioPassthrough":false,"audioBitrate":96}]}' >/dev/null
  START=$(date +%s.%N)
  ffmpeg -hide_banner -loglevel error -re -i "$INPUT" -t 20 -c copy -f flv "rtmp://127.0.0.1:$RTMP/live/benchkey" &
  FF=$!
  READY=""
  for _ in $(seq 300); do
    if curl -sf "$API/hls/stream.m3u8" 2>/dev/null | grep -q "1/stream.m3u8"; then READY=$(date +%s.%N); break; fi
    sleep 0.05
  done
  kill "$FF" 2>/dev/null || true; wait "$FF" 2>/dev/null || true
  kill "$PID"; wait "$PID" 2>/dev/null || true
  SEG=$((LEVEL + 1))
  if [ -n "$READY" ]; then
    python3 -c "t=$READY-$START; print(f'latency level $LEVEL ($SEG s segments): publish -> playable master {t:.2f} s = {t/$SEG:.2f} x segment length (target <= 1.5 x)')"
  else
    echo "latency level $LEVEL: master playlist not playable within 15 s"
  fi
done
