#!/usr/bin/env bash
# Runs schemathesis (every check, `-c all`) against a live castd built at target/debug/castd, with the
# admin's credentials, over every operation of /api/openapi.json except those that would break the
# run itself (they change the admin password or what castd listens on) and the chat websocket `/ws`
# (a handshake OpenAPI cannot describe; tests/chat.rs and the chat fuzz target cover it). Fails on any
# failure.
#
# Bounded: SCHEMATHESIS_EXAMPLES examples per operation (default 8), a fixed seed (SCHEMATHESIS_SEED)
# so a failure reproduces, and 2 workers. Per-operation allowances for refusals a schema cannot express
# are in tests/schemathesis/schemathesis.toml, each with its reason.
set -euo pipefail
cd "$(dirname "$0")/../.."
ST="${SCHEMATHESIS:-/opt/castd-venv/bin/schemathesis}"
BIN="${CASTD_BIN:-target/debug/castd}"
if [ ! -x "$ST" ]; then
  echo "schemathesis: $ST is missing; run packaging/deps.sh" >&2
  exit 1
fi
DIR="$(mktemp -d)"
LOG="$DIR/castd.log"
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$DIR"
}
trap cleanup EXIT
"$BIN" --data-dir "$DIR/data" --webserverip 127.0.0.1 --webserverport 0 --rtmpport 0 --log-level info \
  >/dev/null 2>"$LOG" &
PID=$!
for _ in $(seq 1 300); do
  grep -q "castd is ready" "$LOG" 2>/dev/null && break
  sleep 0.1
done
PORT="$(sed -n 's#.*web server listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$LOG" | head -1)"
if [ -z "$PORT" ]; then
  echo "castd did not start:" >&2
  cat "$LOG" >&2
  exit 1
fi
if grep -q "documented schema does not parse" "$LOG"; then
  echo "a schema written in a route table does not parse:" >&2
  grep "documented schema does not parse" "$LOG" >&2
  exit 1
fi
PW="$(cat "$DIR/data/initial-admin-password")"
BASE="http://127.0.0.1:$PORT"
START=$(date +%s)
set +e
"$ST" --config-file tests/schemathesis/schemathesis.toml run "$BASE/api/openapi.json" \
  --checks all --auth "admin:$PW" \
  --max-examples "${SCHEMATHESIS_EXAMPLES:-8}" --seed "${SCHEMATHESIS_SEED:-1}" --workers 2 \
  --exclude-path-regex '^(/api/admin/config/(adminpass|webserverport|rtmpserverport|webserverip|rtmpserverbindaddress)|/ws)$' \
  --output-truncate true "$@"
RC=$?
set -e
echo "schemathesis: exit $RC after $(( $(date +%s) - START )) s"
if ! kill -0 "$PID" 2>/dev/null; then
  echo "castd died during the run:" >&2
  tail -50 "$LOG" >&2
  exit 1
fi
exit $RC
