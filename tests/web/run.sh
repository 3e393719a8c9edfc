#!/bin/sh
# Browser end-to-end tests of castd: installs playwright-core (never a browser) and runs every tests/web/*.test.mjs
# with node's built-in test runner against the real binary (CASTD_BIN, default target/debug/castd) and Debian's
# chromium (CHROMIUM, default /usr/bin/chromium). Needs no internet once node_modules exists.
#   ./tests/web/run.sh                        all tests
#   ./tests/web/run.sh viewer-offline         only tests/web/viewer-offline.test.mjs
#   ./tests/web/run.sh --update-screenshots   also write docs/screenshots/*.png
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

if [ "${1:-}" = "--update-screenshots" ]; then
  export CASTD_SCREENSHOT_DIR="$root/docs/screenshots"
  shift
fi
: "${CASTD_BIN:=$root/target/debug/castd}"
export CASTD_BIN
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

cd "$here"
if [ ! -d node_modules/playwright-core ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi

if [ ! -x "$CASTD_BIN" ]; then
  echo "castd binary not found at $CASTD_BIN: run 'cargo build' first (or set CASTD_BIN)" >&2
  exit 1
fi

files=""
if [ $# -gt 0 ]; then
  for name in "$@"; do files="$files $here/${name%.test.mjs}.test.mjs"; done
else
  files=$(ls "$here"/*.test.mjs)
fi

# One file at a time: the live test encodes video, and the machine may be small.
# shellcheck disable=SC2086
exec node --test --test-concurrency=1 --test-reporter=spec $files
