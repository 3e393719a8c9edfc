#!/usr/bin/env bash
# Installs what castd needs to build and test on Debian 12, idempotently:
# apt packages (ffmpeg CLI + libav dev headers, libclang for bindgen, pkg-config,
# Chromium for the web tests (DejaVu: the clock burnt into bench/latency's test pattern); for the package and packaging/test-deb.sh: lintian, dpkg-dev,
# systemd (systemd-analyze), man-db (verify checks man: links), curl, python3 (+ venv for schemathesis), binutils;
# debootstrap + systemd-container for packaging/test-deb-nspawn.sh; for tests/obs.rs: OBS Studio
# under Xvfb with Mesa's software OpenGL, socat for its network bridge, xdotool/x11-apps/imagemagick
# for its settings screenshot, and GStreamer with rtmp2sink, rtmpsink (librtmp), x264enc,
# videotestsrc/audiotestsrc and avenc_aac) and cargo tools.
# Only what is missing is installed, so a second run is quick.
set -euo pipefail

APT_PKGS=(
  pkg-config clang libclang-dev
  ffmpeg libavcodec-dev libavformat-dev libavutil-dev libavfilter-dev libavdevice-dev
  libswscale-dev libswresample-dev
  chromium fonts-noto-color-emoji fonts-dejavu-core
  lintian dpkg-dev fakeroot systemd
  man-db curl python3 python3-venv binutils adduser
  debootstrap systemd-container
  obs-studio xvfb libgl1-mesa-dri socat iproute2 util-linux xdotool x11-apps imagemagick
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
  gstreamer1.0-plugins-ugly gstreamer1.0-libav
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

# schemathesis (tests/schemathesis/run.sh, part of `make test`) in its own venv on Debian's python3, with its
# whole dependency tree pinned by version and hash (tests/schemathesis/requirements.txt), so a fresh machine
# generates exactly the cases CI generated. The venv is rebuilt whenever that file changes.
CASTD_VENV="${CASTD_VENV:-/opt/castd-venv}"
REQS="$(cd "$(dirname "$0")/.." && pwd)/tests/schemathesis/requirements.txt"
if [ "${CASTD_SKIP_PIP:-0}" != 1 ]; then
  want="$(sha256sum "$REQS" | cut -d' ' -f1)"
  if [ "$(cat "$CASTD_VENV/.castd-requirements" 2>/dev/null)" != "$want" ]; then
    echo "deps: installing schemathesis and its pinned dependencies into $CASTD_VENV"
    rm -rf "$CASTD_VENV"
    PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
    "$PY" -m venv "$CASTD_VENV"
    # --isolated: no pip.conf or PIP_* variables of this machine (extra indexes, find-links) take part.
    "$CASTD_VENV/bin/pip" install --isolated -q --no-deps --require-hashes --only-binary=:all: -r "$REQS"
    "$CASTD_VENV/bin/pip" check
    echo "$want" >"$CASTD_VENV/.castd-requirements"
  fi
fi

# icalendar (tests/schedule.rs parses the /api/schedule.ics feed with a real iCalendar parser) in its own
# small venv, pinned by version and hash (tests/ical/requirements.txt); rebuilt whenever that file changes.
CASTD_ICAL_VENV="${CASTD_ICAL_VENV:-/opt/castd-ical-venv}"
ICAL_REQS="$(cd "$(dirname "$0")/.." && pwd)/tests/ical/requirements.txt"
if [ "${CASTD_SKIP_PIP:-0}" != 1 ]; then
  want="$(sha256sum "$ICAL_REQS" | cut -d' ' -f1)"
  if [ "$(cat "$CASTD_ICAL_VENV/.castd-requirements" 2>/dev/null)" != "$want" ]; then
    echo "deps: installing icalendar and its pinned dependencies into $CASTD_ICAL_VENV"
    rm -rf "$CASTD_ICAL_VENV"
    PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
    "$PY" -m venv "$CASTD_ICAL_VENV"
    "$CASTD_ICAL_VENV/bin/pip" install --isolated -q --no-deps --require-hashes --only-binary=:all: -r "$ICAL_REQS"
    "$CASTD_ICAL_VENV/bin/pip" check
    echo "$want" >"$CASTD_ICAL_VENV/.castd-requirements"
  fi
fi
