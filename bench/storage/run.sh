#!/usr/bin/env bash
# Object storage benchmark: castd's uploader (the real `castd::storage` module, bench/storage/bench.rs)
# against s3s-fs (SigV4-checking S3 server; packaging/deps.sh installs it) on loopback. A synthetic
# muxer writes a 4-variant ladder (1080p/720p/480p/360p, 11.4 Mbit/s) at MULTIPLIER x its bitrate in
# real time; prints needed vs uploaded throughput and segment-ready-to-object-visible p50/p99.
# Usage: bench/storage/run.sh [SECONDS] [MULTIPLIER] [SEGMENT_SECS]   (default: 60 10 2)
#        PROFILE=dev bench/storage/run.sh ...   uses the debug build (default: the perf profile)
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS="${1:-60}"; MULT="${2:-10}"; SEG="${3:-2}"
command -v s3s-fs >/dev/null || { echo "s3s-fs missing: run packaging/deps.sh" >&2; exit 1; }
PROFILE="${PROFILE:-perf}"
cargo build --profile "$PROFILE" --example storage-bench >&2
dir=target/$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
root=$(mktemp -d); mkdir -p "$root/castd"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
s3s-fs --host 127.0.0.1 --port "$port" --access-key benchaccess --secret-key bench-secret-0123456789 "$root" >/dev/null 2>&1 &
s3pid=$!
trap 'kill $s3pid 2>/dev/null; wait $s3pid 2>/dev/null; rm -rf "$root"' EXIT
for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
echo "profile: $PROFILE; machine: $(nproc) cores, $(awk '/MemTotal/{print int($2/1024)" MiB"}' /proc/meminfo); s3s-fs $(s3s-fs --version | awk '{print $2}') on loopback, folder on $(df -T "$root" | awk 'NR==2{print $2}')"
"$dir/examples/storage-bench" --endpoint "http://127.0.0.1:$port" --access-key benchaccess \
  --secret bench-secret-0123456789 --seconds "$SECS" --multiplier "$MULT" --segment-secs "$SEG"
echo "objects left in the bucket: $(find "$root/castd" -type f | wc -l) (window 10 x 4 variants + grace + 5 playlists)"
