#!/usr/bin/env bash
# GPU decode and scaling without NVENC, proven on a real GPU (issue 43).
#
#   bench/gpu/run.sh bench [SECONDS]   on a box with an NVIDIA GPU: prints `castd encoders`, the NVML sample
#                                      as castd reports it (`castd gpus`), then castd's CPU-seconds for a
#                                      SECONDS (60) 1080p30 -> 720p+480p+360p ladder all on the CPU and with
#                                      NVDEC + scale_cuda (x264 encoding), at 1, 8 and 16 ladders at once, and
#                                      how many ladders run at real time each way; Debian's ffmpeg CLI doing
#                                      the same two ways beside it (8 at once). Each castd batch also prints
#                                      its CPU by thread (main: demux, decode, GPU calls, muxing; encode-N:
#                                      scaling and x264; the driver's threads by name), and "x264 alone"
#                                      (castd's x264 options on raw pictures made beforehand, at the same
#                                      counts) prints the most a GPU that cannot encode can save, beside what
#                                      castd's GPU path saves. Results also in $OUT (if set).
#
# A lent GPU machine (the device tool: bare, no Debian packages, a limited tree per call) gets castd and the
# libav closure it links (ldd, minus glibc) carried in two xz tarballs, since one call carries too little:
#   bench/gpu/run.sh pack              here: target/release/castd + ffmpeg/ffprobe + their libraries
#                                      -> .gpu/castd-{a,b}.tar.xz (ignored: .git/info/exclude gets /.gpu/)
#   bench/gpu/run.sh unpack .gpu/castd-a.tar.xz        there, first call   (carry .gpu/castd-a.tar.xz)
#   bench/gpu/run.sh unpack .gpu/castd-b.tar.xz && bench/gpu/run.sh bench    second call, within the
#                                      machine's warm window                (carry .gpu/castd-b.tar.xz)
# With FFMPEG9_WHL=<imageio_ffmpeg-0.8.1-…manylinux_2_28_x86_64.whl> (pip download imageio-ffmpeg==0.8.1: a
# static FFmpeg 9.0.2 with NVDEC, scale_cuda and x264), `pack` also makes .gpu/ffmpeg9.xz, carried and unpacked
# in a call of its own (`unpack .gpu/ffmpeg9.xz`); `bench` then runs its ladders beside Debian's ffmpeg.
# Unpacked, castd lives in /opt/castd (bin/, lib/); `bench` uses it when present, else castd and ffmpeg on
# PATH (target/release/castd first).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
PREFIX=/opt/castd

pack() {
  local bin=target/release/castd
  [ -x "$bin" ] || { echo "build it first: cargo build --release --bin castd" >&2; exit 1; }
  grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
  rm -rf .gpu && mkdir -p .gpu/stage/bin .gpu/stage/lib
  cp "$bin" /usr/bin/ffmpeg /usr/bin/ffprobe .gpu/stage/bin/
  strip .gpu/stage/bin/castd 2>/dev/null || true
  # Every library the three link, except glibc's own (the GPU machine has a newer glibc).
  ldd .gpu/stage/bin/castd /usr/bin/ffmpeg /usr/bin/ffprobe | awk '/=> \//{print $3}' | sort -u |
    grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64)\.so' |
    while read -r lib; do cp -L "$lib" .gpu/stage/lib/; done
  # Two tarballs of about equal size: the big libraries alternate between them.
  (cd .gpu/stage && find . -type f -printf '%s %p\n' | sort -rn | awk '{print $2}' >../files)
  awk 'NR % 2 == 1' .gpu/files >.gpu/files-a
  awk 'NR % 2 == 0' .gpu/files >.gpu/files-b
  for part in a b; do
    (cd .gpu/stage && tar -cf - -T ../files-$part | xz -T0 -9 >../castd-$part.tar.xz)
  done
  rm -rf .gpu/stage .gpu/files*
  if [ -n "${FFMPEG9_WHL:-}" ]; then
    python3 -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
name = next(n for n in z.namelist() if "/binaries/ffmpeg-" in n)
open(sys.argv[2], "wb").write(z.read(name))' "$FFMPEG9_WHL" .gpu/ffmpeg9
    xz -T0 -9 .gpu/ffmpeg9
  fi
  ls -la .gpu
}

