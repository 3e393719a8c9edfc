#!/usr/bin/env bash
# Acceptance check for the Debian package (issue 9), run by `make test` in CI (CI=1 or CASTD_TEST_DEB=1).
# Needs root, dpkg, cargo-deb, lintian, systemd-analyze, curl, python3, and a release build
# (target/release/castd; `make deb` / `make test` build it first).
#
#  1. builds package A (the Cargo version) and B (a higher --deb-version) from the same release binary;
#  2. inspects A: file list, control fields, conffiles, maintainer scripts, and that Depends covers
#     every shared library the binary links (each NEEDED soname -> its Debian package);
#  3. lintian: any E: fails; a W:/I: tag fails unless it is in ALLOWED_TAGS below (with the reason);
#  4. dpkg -i A; `systemd-analyze verify` on the installed unit (any output fails); records the
#     `systemd-analyze security --offline=true` score;
#  5. runs /usr/bin/castd as the castd user (setpriv, no PAM, like systemd) with the unit's ExecStart, Environment=, EnvironmentFile=,
#     WorkingDirectory=, UMask= and LimitNOFILE=, checks /api/status, writes a setting;
#  6. upgrades to B: the edited conffile, the database (the setting, the admin password) survive;
#  7. dpkg -r keeps the data; dpkg --purge removes data, user, conffile, systemd links: nothing left.
# On any failure it stops castd and purges the package, so the machine is left as it was.
set -euo pipefail
# No pipeline may stop reading early (`grep -q`, `head`, `awk '{...; exit}'`): with pipefail the writer's
# SIGPIPE (exit 141) fails the script, e.g. once `ldconfig -p` prints more than a pipe buffer holds.
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*"; }
fail() {
  printf 'test-deb: FAIL: %s\n' "$*" >&2
  exit 1
}

# lintian tags accepted, with the reason. Anything else that lintian reports fails the check.
declare -A ALLOWED_TAGS=(
  [initial-upload-closes-no-bugs]="not uploaded to Debian, so there is no ITP bug to close"
  [hardening-no-fortify-functions]="Rust code is bounds-checked and calls no glibc *_chk functions; only the bundled SQLite is C"
  [no-md5sums-control-file]="cargo-deb does not write DEBIAN/md5sums (dh_md5sums does in a debhelper build)"
  [package-supports-alternative-init-but-no-init.d-script]="castd is run by systemd only (Type=notify, watchdog, sandboxing)"
  [spelling-error-in-binary]="false positives: byte strings in compressed data/tables inside the binary"
)

[ "$(id -u)" = 0 ] || fail "needs root (dpkg -i, a system user); CI runs as root"
for tool in dpkg dpkg-deb cargo-deb lintian systemd-analyze curl python3 setpriv objdump; do
  command -v "$tool" >/dev/null || fail "$tool is missing (make deps installs it)"
done
if dpkg-query -W -f='${Status}' castd 2>/dev/null | grep 'installed' >/dev/null; then
  fail "castd is already installed on this machine; purge it first (this test installs and purges it)"
fi
BIN=target/release/castd
[ -x "$BIN" ] || fail "$BIN is missing; run cargo build --release --locked first"

