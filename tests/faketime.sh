#!/usr/bin/env bash
# The unit tests on other days: castd's and hwaccel's cargo unit tests (the schedule's RRULE and ICS code and the
# replay budget among them) and the web unit tests (vitest), each run under Debian's libfaketime at dates that
# catch what depends on the calendar, the time of day or the time zone: a new year, the end of February, a leap
# day, both of Europe/Berlin's daylight-saving switches, and the last second of a year.
#   tests/faketime.sh            every date below (make test runs this)
#   tests/faketime.sh 2          only the third date (an index into DATES)
# Each date is "EPOCH TZ LABEL". The clock starts at that instant and runs (FAKETIME=+offset); monotonic clocks are
# left alone (FAKETIME_DONT_FAKE_MONOTONIC=1), so timers and Instants behave. The two Berlin dates are given in
# UTC: 00:59:50 UTC is 10 s before each switch (01:59:50 CET on 2027-03-28, 02:59:50 CEST on 2027-10-31), so the
# tests run across the switch; an epoch and an offset also sidestep October's repeated local hour. Before the tests, each date
# checks that the fake took effect inside both a C program (`date`) and Node. The dates run three at a time (the
# unit tests mostly wait), which keeps the whole step under two minutes on a 2-core box once things are built.
# Output of each run is in target/faketime/<label>.log; a failing date is named at the end and the script fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

DATES=(
  "1798761630 UTC 2027-01-01T00:00:30Z"
  "1803859190 UTC 2027-02-28T23:59:50Z"
  "1835438400 UTC 2028-02-29T12:00:00Z"
  "1806195590 Europe/Berlin 2027-03-28T00:59:50Z-Berlin"
  "1824944390 Europe/Berlin 2027-10-31T00:59:50Z-Berlin"
  "1798761599 UTC 2026-12-31T23:59:59Z"
)
if [ $# -gt 0 ]; then DATES=("${DATES[$1]}"); fi

lib=$(ls /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 /usr/lib/*/faketime/libfaketimeMT.so.1 2>/dev/null | head -n1 || true)
if [ -z "$lib" ]; then
  echo "faketime: libfaketime is missing (packaging/deps.sh installs Debian's faketime)" >&2
  exit 1
fi

# Build the unit test binaries once and list them (cargo prints each executable as JSON).
echo "faketime: building the unit tests"
mapfile -t bins < <(cargo test --locked --workspace --lib --bins --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        print(m["executable"])
')
if [ ${#bins[@]} -eq 0 ]; then
  echo "faketime: no unit test binary was built" >&2
  exit 1
fi
[ -d web/node_modules ] || (cd web && npm ci --no-audit --no-fund)

out=target/faketime
mkdir -p "$out"
rm -f "$out"/*.rc

# `one EPOCH TZ LABEL`: the sanity checks, then every unit test binary, then vitest, all under the fake clock.
one() {
  local epoch=$1 tz=$2 label=$3 log="$out/$3.log"
  (
    set +e
    # An offset from the real clock (seconds), not an absolute date: libfaketime reads an absolute one in the
    # local time zone, which is an hour off near a daylight-saving switch. The offset runs with the clock.
    export TZ="$tz" LD_PRELOAD="$lib" FAKETIME="+$((epoch - $(date +%s)))" FAKETIME_DONT_FAKE_MONOTONIC=1
    # The fake must show inside the processes: within a minute after the start (the clock runs).
    local c n
    c=$(date -u +%s)
    n=$(node -e 'console.log(Math.floor(Date.now() / 1000))')
    if [ $((c - epoch)) -lt 0 ] || [ $((c - epoch)) -gt 60 ] || [ $((n - epoch)) -lt 0 ] || [ $((n - epoch)) -gt 60 ]; then
      echo "faketime: the fake clock did not take effect (want $epoch, date says $c, node says $n)"
      exit 1
    fi
    echo "faketime $label: date says $(date '+%F %T %Z'), node says $(node -e 'console.log(new Date().toString())')"
    rc=0
    for b in "${bins[@]}"; do
      "$b" --test-threads=2 -q || rc=1
    done
    (cd web && npx vitest run --reporter=dot) || rc=1
    exit $rc
  ) >"$log" 2>&1
  echo $? >"$out/$label.rc"
}

start=$(date +%s)
running=0
for d in "${DATES[@]}"; do
  read -r epoch tz label <<<"$d"
  one "$epoch" "$tz" "$label" &
  running=$((running + 1))
  if [ "$running" -ge 3 ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

failed=()
for d in "${DATES[@]}"; do
  read -r _ _ label <<<"$d"
  rc=$(cat "$out/$label.rc" 2>/dev/null || echo 1)
  if [ "$rc" = 0 ]; then
    echo "faketime: $label passed ($(grep -c '^test result: ok' "$out/$label.log") cargo binaries, vitest ok)"
  else
    failed+=("$label")
    echo "faketime: $label FAILED; its log ($out/$label.log):" >&2
    grep -E 'FAILED|panicked|failed|Error|✗|×|did not take effect' "$out/$label.log" | head -40 >&2 || true
  fi
done
echo "faketime: ${#DATES[@]} dates in $(($(date +%s) - start)) s"
[ ${#failed[@]} -eq 0 ] || {
  echo "faketime: failed at ${failed[*]}" >&2
  exit 1
}
