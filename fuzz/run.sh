#!/bin/sh
# Coverage-guided fuzzing of castd's parsers with libFuzzer on the stable toolchain (see fuzz/Cargo.toml).
# Builds the targets with SanitizerCoverage into target/fuzz/, then runs each one for CASTD_FUZZ_SECS
# seconds (default 60) from the committed seeds (tests/fuzz/corpus/<target>/) and crash regressions
# (tests/fuzz/regressions/<target>/), with the target's dictionary (tests/fuzz/dict/<target>.dict).
# What it finds that is new goes to target/fuzz/corpus/<target>/ (not committed); a crash stops the
# run with a non-zero status and is saved under target/fuzz/crashes/<target>/: add it to
# tests/fuzz/regressions/<target>/ once fixed (cargo test replays those on every run).
#   fuzz/run.sh                 every target
#   fuzz/run.sh rtmp chat       only these
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
secs=${CASTD_FUZZ_SECS:-60}
targets=${*:-rtmp chat cmcd setters ts srt}
triple=$(rustc -vV | sed -n 's/^host: //p')
export CARGO_TARGET_DIR="$root/target/fuzz"

# As cargo-fuzz instruments (without its nightly-only sanitizer flags). `--target` keeps the flags
# off build scripts and proc macros, which must not need libFuzzer's runtime.
RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing" \
  cargo build --manifest-path "$here/Cargo.toml" --release --locked --target "$triple" --bins

for t in $targets; do
  bin="$CARGO_TARGET_DIR/$triple/release/$t"
  [ -x "$bin" ] || { echo "fuzz: no target named $t" >&2; exit 2; }
  work="$CARGO_TARGET_DIR/corpus/$t"
  crashes="$CARGO_TARGET_DIR/crashes/$t"
  mkdir -p "$work" "$crashes"
  dirs="$work $root/tests/fuzz/corpus/$t"
  [ -d "$root/tests/fuzz/regressions/$t" ] && dirs="$dirs $root/tests/fuzz/regressions/$t"
  log="$CARGO_TARGET_DIR/$t.log"
  # shellcheck disable=SC2086
  if ! "$bin" -max_total_time="$secs" -dict="$root/tests/fuzz/dict/$t.dict" -max_len=65536 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$crashes/" -print_final_stats=1 $dirs >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz $t: FAILED; the input is under $crashes (copy it to tests/fuzz/regressions/$t/ once fixed)" >&2
    exit 1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(grep -E '^#[0-9]+.*(DONE|INITED)' "$log" | tail -n 1 | sed -n 's/.*cov: \([0-9]*\).*ft: \([0-9]*\).*corp: \([0-9]*\).*/\1 edges, \2 features, \3 inputs/p')
  echo "fuzz $t: $execs executions in $secs s ($speed/s), coverage $cov"
done
