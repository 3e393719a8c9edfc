#!/usr/bin/env bash
# Federation fan-out benchmark (bench/federation/fanout.rs): time for castd to deliver one post (the
# go-live path: one signed Create per follower inbox through the persistent delivery queue) to
# 1,000 follower inboxes on a local receiver that verifies every signature, and the same with 100 of
# the 1,000 inboxes on a listener that never answers. Prints one JSON line per run plus a table.
#
# Usage: bench/federation/run.sh [FOLLOWERS] [DEAD]   (defaults 1000 and 100; builds the perf profile)
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-1000}
DEAD=${2:-100}
cargo build --profile perf --quiet --bin castd --example federation-fanout
BIN=target/perf/castd
EX=target/perf/examples/federation-fanout
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
A=$("$EX" "$BIN" "$N" 0)
echo "$A"
B=$("$EX" "$BIN" "$N" "$DEAD")
echo "$B"
python3 - "$A" "$B" <<'PY'
import json, sys
rows = [json.loads(a) for a in sys.argv[1:]]
print("| followers | never answer | delivered | duplicates | bad signatures | fan-out time | deliveries/s | RSS before | RSS after | peak RSS |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['followers']} | {r['dead']} | {r['delivered']} | {r['duplicates']} | {r['bad_signatures']} | {r['fanout_seconds']:.3f} s | {r['deliveries_per_second']} | {r['rss_before_mb']:.1f} MB | {r['rss_after_mb']:.1f} MB | {r['peak_rss_mb']:.1f} MB |")
PY
