#!/usr/bin/env bash
# `make test`'s cargo tests in two concurrent lanes. Most integration test files spend their time waiting on
# real time (an ffmpeg `-re` publish, a two-minute retention window, a Redis outage), so one file after another
# leaves the CPU half idle: two `cargo test` processes, each with its own half of the test files (balanced by
# the seconds each file took in a CI run, WEIGHTS below; a new file counts DEFAULT_WEIGHT), cut the wall time
# about in half. Each lane runs its files one at a time with two test threads, as `cargo test` did alone.
# Cargo holds its build lock only while building, so the lanes run side by side once `cargo build` is done.
#   tests/cargo-lanes.sh            every test of the workspace (unit, integration, doc)
# Each lane's output is prefixed with [lane N] and kept in target/lanes/laneN.log; a failing lane's failures
# are printed again at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

declare -A WEIGHTS=(
  [srt]=141 [retention]=127 [cluster]=106 [obs]=61 [live]=59 [schedule]=55 [simulcast]=51 [replays]=51
  [storage]=42 [integrations]=28 [crash]=26 [chat]=24 [schedule_federation]=24 [federation]=23 [foundation]=22
  [flapping]=21 [hwaccel]=19 [whip]=16 [dropin]=16 [llhls]=14 [fulldisk]=12 [metrics]=9 [behaviours]=8
  [import_owncast]=8 [worker]=6 [gpu_health]=3 [indieauth]=6 [systemd_notify]=5 [whep]=5
)
DEFAULT_WEIGHT=15
# Files that load both cores on purpose (a ladder the box cannot keep up with): run alone after the lanes, so
# neither they nor the other lane's timing is disturbed.
SOLO=(capacity)

# The test files, heaviest first, dealt to the lighter lane. Lane 0 also runs the unit and doc tests.
mapfile -t files < <(for f in tests/*.rs; do
  n=$(basename "$f" .rs)
  [[ " ${SOLO[*]} " == *" $n "* ]] || echo "${WEIGHTS[$n]:-$DEFAULT_WEIGHT} $n"
done | sort -rn)
load=(5 0)
lane0=(--lib --bins)
lane1=()
for entry in "${files[@]}"; do
  w=${entry%% *}
  n=${entry#* }
  if [ "${load[0]}" -le "${load[1]}" ]; then
    lane0+=(--test "$n"); load[0]=$((load[0] + w))
  else
    lane1+=(--test "$n"); load[1]=$((load[1] + w))
  fi
done

out=target/lanes
mkdir -p "$out"
run_lane() {
  local n=$1
  shift
  {
    set +e
    cargo test --locked --no-fail-fast -p castd "$@" -- --test-threads=2
    echo $? >"$out/lane$n.rc"
  } 2>&1 | tee "$out/lane$n.log" | sed -u "s/^/[lane $n] /"
}

echo "cargo-lanes: lane 0 (~${load[0]} s): ${lane0[*]}"
echo "cargo-lanes: lane 1 (~${load[1]} s): ${lane1[*]}"
start=$(date +%s)
rm -f "$out"/lane*.rc
run_lane 0 "${lane0[@]}" &
pid0=$!
run_lane 1 "${lane1[@]}" &
pid1=$!
wait "$pid0" "$pid1" || true

# The solo files, then the rest of the workspace (the hwaccel crate) and the doc tests: after the lanes.
rest=0
for n in "${SOLO[@]}"; do
  cargo test --locked -p castd --test "$n" -- --test-threads=1 || rest=$?
done
cargo test --locked --workspace --exclude castd -- --test-threads=2 || rest=$?
cargo test --locked -p castd --doc -- --test-threads=2 || rest=$?

failed=0
for n in 0 1; do
  rc=$(cat "$out/lane$n.rc" 2>/dev/null || echo 1)
  if [ "$rc" != 0 ]; then
    failed=1
    echo "cargo-lanes: lane $n FAILED (exit $rc); its failures:" >&2
    sed -n '/^failures:$/,/^test result: FAILED/p' "$out/lane$n.log" >&2 || true
    grep -E '^error: test failed' "$out/lane$n.log" >&2 || true
  fi
done
echo "cargo-lanes: both lanes done in $(($(date +%s) - start)) s"
[ "$failed" = 0 ] && [ "$rest" = 0 ]
