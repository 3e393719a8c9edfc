#!/usr/bin/env bash
# N concurrent WHEP (WebRTC) viewers of castd: castd CPU per viewer, frames delivered per viewer, RSS per viewer
# (bench/webrtc/run.mjs: headless chromium holds N recvonly peer connections with real DTLS and SRTP and counts the
# frames it depacketises).
# Usage: bench/webrtc/run.sh [SECONDS] [COUNTS]   (default 20 s, N = 10,50,100)
# CASTD_BIN picks the binary (default: the perf profile, built here). Output: bench/out/webrtc (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=$ROOT/bench/out/webrtc
mkdir -p "$OUT"
for tool in ffmpeg node; do command -v "$tool" >/dev/null || { echo "missing $tool (packaging/deps.sh)" >&2; exit 1; }; done
if [ -z "${CASTD_BIN:-}" ]; then
  (cd web && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; } && npm run build >/dev/null)
  cargo build --profile perf --quiet
  CASTD_BIN=$ROOT/target/perf/castd
fi
export CASTD_BIN
(cd tests/web && { [ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund --loglevel=error >/dev/null; })
node bench/webrtc/run.mjs "${1:-20}" "${2:-10,50,100}" | tee "$OUT/webrtc.txt"
