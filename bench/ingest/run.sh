#!/usr/bin/env bash
# Ingest side by side (issue 29): RTMP, SRT and WHIP publish the same source with the same ladder (one encoded 360p
# variant, classic HLS); for each, publish -> first playable HLS playlist and castd's own CPU while ingesting (the
# castd process only: the transcode worker is a child process and is not counted), against an idle castd.
# RTMP and SRT: ffmpeg (x264 veryfast, 2 s keyframes, 1.5 Mb/s, AAC) reading the source files in real time; WHIP:
# Debian's chromium whose fake camera and microphone read the same files (its own H.264 encoder and Opus).
# Usage: bench/ingest/run.sh [SECONDS] [RUNS]   (default 20 s of measurement, 3 runs per protocol)
# CASTD_BIN picks the binary (default: the perf profile, built here). Output: bench/out/ingest (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=$ROOT/bench/out/ingest
SECS=${1:-20}
RUNS=${2:-3}
mkdir -p "$OUT"
for tool in ffmpeg node; do command -v "$tool" >/dev/null || { echo "missing $tool (packaging/deps.sh)" >&2; exit 1; }; done
if [ -z "${CASTD_BIN:-}" ]; then
  (cd web && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; } && npm run build >/dev/null)
  cargo build --profile perf --quiet
  CASTD_BIN=$ROOT/target/perf/castd
fi
export CASTD_BIN
(cd tests/web && { [ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund --loglevel=error >/dev/null; })
# The source: 6 s of a 640x360 30 fps test pattern (raw y4m, which chromium's fake camera loops) and a 440 Hz tone.
if [ ! -s "$OUT/source.y4m" ]; then
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=640x360:rate=30 -t 6 -pix_fmt yuv420p "$OUT/source.y4m"
  ffmpeg -hide_banner -loglevel error -y -f lavfi -i sine=frequency=440:sample_rate=48000 -t 6 -ac 2 "$OUT/source.wav"
fi
echo "== ingest: publish -> first playable playlist, castd CPU while ingesting ($SECS s, $RUNS runs each; $CASTD_BIN)"
node bench/ingest/run.mjs "$OUT" "$SECS" "$RUNS" | tee "$OUT/ingest.txt"
