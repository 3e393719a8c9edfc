#!/usr/bin/env bash
# HLS serving benchmark: castd serving a live segment and its playlist (from memory, while a stream is
# live) vs nginx serving the very same bytes from disk (sendfile on, workers = cores, no access log),
# with wrk at 64 and 512 connections, side by side in one run. Prints requests/s, p50/p99 latency,
# bytes/s and server CPU per 1,000 requests for each.
#
# The stream is a pre-encoded 720p H.264 file published with `-c copy` to a passthrough variant, so
# castd does no transcoding while it is measured.
#
# Each figure is the median of ROUNDS (default 3) runs, castd and nginx alternating, so a burst of other
# load on the machine cannot favour one of them.
#
# ENDED=1 measures the stream after it has ended (issue 44): the publisher stops, castd writes the final
# playlist (EXT-X-ENDLIST) and serves it and the segments from disk (`http::diskcache`), not from the live
# window in memory.
#
# PRIVATE=1 adds the cost of pass checking (issue 42): in the same run and on the same castd, the channel is
# made private (visibility password) for the rows `castd-pass` (the viewing pass as the cookie, as browsers
# send it) and, for the playlist, `castd-query` (the pass as `?pass=`, as VLC/mpv send it: castd then writes
# it into every URI of the playlist), and public again for the `castd` row; each private figure is printed
# as a fraction of the public one.
#
# CHANNEL=1 adds a channel's HLS (issue 53): a channel `bench` on the same castd, live with the same input, its
# playlist and segment measured as `castd-channel` (`/c/bench/hls/...`) beside the default channel's, each printed
# as a fraction of the default channel's requests/s.
#
# Usage: bench/hls/run.sh [SECONDS_PER_RUN]   (default 8; builds castd with the perf profile first)
# CONNS="64" TARGETS="playlist" ROUNDS=1 limit a run to some of the cases; WRK_THREADS (default 1) sets
# wrk's threads (the wrk-cpu column shows when one thread is the bottleneck).
# Installs wrk and nginx-light when missing (nginx's own service is kept from starting: only this
# script's instance runs, on 127.0.0.1). Output goes to bench/out/hls (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=$ROOT/bench/out/hls
DUR=${1:-8}
ROUNDS=${ROUNDS:-3}
WEB_PORT=18480
RTMP_PORT=19480
NGINX_PORT=18481
KEY=bench-hls-key
PW=bench-admin-pw
mkdir -p "$OUT"
if ! command -v wrk >/dev/null || ! command -v nginx >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  # policy-rc.d 101: the package's service must not start (it would listen on port 80).
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends wrk nginx-light
  $SUDO rm -f /usr/sbin/policy-rc.d
fi
for tool in wrk nginx ffmpeg curl; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done

# CASTD_BIN picks the binary (bench/compare runs two revisions); by default the perf profile, built here.
if [ -z "${CASTD_BIN:-}" ]; then
  cargo build --profile perf --quiet
  CASTD_BIN=$ROOT/target/perf/castd
fi
BIN=$CASTD_BIN

INPUT=$OUT/input-720p.flv
if [ ! -s "$INPUT" ]; then
  echo "making the input: 60 s testsrc2 1280x720@30, x264 veryfast 4 Mbit/s, 2 s GOP, AAC"
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=1280x720:rate=30 \
    -f lavfi -i sine=frequency=440:sample_rate=48000 -t 60 \
    -c:v libx264 -preset veryfast -b:v 4M -maxrate 4M -bufsize 8M -g 60 -pix_fmt yuv420p \
    -c:a aac -b:a 128k -f flv "$INPUT"
fi

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$OUT/nginx.pid" ] && kill "$(cat "$OUT/nginx.pid")" 2>/dev/null || true
}
trap cleanup EXIT

DATA=$(mktemp -d)
"$BIN" --data-dir "$DATA" --webserverip 127.0.0.1 --webserverport $WEB_PORT --rtmpport $RTMP_PORT \
  --adminpassword $PW --streamkey $KEY --log-level warn 2>"$OUT/castd.log" &