WORK=$(mktemp -d /tmp/castd-test-deb.XXXXXX)
CASTD_PID=""
cleanup() {
  rc=$?
  if [ -n "$CASTD_PID" ] && kill -0 "$CASTD_PID" 2>/dev/null; then
    kill "$CASTD_PID" 2>/dev/null || true
    wait "$CASTD_PID" 2>/dev/null || true
  fi
  if [ $rc != 0 ]; then
    [ -f "$WORK/castd.log" ] && { echo "--- castd log"; tail -n 40 "$WORK/castd.log"; } >&2
    dpkg-query -W castd >/dev/null 2>&1 && dpkg --purge castd >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT

VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
ARCH=$(dpkg --print-architecture)
DEB_A="$WORK/castd_${VERSION}-1_${ARCH}.deb"
VERSION_B="${VERSION}+upgradetest-1"
DEB_B="$WORK/castd_${VERSION_B}_${ARCH}.deb"

log "building the packages from $BIN"
cargo deb --no-build --locked --output "$DEB_A" >/dev/null
cargo deb --no-build --locked --deb-version "$VERSION_B" --output "$DEB_B" >/dev/null
[ -s "$DEB_A" ] && [ -s "$DEB_B" ] || fail "cargo deb did not write both packages"
dpkg --compare-versions "$VERSION_B" gt "${VERSION}-1" || fail "B must sort after A"
# cargo deb clears older .debs of castd from target/debian; leave A there, as `make deb` does.
mkdir -p target/debian && cp "$DEB_A" target/debian/

log "contents of $(basename "$DEB_A")"
dpkg-deb -c "$DEB_A" | tee "$WORK/contents"
UNIT_PATH=""
for p in lib/systemd/system/castd.service usr/lib/systemd/system/castd.service; do
  grep -q " \./$p\$" "$WORK/contents" && UNIT_PATH="/$p"
done
[ -n "$UNIT_PATH" ] || fail "the unit castd.service is not in the package"
for f in usr/bin/castd etc/default/castd usr/share/doc/castd/copyright usr/share/doc/castd/changelog.Debian.gz \
  usr/share/man/man1/castd.1.gz usr/share/doc/castd/README.service.md; do
  grep -q " \./$f\$" "$WORK/contents" || fail "$f is not in the package"
done
grep -Eq '^-rwxr-xr-x (root/root|0/0) .* \./usr/bin/castd$' "$WORK/contents" || fail "/usr/bin/castd must be root:root 0755"

log "control fields"
dpkg-deb -f "$DEB_A" | tee "$WORK/control"
DEPENDS=$(dpkg-deb -f "$DEB_A" Depends)
RECOMMENDS=$(dpkg-deb -f "$DEB_A" Recommends)
[ "$(dpkg-deb -f "$DEB_A" Package)" = castd ] || fail "Package is not castd"
[ "$(dpkg-deb -f "$DEB_A" Version)" = "${VERSION}-1" ] || fail "Version is not ${VERSION}-1"
dep_names() { tr ',|' '\n\n' | sed 's/(.*//; s/^[[:space:]]*//; s/[[:space:]]*$//' | grep -v '^$'; }
echo "$DEPENDS" | dep_names | grep -x adduser >/dev/null || fail "Depends lacks adduser (the postinst creates the user)"
echo "$RECOMMENDS" | dep_names | grep -x va-driver-all >/dev/null || fail "Recommends lacks va-driver-all (VA-API drivers)"
# Every shared library castd links must come from a package in Depends.
objdump -p "$BIN" | awk '/NEEDED/ {print $2}' >"$WORK/needed"
[ -s "$WORK/needed" ] || fail "objdump found no NEEDED libraries in $BIN"
while read -r soname; do
  libfile=$(ldconfig -p | awk -v s="$soname" '$1 == s && !found {print $NF; found = 1}')
  [ -n "$libfile" ] || fail "cannot resolve $soname"
  pkg=$(dpkg -S "$(readlink -f "$libfile")" 2>/dev/null | awk -F: 'NR == 1 {print $1}') ||
    pkg=$(dpkg -S "$libfile" 2>/dev/null | awk -F: 'NR == 1 {print $1}')
  [ -n "$pkg" ] || fail "no package owns $libfile ($soname)"
  if echo "$DEPENDS" | dep_names | grep -x "$pkg" >/dev/null; then
    echo "  $soname -> $pkg (in Depends)"
    continue
  fi
  # dpkg-shlibdeps leaves out what a listed package already depends on (libc6 -> libgcc-s1).
  via=""
  for d in $(echo "$DEPENDS" | dep_names); do
    dpkg-query -W -f='${Depends}, ${Pre-Depends}\n' "$d" 2>/dev/null | dep_names | grep -x "$pkg" >/dev/null && via=$d
  done
  [ -n "$via" ] || fail "$soname comes from $pkg, which Depends neither lists nor implies: $DEPENDS"
  echo "  $soname -> $pkg (implied by $via in Depends)"
done <"$WORK/needed"

log "conffiles and maintainer scripts"
dpkg-deb -e "$DEB_A" "$WORK/control.d"
grep -qx /etc/default/castd "$WORK/control.d/conffiles" || fail "/etc/default/castd is not a conffile"
grep -q 'deb-systemd-helper' "$WORK/control.d/postinst" || fail "postinst does not enable the unit"
grep -q 'deb-systemd-invoke' "$WORK/control.d/postinst" || fail "postinst does not start the unit"
grep -q 'deb-systemd-invoke stop' "$WORK/control.d/prerm" || fail "prerm does not stop the unit"
grep -q 'deb-systemd-helper purge' "$WORK/control.d/postrm" || fail "postrm does not purge the unit state"
! grep -q '#DEBHELPER#' "$WORK/control.d/"* || fail "an unexpanded #DEBHELPER# token is left"

log "lintian"
lintian --tag-display-limit 0 --display-info "$DEB_A" | tee "$WORK/lintian" || true
bad=0
while read -r line; do
  sev=${line%%:*}
  tag=$(echo "$line" | awk '{print $3}')
  case "$sev" in
    E) echo "lintian error: $line" >&2; bad=1 ;;
    W | I)
      if [ -z "${ALLOWED_TAGS[$tag]+x}" ]; then
        echo "lintian tag not in the allowed list: $line" >&2
        bad=1
      else
        echo "  allowed: $tag (${ALLOWED_TAGS[$tag]})"
      fi
      ;;
  esac
