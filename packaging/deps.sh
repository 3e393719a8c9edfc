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

# cargo tools used by `make deb` and CI
if [ "${CASTD_SKIP_CARGO_TOOLS:-0}" != 1 ]; then
  command -v cargo-deb >/dev/null 2>&1 || cargo install --locked cargo-deb
  # s3s-fs: the S3 server (SigV4-checking, over a local folder) that tests/storage.rs, tests/web/storage.test.mjs and
  # bench/storage run against. Built unoptimised (--debug): the tests need it correct, not fast, and the
  # optimised build took about 12 min on 2 cores.
  command -v s3s-fs >/dev/null 2>&1 || cargo install --debug s3s-fs@0.14.1 --features binary --locked
fi

# schemathesis (tests/schemathesis/run.sh, part of `make test`), pinned, in its own venv.
SCHEMATHESIS_VERSION=4.32.5
CASTD_VENV="${CASTD_VENV:-/opt/castd-venv}"
if [ "${CASTD_SKIP_PIP:-0}" != 1 ]; then
  if ! "$CASTD_VENV/bin/schemathesis" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
    echo "deps: installing schemathesis $SCHEMATHESIS_VERSION into $CASTD_VENV"
    python3 -m venv "$CASTD_VENV"
    "$CASTD_VENV/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION"
  fi
fi