CASTD=$!
PIDS+=("$CASTD")
BASE=http://127.0.0.1:$WEB_PORT
for _ in $(seq 50); do curl -sf "$BASE/api/status" >/dev/null && break; sleep 0.2; done
setc() { curl -sf -u admin:$PW -H 'content-type: application/json' -d "{\"value\":$2}" "$BASE/api/admin/config/$1" >/dev/null; }
setc video/streamoutputvariants '[{"name":"source","videoPassthrough":true,"audioPassthrough":true}]'
setc video/streamlatencylevel 4

ffmpeg -hide_banner -loglevel error -re -stream_loop -1 -i "$INPUT" -c copy -f flv \
  "rtmp://127.0.0.1:$RTMP_PORT/live/$KEY" &
PUBLISHER=$!
PIDS+=("$PUBLISHER")
for _ in $(seq 120); do
  n=$(curl -sf "$BASE/hls/0/stream.m3u8" 2>/dev/null | grep -c '\.ts$' || true)
  [ "${n:-0}" -ge 2 ] && break
  sleep 0.5
done
if [ "${CHANNEL:-0}" = 1 ]; then
  curl -sf -u admin:$PW -H 'content-type: application/json' \
    -d '{"slug":"bench","name":"Bench","adminPassword":"bench-channel-pw"}' "$BASE/api/admin/channels/create" >/dev/null
  setch() { curl -sf -u admin:$PW -H 'content-type: application/json' -d "{\"value\":$2}" "$BASE/c/bench/api/admin/config/$1" >/dev/null; }
  setch video/streamoutputvariants '[{"name":"source","videoPassthrough":true,"audioPassthrough":true}]'
  setch video/streamlatencylevel 4
  setch streamkeys '[{"key":"bench-channel-key","comment":"bench"}]'
  ffmpeg -hide_banner -loglevel error -re -stream_loop -1 -i "$INPUT" -c copy -f flv \
    "rtmp://127.0.0.1:$RTMP_PORT/live/bench-channel-key" &
  PIDS+=("$!")
  for _ in $(seq 120); do
    n=$(curl -sf "$BASE/c/bench/hls/0/stream.m3u8" 2>/dev/null | grep -c '\.ts$' || true)
    [ "${n:-0}" -ge 2 ] && break
    sleep 0.5
  done
  [ "${n:-0}" -ge 2 ] || { echo "the channel did not go live" >&2; exit 1; }
fi
if [ "${ENDED:-0}" = 1 ]; then
  # After the stream: castd serves the finished playlist (with ENDLIST) and its segments from disk.
  sleep 4
  kill "$PUBLISHER"
  for _ in $(seq 60); do
    curl -sf "$BASE/hls/0/stream.m3u8" | grep -q EXT-X-ENDLIST && break
    sleep 0.5
  done
  curl -sf "$BASE/hls/0/stream.m3u8" | grep -q EXT-X-ENDLIST || { echo "the stream did not end" >&2; exit 1; }
  echo "the stream has ended: castd serves its files from disk"
fi

if [ "${PRIVATE:-0}" = 1 ]; then
  curl -sf -u admin:$PW -H 'content-type: application/json' -d '{"password":"bench-viewer-pw","comment":"bench"}' \
    "$BASE/api/admin/viewer/passwords/create" >/dev/null
  setc visibility '"password"'
  PASS=$(curl -sf -H 'content-type: application/json' -d '{"password":"bench-viewer-pw"}' "$BASE/api/viewer/unlock" |
    sed -E 's/.*"pass":"([^"]+)".*/\1/')
  [ -n "$PASS" ] || { echo "no viewing pass" >&2; exit 1; }
  # Without the pass the playlist is refused (the gate is on).
  code=$(curl -s -o /dev/null -w '%{http_code}' "$BASE/hls/0/stream.m3u8")
  [ "$code" = 401 ] || { echo "a private playlist answered $code without a pass" >&2; exit 1; }
  setc visibility '"public"'
fi

mkdir -p "$OUT/www/hls/0"
cat >"$OUT/nginx.conf" <<EOF
worker_processes auto;
pid $OUT/nginx.pid;
error_log $OUT/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  types { application/x-mpegURL m3u8; video/mp2t ts; }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    root $OUT/www;
    location /hls/ { add_header Cache-Control "no-cache"; }
  }
}
EOF
nginx -c "$OUT/nginx.conf" -p "$OUT"

