#!/usr/bin/env bash
# Generates web/src/api.gen.ts, the TypeScript types of castd's HTTP API, from the OpenAPI document that
# `castd openapi` prints (the one castd serves at /api/openapi.json), with openapi-typescript (pinned in
# web/package-lock.json). web/src/api.ts names the types the UI uses after its schemas.
#
#   web/scripts/gen-api.sh           write web/src/api.gen.ts
#   web/scripts/gen-api.sh --check   fail when the committed web/src/api.gen.ts differs from a fresh generation
#                                    (`make lint` runs this)
#
# castd is target/debug/castd, built first (`cargo build --bin castd`, nothing to do when it is up to date) so that
# the document is the one of the sources; CASTD_BIN=path uses that binary as it is. The web modules are installed
# (`npm ci`) when openapi-typescript is missing.
set -euo pipefail
WEB="$(cd "$(dirname "$0")/.." && pwd)"
ROOT="$(cd "$WEB/.." && pwd)"
OUT="$WEB/src/api.gen.ts"
CHECK=0
case "${1:-}" in
  --check) CHECK=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

if [ -n "${CASTD_BIN:-}" ]; then
  BIN="$CASTD_BIN"
else
  (cd "$ROOT" && cargo build --locked --quiet --bin castd)
  BIN="$ROOT/target/debug/castd"
fi
if [ ! -x "$WEB/node_modules/.bin/openapi-typescript" ]; then
  (cd "$WEB" && npm ci --no-audit --no-fund)
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
# The data dir is never created: `castd openapi` builds the document on an in-memory database. No CASTD_*
# variables of this shell reach it (env -i), so every machine generates the same document.
env -i PATH="$PATH" HOME="${HOME:-/tmp}" "$BIN" --data-dir "$TMP/unused" --log-level warn openapi >"$TMP/openapi.json"
(cd "$WEB" && node_modules/.bin/openapi-typescript "$TMP/openapi.json" --output "$TMP/api.gen.ts" >/dev/null)

if [ "$CHECK" = 1 ]; then
  if ! diff -u "$OUT" "$TMP/api.gen.ts" >"$TMP/diff"; then
    head -n 60 "$TMP/diff" >&2
    echo "web/src/api.gen.ts is not what castd's OpenAPI document generates (the API changed, or the file was" >&2
    echo "edited). Regenerate it with web/scripts/gen-api.sh (or: cd web && npm run gen:api) and commit it." >&2
    exit 1
  fi
  echo "web/src/api.gen.ts matches castd's OpenAPI document"
else
  cp "$TMP/api.gen.ts" "$OUT"
  echo "wrote web/src/api.gen.ts"
fi