done < <(grep -E '^[EWI]: ' "$WORK/lintian" || true)
[ $bad = 0 ] || fail "lintian"

log "dpkg -i $(basename "$DEB_A")"
dpkg -i "$DEB_A" | tee "$WORK/install.out"
grep -q 'Admin page:' "$WORK/install.out" || fail "postinst did not print where the admin page is"
grep -q '/var/lib/castd/initial-admin-password' "$WORK/install.out" || fail "postinst did not say where the password is"
id castd | tee "$WORK/id"
grep -q '(video)' "$WORK/id" && grep -q '(render)' "$WORK/id" || fail "castd is not in the video and render groups"
[ "$(getent passwd castd | cut -d: -f6,7)" = /var/lib/castd:/usr/sbin/nologin ] || fail "castd's home/shell"
[ "$(stat -c %U:%G:%a /var/lib/castd)" = castd:castd:750 ] || fail "/var/lib/castd must be castd:castd 0750"
[ -f "$UNIT_PATH" ] || fail "$UNIT_PATH not installed"

log "systemd-analyze verify $UNIT_PATH (any output fails)"
verify_out=$(systemd-analyze verify "$UNIT_PATH" 2>&1) || fail "systemd-analyze verify failed: $verify_out"
[ -z "$verify_out" ] || fail "systemd-analyze verify printed: $verify_out"
echo "  (no output)"
log "systemd-analyze security --offline=true"
systemd-analyze security --offline=true --no-pager "$UNIT_PATH" >"$WORK/security" 2>&1 || true
grep -E 'Overall exposure level' "$WORK/security" || fail "no security score: $(tail -n 5 "$WORK/security")"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
WEB_PORT=$(free_port)
RTMP_PORT=$(free_port)
# Edit the conffile the way an admin would (also proves an edited conffile survives the upgrade).
cat >>/etc/default/castd <<EOF

# test-deb.sh
CASTD_WEBSERVERIP=127.0.0.1
CASTD_WEBSERVERPORT=$WEB_PORT
CASTD_RTMPPORT=$RTMP_PORT
EOF
BASE="http://127.0.0.1:$WEB_PORT"

