#!/usr/bin/env bash
# Runs schemathesis (every check, `-c all`) against a live castd built at target/debug/castd over every
# operation of /api/openapi.json (in two passes, see REVOKING below) except those that would break the run itself (they change the admin password
# or what castd listens on) and the chat websocket `/ws` (a handshake OpenAPI cannot describe; tests/chat.rs and
# the chat fuzz target cover it). Fails on any failure.
#
# Every security scheme of the document but one gets a real credential (tests/schemathesis/schemathesis.toml): the
# admin's password, an access token with every scope (the integrations routes), a chat user's token and a
# moderator's token, made through castd's own API before the run; so authenticated operations are exercised,
# not only refused. The one scheme without its own credential is `viewerPass`, a private channel's viewing
# pass: every way out of a channel (playlists, segments, replays, clips, config, status, chat history...) also
# takes the channel admin's Basic credentials (the document lists both as alternatives), and the run sends
# those, so the ways out stay exercised once a generated request makes the default channel private. A pass
# would not last the run: it ends when the fuzzer deletes its password, rotates the channel's key or
# changes the visibility. No operation is left that only a credential the run cannot hold would open.
#
# Reproducible: with a fixed SCHEMATHESIS_SEED (default 1) the same cases run in the same order on every
# machine: schemathesis and its dependencies are pinned (tests/schemathesis/requirements.txt), generation is
# deterministic (which also means no example database carries cases from one run to the next), and one worker runs the
# operations in document order. SCHEMATHESIS_SEED=random draws a seed (printed, to reproduce a finding)
# for exploring. SCHEMATHESIS_EXAMPLES examples per operation (default 8). Per-operation allowances for
# refusals a schema cannot express are in tests/schemathesis/schemathesis.toml, each with its reason.
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
"$BIN" --data-dir "$DIR/data" --webserverip 127.0.0.1 --webserverport 0 --rtmpport 0 --srtport 0 --webrtc-udp-port 0 --log-level info \
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
PY="$(dirname "$ST")/python"
# POST JSON $2 to castd's path $1 (as the admin when $4 is "admin"); print the response's fields named in $3
# (space-separated), on one line.
post() {
  local auth=()
  [ "${4:-}" = admin ] && auth=(-u "admin:$PW")
  curl -sS --fail-with-body "${auth[@]}" -H 'Content-Type: application/json' -d "$2" "$BASE$1" |
    "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(*(d[k] for k in sys.argv[1].split()))' "$3"
}
export CASTD_ADMIN_PASSWORD="$PW"
CASTD_ACCESS_TOKEN="$(post /api/admin/accesstokens/create \
  '{"name":"schemathesis","scopes":["CAN_SEND_MESSAGES","CAN_SEND_SYSTEM_MESSAGES","HAS_ADMIN_ACCESS"]}' \
  accessToken admin)"
CASTD_CHAT_TOKEN="$(post /api/chat/register '{"displayName":"schemathesis-user"}' accessToken)"
read -r MODERATOR_ID CASTD_MODERATOR_TOKEN < <(post /api/chat/register '{"displayName":"schemathesis-mod"}' 'id accessToken')
post /api/admin/chat/users/setmoderator "{\"userId\":\"$MODERATOR_ID\",\"isModerator\":true}" success admin >/dev/null
export CASTD_ACCESS_TOKEN CASTD_CHAT_TOKEN CASTD_MODERATOR_TOKEN
echo "schemathesis: credentials for every scheme: admin, an access token with every scope, chat user and moderator $MODERATOR_ID"
SEED="${SCHEMATHESIS_SEED:-1}"
if [ "$SEED" = random ]; then
  SEED=$(( $(od -An -N4 -tu4 /dev/urandom) ))
  echo "schemathesis: random seed $SEED (SCHEMATHESIS_SEED=$SEED reproduces this run)"
fi
# The operations that can take a credential away (disable, demote or delete a chat user, ban an address, delete
# an access token) learn the run's own users and tokens from list responses; run in the same pass, they revoke
# them early and every later authenticated operation sees only 401. So they run in a second pass, after
# everything else has been exercised with valid credentials.
# (One regular expression per filter: schemathesis keeps only the last of repeated --exclude-path-regex.)
REVOKING='/api/(admin/(chat/users/(setenabled|setmoderator|ipbans/create)|users/delete|accesstokens/delete)|chat/users/setenabled)'
EXCLUDED='/api/admin/config/(adminpass|webserverport|rtmpserverport|webserverip|rtmpserverbindaddress)|/ws'
START=$(date +%s)
RC=0
for pass in main revoking; do
  if [ "$pass" = main ]; then
    filter=(--exclude-path-regex "^($EXCLUDED|$REVOKING)\$")
  else
    filter=(--include-path-regex "^($REVOKING)\$")
  fi
  echo "schemathesis: $pass pass"
  set +e
  "$ST" --config-file tests/schemathesis/schemathesis.toml run "$BASE/api/openapi.json" \
    --checks all --max-examples "${SCHEMATHESIS_EXAMPLES:-8}" --seed "$SEED" \
    --generation-deterministic --workers 1 "${filter[@]}" --output-truncate true "$@"
  rc=$?
  set -e
  [ "$rc" -eq 0 ] || RC=$rc
done
echo "schemathesis: exit $RC after $(( $(date +%s) - START )) s"
if ! kill -0 "$PID" 2>/dev/null; then
  echo "castd died during the run:" >&2
  tail -50 "$LOG" >&2
  exit 1
fi
exit $RC
