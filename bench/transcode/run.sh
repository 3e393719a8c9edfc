#!/usr/bin/env bash
# Transcode benchmark: castd's worker vs the ffmpeg CLI with Owncast's argument set, same input, same
# ladder (720p 1800 kbps + 640x360 600 kbps, x264 veryfast, 30 fps, 2 s segments), in one run.
# Then the publish-to-first-playable-master-playlist time of the daemon over RTMP.
#
# Usage: bench/transcode/run.sh            (builds castd --release first; CASTD_BIN=PATH uses that binary)
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
rm -rf "$OUT/castd" && mkdir -p "$OUT/castd"
CONFIG=$(cat <<EOF
{"hlsDir":"$OUT/castd","segmentSeconds":2,"listSize":15,"encoder":"libx264","append":false,"segmentId":"bench",
 "variants":[
  {"name":"720p","scaledWidth":1280,"scaledHeight":720,"videoBitrate":1800,"framerate":30,"cpuUsageLevel":2,"audioPassthrough":true},
  {"name":"360p","scaledWidth":640,"scaledHeight":360,"videoBitrate":600,"framerate":30,"cpuUsageLevel":2,"audioPassthrough":false,"audioBitrate":96}]}
EOF
)
/usr/bin/time -f "%e %U %S %M" -o "$OUT/castd.time" "$BIN" --log-level warn worker --config "$CONFIG" \
  <"$INPUT" >"$OUT/castd.events"

# (b) the ffmpeg CLI with Owncast's arguments for the same ladder (owncast-compat.md §4).
rm -rf "$OUT/cli" && mkdir -p "$OUT/cli/0" "$OUT/cli/1"
/usr/bin/time -f "%e %U %S %M" -o "$OUT/cli.time" ffmpeg -hide_banner -loglevel warning \
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
  -f hls -hls_time 2 -hls_list_size 15 \
  -hls_flags program_date_time+independent_segments+omit_endlist \
  -segment_format_options mpegts_flags=mpegts_copyts=1 \
  -tune zerolatency -pix_fmt yuv420p -sc_threshold 0 \
  -master_pl_name stream.m3u8 -hls_segment_filename "$OUT/cli/%v/stream-bench-%d.ts" \
  -max_muxing_queue_size 400 "$OUT/cli/%v/stream.m3u8" <"$INPUT"

read -r CW CU CS CM <"$OUT/castd.time"
read -r FW FU FS FM <"$OUT/cli.time"
python3 - "$CW" "$CU" "$CS" "$CM" "$FW" "$FU" "$FS" "$FM" "$MEDIA_SECONDS" <<'EOF'
import sys
cw, cu, cs, cm, fw, fu, fs, fm, media = map(float, sys.argv[1:])
ccpu, fcpu = cu + cs, fu + fs
print()
print("transcode 60 s 1080p30 -> 720p + 360p, x264 veryfast (2 cores shared)")
print(f"{'':22}{'CPU-s':>8}{'CPU-s/media-s':>15}{'wall-s':>9}{'realtime x':>12}{'peak RSS MB':>13}")
print(f"{'castd worker':22}{ccpu:8.1f}{ccpu/media:15.3f}{cw:9.1f}{media/cw:12.2f}{cm/1024:13.0f}")
print(f"{'ffmpeg CLI (Owncast)':22}{fcpu:8.1f}{fcpu/media:15.3f}{fw:9.1f}{media/fw:12.2f}{fm/1024:13.0f}")
ratio = ccpu / fcpu
print(f"castd / CLI CPU time: {ratio:.2f}x  (target <= 0.90x: {'met' if ratio <= 0.9 else 'NOT met'})")
EOF
for d in castd cli; do
  for n in 0 1; do
    seg=$(ls "$OUT/$d/$n"/*.ts | sort -V | tail -2 | head -1)
    printf '%-6s variant %s: %s\n' "$d" "$n" \
      "$(ffprobe -v error -select_streams v:0 -show_entries stream=codec_name,width,height,profile -of csv=p=0 "$seg" | head -1)"
  done
done

# Hardware encoders: when `castd encoders --json` finds one available, the same ladder on it beside x264,
# then (BENCH_HW_LADDER=1, default on) N concurrent 1080p30 -> 1080/720/480/360 ladders until realtime breaks.
HW_LIST=$("$BIN" --log-level error encoders --json | python3 -c '
import json, sys
print(" ".join(e["name"] for e in json.load(sys.stdin) if e["available"] and e["kind"] != "software"))')
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
