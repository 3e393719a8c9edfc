#!/usr/bin/env bash
# Installs what castd needs to build and test on Debian 12, idempotently:
# apt packages (ffmpeg CLI + libav dev headers, libclang for bindgen, pkg-config,
# Chromium for the web tests (DejaVu: the clock burnt into bench/latency's test pattern); for the package and packaging/test-deb.sh: lintian, dpkg-dev,
# systemd (systemd-analyze), man-db (verify checks man: links), curl, python3 (+ venv for schemathesis), binutils;
# debootstrap + systemd-container for packaging/test-deb-nspawn.sh; for tests/obs.rs: OBS Studio
# under Xvfb with Mesa's software OpenGL, socat for its network bridge, xdotool/x11-apps/imagemagick
# for its settings screenshot, and GStreamer with rtmp2sink, rtmpsink (librtmp), x264enc,
# videotestsrc/audiotestsrc and avenc_aac); nftables (tests/web/whep-udp-blocked drops UDP in a network
# namespace), faketime (tests/faketime.sh runs the unit tests at other dates), stress-ng (a busy core beside
# the suite, to check it passes under load) and cargo tools.
# Only what is missing is installed, so a second run is quick.
set -euo pipefail

APT_PKGS=(
  pkg-config clang libclang-dev
  ffmpeg libavcodec-dev libavformat-dev libavutil-dev libavfilter-dev libavdevice-dev
  libswscale-dev libswresample-dev
  chromium fonts-noto-color-emoji fonts-dejavu-core
  lintian dpkg-dev fakeroot systemd
  man-db curl python3 python3-venv binutils adduser redis-server nginx
  debootstrap systemd-container
  obs-studio xvfb libgl1-mesa-dri socat iproute2 util-linux xdotool x11-apps imagemagick
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
  gstreamer1.0-plugins-ugly gstreamer1.0-libav
  stunnel4 nftables faketime stress-ng
)
if [ "${CASTD_SKIP_APT:-0}" != 1 ]; then
  missing=()
  for p in "${APT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

# cargo tools, each at an exact version with its own Cargo.lock (--locked), so every machine builds the same
# tool: cargo-deb (`make deb`), cargo-deny (`make lint`, `make deny`), s3s-fs (the S3 server, SigV4-checking,
# over a local folder, that tests/storage.rs, tests/web/storage.test.mjs and bench/storage run against;
# built unoptimised, --debug: the tests need it correct, not fast, and the optimised build took about
# 12 min on 2 cores).
CARGO_DEB_VERSION=3.8.0
CARGO_DENY_VERSION=0.20.2
S3S_FS_VERSION=0.14.1
# `have TOOL VERSION`: TOOL is on PATH and reports VERSION (cargo subcommands answer `cargo TOOL --version`).
have() {
  case "$1" in
    cargo-*) cargo "${1#cargo-}" --version 2>/dev/null | grep -qw "$2" ;;
    *) command -v "$1" >/dev/null 2>&1 && cargo install --list 2>/dev/null | grep -q "^$1 v$2:" ;;
  esac
}
if [ "${CASTD_SKIP_CARGO_TOOLS:-0}" != 1 ]; then
  have cargo-deb "$CARGO_DEB_VERSION" || cargo install --locked --force "cargo-deb@$CARGO_DEB_VERSION"
  have cargo-deny "$CARGO_DENY_VERSION" || cargo install --locked --force "cargo-deny@$CARGO_DENY_VERSION"
  have s3s-fs "$S3S_FS_VERSION" ||
    cargo install --locked --force --debug "s3s-fs@$S3S_FS_VERSION" --features binary
fi

# Python tools, each in its own venv on Debian's python3 with its whole dependency tree pinned by version and
# hash, so a fresh machine runs exactly what CI ran. `pinned_venv DIR REQUIREMENTS WHAT` (re)builds DIR whenever
# the requirements file changes (its sha256 is kept in the venv).
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
pinned_venv() {
  local venv=$1 reqs=$2 what=$3 want py
  want="$(sha256sum "$reqs" | cut -d' ' -f1)"
  [ "$(cat "$venv/.castd-requirements" 2>/dev/null)" = "$want" ] && return 0
  echo "deps: installing $what and its pinned dependencies into $venv"
  rm -rf "$venv"
  py=/usr/bin/python3; [ -x "$py" ] || py=python3
  "$py" -m venv "$venv"
  # --isolated: no pip.conf or PIP_* variables of this machine (extra indexes, find-links) take part.
  "$venv/bin/pip" install --isolated -q --no-deps --require-hashes --only-binary=:all: -r "$reqs"
  "$venv/bin/pip" check
  echo "$want" >"$venv/.castd-requirements"
}
if [ "${CASTD_SKIP_PIP:-0}" != 1 ]; then
  # schemathesis (tests/schemathesis/run.sh): the same cases on every machine for a given seed.
  pinned_venv "${CASTD_VENV:-/opt/castd-venv}" "$ROOT/tests/schemathesis/requirements.txt" schemathesis
  # icalendar (tests/schedule.rs parses the /api/schedule.ics feed with a real iCalendar parser).
  pinned_venv "${CASTD_ICAL_VENV:-/opt/castd-ical-venv}" "$ROOT/tests/ical/requirements.txt" icalendar
fi