cpu_ticks() { # utime+stime of the processes given, in clock ticks
  local t=0
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] && t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo $t
}
nginx_pids() { pgrep -f "nginx: worker process" | tr '\n' ' '; }
HZ=$(getconf CLK_TCK)

# wrk against URL with C connections; prints "req/s p50 p99 bytes/s cpu-ms-per-1000-requests wrk-cpu%"
# (wrk's own CPU, 100% = one core: a case where wrk is near 100% for both servers is bound by the load
# generator, not by the server).
measure() {
  local url=$1 conns=$2 pids=$3 header=${4:-X-Bench: 1} before after out rps p50 p99 bps reqs wrkcpu
  local TIMEFORMAT='wrk-cpu %U %S %R'
  before=$(cpu_ticks $pids)
  out=$( { time wrk -t"${WRK_THREADS:-1}" -c"$conns" -d"${DUR}s" --timeout 10s --latency -H "$header" "$url"; } 2>&1 )
  after=$(cpu_ticks $pids)
  bad=$(echo "$out" | awk '/Non-2xx or 3xx responses/ {print $NF}')
  errs=$(echo "$out" | awk '/Socket errors/ {print}')
  if [ -n "$bad" ] || [ -n "$errs" ]; then
    echo "$url: ${bad:-0} non-2xx answers ${errs}" >&2
    exit 1
  fi
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  bps=$(echo "$out" | awk '/Transfer\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1=="50%" {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  reqs=$(echo "$out" | awk '/requests in/ {print $1}')
  local cpu_ms=$(( (after - before) * 1000 / HZ ))
  local per1k
  per1k=$(awk -v c="$cpu_ms" -v r="$reqs" 'BEGIN { printf "%.1f", (r > 0 ? c * 1000 / r : 0) }')
  wrkcpu=$(echo "$out" | awk '/^wrk-cpu/ { printf "%.0f", ($4 > 0 ? ($2 + $3) * 100 / $4 : 0) }')
  echo "$rps $p50 $p99 $bps $per1k $wrkcpu"
}

# The median of each column over several "rps p50 p99 bytes/s cpu wrk-cpu" lines (wrk's units normalised:
# latencies in ms, bytes/s in MB).
medians() {
  printf '%s\n' "$@" | awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    function mb(v) { if (v ~ /GB$/) return v * 1024; if (v ~ /MB$/) return v + 0; if (v ~ /KB$/) return v / 1024; return v / 1048576 }
    { n++; r[n] = $1; a[n] = ms($2); b[n] = ms($3); c[n] = mb($4); d[n] = $5; e[n] = $6 }
    function med(x,   i, j, t, y) { for (i = 1; i <= n; i++) y[i] = x[i]
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (y[j] < y[i]) { t = y[i]; y[i] = y[j]; y[j] = t }
      return y[int((n + 1) / 2)] }
    END { printf "%.0f %.2fms %.2fms %.0fMB %.1f %.0f%%\n", med(r), med(a), med(b), med(c), med(d), med(e) }'
}

printf '%-9s %-6s %-11s %12s %9s %9s %11s %14s %8s\n' target conns server req/s p50 p99 bytes/s cpu-ms/1k-req wrk-cpu
for conns in ${CONNS:-64 512}; do
  for target in ${TARGETS:-segment playlist}; do
    c_runs=(); n_runs=(); p_runs=(); q_runs=(); ch_runs=()
    for _ in $(seq "$ROUNDS"); do
      # the newest segment of the live window (picked anew each round, so it is still in the window
      # when castd is measured), and the same bytes for nginx
      playlist=$(curl -sf "$BASE/hls/0/stream.m3u8")
      # (after the end, the one before the last: the last segment is cut short by the end)
      if [ "${ENDED:-0}" = 1 ]; then
        seg=$(echo "$playlist" | grep '\.ts$' | tail -n 2 | head -n 1)
      else
        seg=$(echo "$playlist" | grep '\.ts$' | tail -n 1)
      fi
      curl -sf "$BASE/hls/0/$seg" -o "$OUT/www/hls/0/$seg"
      echo "$playlist" >"$OUT/www/hls/0/stream.m3u8"
      if [ "$target" = segment ]; then path=/hls/0/$seg; else path=/hls/0/stream.m3u8; fi
      size=$(stat -c %s "$OUT/www$path")
      c_runs+=("$(measure "$BASE$path" "$conns" "$CASTD")")
      n_runs+=("$(measure "http://127.0.0.1:$NGINX_PORT$path" "$conns" "$(nginx_pids)")")
      if [ "${CHANNEL:-0}" = 1 ]; then
        chlist=$(curl -sf "$BASE/c/bench/hls/0/stream.m3u8")
        if [ "$target" = segment ]; then chpath=/c/bench/hls/0/$(echo "$chlist" | grep '\.ts$' | tail -n 1); else chpath=/c/bench/hls/0/stream.m3u8; fi
        ch_runs+=("$(measure "$BASE$chpath" "$conns" "$CASTD")")
      fi
      if [ "${PRIVATE:-0}" = 1 ]; then
        setc visibility '"password"'
        p_runs+=("$(measure "$BASE$path" "$conns" "$CASTD" "Cookie: castd_pass=$PASS")")
        if [ "$target" = playlist ]; then q_runs+=("$(measure "$BASE$path?pass=$PASS" "$conns" "$CASTD")"); fi
        setc visibility '"public"'
      fi
    done
    read -r c_rps c_p50 c_p99 c_bps c_cpu c_wrk <<<"$(medians "${c_runs[@]}")"
    read -r n_rps n_p50 n_p99 n_bps n_cpu n_wrk <<<"$(medians "${n_runs[@]}")"
    printf '%-9s %-6s %-11s %12s %9s %9s %11s %14s %8s\n' "$target" "$conns" castd "$c_rps" "$c_p50" "$c_p99" "$c_bps" "$c_cpu" "$c_wrk"
    printf '%-9s %-6s %-11s %12s %9s %9s %11s %14s %8s\n' "($size B)" "$conns" nginx "$n_rps" "$n_p50" "$n_p99" "$n_bps" "$n_cpu" "$n_wrk"
    awk -v a="$c_rps" -v b="$n_rps" 'BEGIN { if (b > 0) printf "          castd/nginx requests/s: %.2fx\n", a / b }'
    if [ ${#ch_runs[@]} -gt 0 ]; then
      read -r h_rps h_p50 h_p99 h_bps h_cpu h_wrk <<<"$(medians "${ch_runs[@]}")"
      printf '%-9s %-6s %-11s %12s %9s %9s %11s %14s %8s\n' "" "$conns" castd-channel "$h_rps" "$h_p50" "$h_p99" "$h_bps" "$h_cpu" "$h_wrk"
      awk -v a="$h_rps" -v b="$c_rps" 'BEGIN { if (b > 0) printf "          channel/default channel requests/s: %.2fx\n", a / b }'
    fi
    if [ ${#p_runs[@]} -gt 0 ]; then
      read -r p_rps p_p50 p_p99 p_bps p_cpu p_wrk <<<"$(medians "${p_runs[@]}")"
      printf '%-9s %-6s %-11s %12s %9s %9s %11s %14s %8s\n' "" "$conns" castd-pass "$p_rps" "$p_p50" "$p_p99" "$p_bps" "$p_cpu" "$p_wrk"
      awk -v a="$p_rps" -v b="$c_rps" 'BEGIN { if (b > 0) printf "          private (cookie pass)/public requests/s: %.2fx\n", a / b }'
    fi
    if [ ${#q_runs[@]} -gt 0 ]; then
      read -r q_rps q_p50 q_p99 q_bps q_cpu q_wrk <<<"$(medians "${q_runs[@]}")"
      printf '%-9s %-6s %-11s %12s %9s %9s %11s %14s %8s\n' "" "$conns" castd-query "$q_rps" "$q_p50" "$q_p99" "$q_bps" "$q_cpu" "$q_wrk"
      awk -v a="$q_rps" -v b="$c_rps" 'BEGIN { if (b > 0) printf "          private (?pass= playlist, rewritten)/public requests/s: %.2fx\n", a / b }'
    fi
  done
done
rm -rf "$DATA"