unit_values() { sed -n "s/^$1=//p" "$UNIT_PATH"; }
# Start castd the way the unit does: as User=, in WorkingDirectory=, with UMask=, LimitNOFILE=,
# Environment= then EnvironmentFile=, and ExecStart= ($VAR expanded and split like systemd does).
start_castd() {
  local user workdir umask nofile exec_start envs=() envfile
  user=$(unit_values User)
  workdir=$(unit_values WorkingDirectory | sed 's|%S|/var/lib|')
  umask=$(unit_values UMask)
  nofile=$(unit_values LimitNOFILE)
  exec_start=$(unit_values ExecStart)
  envfile=$(unit_values EnvironmentFile | sed 's/^-//')
  while read -r e; do [ -n "$e" ] && envs+=("$(echo "$e" | sed 's|%S|/var/lib|g')"); done < <(unit_values Environment)
  [ "$user" = castd ] && [ -n "$exec_start" ] || fail "unit lacks User=castd or ExecStart="
  # StateDirectory=castd: systemd would create it; postinst did.
  : >"$WORK/castd.log"
  chmod 666 "$WORK/castd.log"
  local hard
  hard=$(ulimit -Hn)
  if [ "$hard" != unlimited ] && [ "$hard" -lt "$nofile" ] && ! (ulimit -n "$nofile") 2>/dev/null; then
    echo "  note: LimitNOFILE=$nofile cannot be applied here (hard limit $hard, no CAP_SYS_RESOURCE); using $hard"
    nofile=$hard
  fi
  ( ulimit -n "$nofile" && cd / && exec setpriv --reuid="$user" --regid="$user" --init-groups -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 HOME="$workdir" "${envs[@]}" bash -c "
      set -a; [ -r '$envfile' ] && . '$envfile'; set +a
      umask $umask; cd '$workdir'
      [ \"\$(ulimit -n)\" -ge $nofile ] || { echo 'LimitNOFILE not applied' >&2; exit 99; }
      exec $exec_start" ) 2>>"$WORK/castd.log" &
  CASTD_PID=$!
  for _ in $(seq 1 150); do
    grep -q 'castd is ready' "$WORK/castd.log" && break
    kill -0 "$CASTD_PID" 2>/dev/null || fail "castd exited: $(cat "$WORK/castd.log")"
    sleep 0.2
  done
  grep -q 'castd is ready' "$WORK/castd.log" || fail "castd did not become ready in 30 s"
  # It runs as castd, not root.
  local pid
  pid=$(pgrep -u castd -x castd | head -n 1) || fail "no castd process owned by the castd user"
  echo "  castd running as $(ps -o user= -p "$pid") (pid $pid), data in $(readlink "/proc/$pid/cwd")"
}
stop_castd() {
  kill -TERM "$CASTD_PID"
  local rc=0
  wait "$CASTD_PID" || rc=$?
  CASTD_PID=""
  [ $rc = 0 ] || fail "castd exited with $rc after SIGTERM"
}

log "running castd with the unit's ExecStart and environment as the castd user"
start_castd
status=$(curl -fsS "$BASE/api/status") || fail "GET /api/status failed"
echo "  /api/status: $status"
echo "$status" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["online"] is False, d' ||
  fail "/api/status is not the offline status"
[ "$(stat -c %U:%a /var/lib/castd/castd.db)" = castd:640 ] || fail "castd.db must be owned by castd, mode 0640 (UMask)"
[ "$(stat -c %U:%a /var/lib/castd/initial-admin-password)" = castd:600 ] || fail "password file must be castd 0600"
ADMIN_PW=$(cat /var/lib/castd/initial-admin-password)
curl -fsS -u "admin:$ADMIN_PW" -H 'Content-Type: application/json' -d '{"value":"Upgrade test station"}' \
  "$BASE/api/admin/config/name" >/dev/null || fail "writing the name setting"
curl -fsS "$BASE/api/config" | grep '"name":"Upgrade test station"' >/dev/null || fail "setting not applied"
stop_castd

log "upgrade: dpkg -i $(basename "$DEB_B")"
dpkg -i "$DEB_B" >"$WORK/upgrade.out" 2>&1 || fail "upgrade failed: $(cat "$WORK/upgrade.out")"
[ "$(dpkg-query -W -f='${Version}' castd)" = "$VERSION_B" ] || fail "not upgraded to $VERSION_B"
grep -q "CASTD_WEBSERVERPORT=$WEB_PORT" /etc/default/castd || fail "the edited conffile was replaced"
start_castd
curl -fsS "$BASE/api/config" | grep '"name":"Upgrade test station"' >/dev/null || fail "the setting was lost in the upgrade"
curl -fsS -o /dev/null -u "admin:$ADMIN_PW" "$BASE/api/admin/serverconfig" || fail "the admin password was lost"
echo "  setting and admin password kept"
stop_castd

log "dpkg -r keeps the data"
dpkg -r castd >/dev/null
[ ! -e /usr/bin/castd ] || fail "/usr/bin/castd left after remove"
[ -f /var/lib/castd/castd.db ] || fail "remove deleted the database"
getent passwd castd >/dev/null || fail "remove deleted the castd user"

log "dpkg --purge deletes everything"
dpkg --purge castd >/dev/null
! dpkg-query -W castd >/dev/null 2>&1 || fail "dpkg still knows castd"
[ ! -e /var/lib/castd ] || fail "/var/lib/castd left after purge"
[ ! -e /etc/default/castd ] || fail "/etc/default/castd left after purge"
! getent passwd castd >/dev/null || fail "user castd left after purge"
! getent group castd >/dev/null || fail "group castd left after purge"
while read -r path; do
  [ -d "/$path" ] || [ ! -e "/$path" ] || fail "/$path left after purge"
done < <(awk '{print $NF}' "$WORK/contents" | sed 's|^\./||')
left=$(find /etc/systemd /var/lib/systemd /lib/systemd /usr/lib/systemd /usr/share/doc -name '*castd*' 2>/dev/null || true)
[ -z "$left" ] || fail "left after purge: $left"

log "test-deb: OK"