unpack() {
  mkdir -p "$PREFIX"
  if [[ $1 == *ffmpeg9.xz ]]; then
    python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.open(sys.argv[1]).read())' "$1" "$PREFIX/ffmpeg9"
    chmod +x "$PREFIX/ffmpeg9"
    echo "unpacked $1: $("$PREFIX/ffmpeg9" -hide_banner -version | head -1)"
    return
  fi
  # Python's tarfile (a bare machine may lack xz).
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$1" "$PREFIX"
  echo "unpacked $1 into $PREFIX: $(find "$PREFIX" -type f | wc -l) files"
}

bench() {
  local seconds=${1:-60}
  local castd ffmpeg ffmpeg9="${FFMPEG9:-}" out=${OUT:-$ROOT/bench/out/gpu}
  mkdir -p "$out"
  local ld=""
  if [ -x "$PREFIX/bin/castd" ]; then
    # Only castd and ffmpeg get the carried libraries (python3 there has its own); the driver's libraries
    # (libcuda, libnvcuvid: NVDEC) come from the machine.
    ld=$PREFIX/lib
    for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu; do [ -d "$d" ] && ld=$ld:$d; done
    castd=$PREFIX/bin/castd ffmpeg=$PREFIX/bin/ffmpeg
    [ -x "$PREFIX/ffmpeg9" ] && ffmpeg9=$PREFIX/ffmpeg9
  else
    castd=$(command -v "$ROOT/target/release/castd" castd | head -1) ffmpeg=$(command -v ffmpeg)
  fi
  run() { if [ -n "$ld" ]; then LD_LIBRARY_PATH=$ld "$@"; else "$@"; fi; }
  echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
  echo "== castd $(run "$castd" --version 2>/dev/null || echo '?')"
  echo "== castd encoders"
  run "$castd" encoders | tee "$out/encoders.txt"
  echo "== castd gpus (the NVML sample as castd reports it)"
  run "$castd" gpus | tee "$out/gpus.json" || echo "castd gpus failed"
  local input=/tmp/castd-gpu-bench-1080p30.flv
  if [ ! -s "$input" ]; then
    echo "== making ${seconds} s of 1080p30 H.264 (testsrc2, x264 veryfast, 4.5 Mbit/s, keyframe every 2 s)"
    run "$ffmpeg" -hide_banner -loglevel error -f lavfi -i "testsrc2=size=1920x1080:rate=30" -t "$seconds" \
      -c:v libx264 -preset veryfast -b:v 4500k -g 60 -pix_fmt yuv420p -f flv -y "$input"
  fi
  echo "== keyframe alignment: every rung's segments start with a keyframe at the same instants (ffprobe)"
  python3 bench/gpu/ladders.py --castd "$castd" --input "$input" --seconds "$seconds" --ld-path "$ld" \
    --check-alignment "${ffmpeg%ffmpeg}ffprobe" | tee "$out/alignment.txt" || echo "ALIGNMENT FAILED"
  [ "${ALIGNMENT_ONLY:-0}" = 1 ] && return 0
  echo "== ladders (each line: one batch; the table at the end)"
  python3 bench/gpu/ladders.py --castd "$castd" --ffmpeg "$ffmpeg" --input "$input" --seconds "$seconds" --ld-path "$ld" \
    --counts "${COUNTS:-1,8,16}" --ffmpeg-counts "${FFMPEG_COUNTS:-8}" --json-out "$out/ladders.json" \
    ${ffmpeg9:+--ffmpeg-static "$ffmpeg9"} |
    tee "$out/ladders.txt"
  # While a GPU ladder runs, castd's own NVML reading shows the decoder at work.
  if [ "${NVML_UNDER_LOAD:-1}" = 1 ]; then
    echo "== castd gpus while 4 GPU ladders run"
    python3 bench/gpu/ladders.py --castd "$castd" --input "$input" --seconds "$seconds" --ld-path "$ld" --counts 4 --modes gpu \
      >/dev/null 2>&1 &
    sleep 8
    run "$castd" gpus | tee "$out/gpus-under-load.json" || true
    wait || true
  fi
}

case "${1:-bench}" in
  pack) pack ;;
  unpack) unpack "${2:?which tarball}" ;;
  bench) shift || true; bench "$@" ;;
  *) echo "usage: $0 pack | unpack TARBALL | bench [SECONDS]" >&2; exit 2 ;;
esac
