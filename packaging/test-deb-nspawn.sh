#!/usr/bin/env bash
# Stretch check for the package: boot a Debian 12 root (debootstrap) with systemd as PID 1 under
# `systemd-nspawn --boot`, install the .deb there with dpkg -i (so deb-systemd-helper enables and
# deb-systemd-invoke starts the unit for real), then check `systemctl is-active castd`, the
# STATUS= line castd sent, that it runs as the castd user, /api/status, journal priorities, that
# the watchdog is fed (and kills a frozen castd, which Restart=on-failure brings back), and purge.
#
# The host need not run systemd: the checks run inside the container as a oneshot unit
# (castd-check.service) that writes its verdict to /var/tmp/castd-check.result and powers off.
#
# Usage: sudo packaging/test-deb-nspawn.sh [path/to/castd_*.deb]   (default: target/debian/castd_*.deb)
# Needs root, debootstrap, systemd-container, and the Debian mirror (apt's sources). The root is
# cached in $CASTD_NSPAWN_ROOT (default /var/tmp/castd-root); a copy is booted, so the cache stays clean.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  printf 'test-deb-nspawn: FAIL: %s\n' "$*" >&2
  exit 1
}
[ "$(id -u)" = 0 ] || fail "needs root"
for tool in debootstrap systemd-nspawn; do
  command -v "$tool" >/dev/null || fail "$tool is missing (apt-get install debootstrap systemd-container)"
done
DEB=${1:-$(ls -t target/debian/castd_*.deb 2>/dev/null | head -n 1 || true)}
[ -f "$DEB" ] || fail "no .deb (make deb first)"

ROOT=${CASTD_NSPAWN_ROOT:-/var/tmp/castd-root}
if [ ! -x "$ROOT/usr/bin/systemctl" ]; then
  echo "== debootstrap bookworm into $ROOT"
  rm -rf "$ROOT"
  debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,curl,adduser,init-system-helpers \
    bookworm "$ROOT" http://deb.debian.org/debian >/dev/null
fi

WORK=$(mktemp -d /var/tmp/castd-nspawn.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cp -a "$ROOT" "$WORK/root"
cp "$DEB" "$WORK/root/var/tmp/castd.deb"

cat >"$WORK/root/usr/local/sbin/castd-check" <<'CHECK'
#!/bin/bash
# Runs inside the booted container as castd-check.service.
set -uo pipefail
exec >/var/tmp/castd-check.log 2>&1
verdict() { echo "$1" >/var/tmp/castd-check.result; systemctl --no-block poweroff; exit 0; }
fail() { echo "FAIL: $*"; systemctl status castd --no-pager; journalctl -u castd --no-pager | tail -n 30; verdict "FAIL: $*"; }
show() { systemctl show castd -p "$1" --value; }
set -x
echo "systemd: $(systemctl --version | head -n 1); pid 1: $(cat /proc/1/comm)"
dpkg -i /var/tmp/castd.deb || fail "dpkg -i"
for _ in $(seq 1 30); do [ "$(systemctl is-active castd)" = active ] && break; sleep 1; done
[ "$(systemctl is-active castd)" = active ] || fail "systemctl is-active castd: $(systemctl is-active castd)"
[ "$(systemctl is-enabled castd)" = enabled ] || fail "castd is not enabled"
systemctl show castd -p Type -p StatusText -p User -p MainPID -p WatchdogUSec -p NRestarts -p LimitNOFILE
case "$(show StatusText)" in "listening on http://"*"; stream offline") ;; *) fail "StatusText: $(show StatusText)" ;; esac
pid=$(show MainPID)
[ "$(stat -c %U "/proc/$pid")" = castd ] || fail "castd does not run as the castd user"
# LimitNOFILE=65536, or the container's own hard limit when that is lower (PID 1 cannot raise it).
want=65536; cap=$(awk '/open files/ {print $5}' /proc/1/limits)
[ "$cap" != unlimited ] && [ "$cap" -lt "$want" ] && { echo "note: container hard limit $cap < $want"; want=$cap; }
grep -Eq "Max open files +$want " "/proc/$pid/limits" || fail "LimitNOFILE not applied: $(grep 'open files' /proc/$pid/limits)"
status=$(curl -fsS http://127.0.0.1:8080/api/status) || fail "GET /api/status"
echo "$status" | grep -q '"online":false' || fail "/api/status: $status"
[ -f /var/lib/castd/initial-admin-password ] || fail "no /var/lib/castd/initial-admin-password"
[ "$(stat -c %U:%a /var/lib/castd)" = castd:750 ] || fail "/var/lib/castd ownership"
journalctl -u castd --no-pager -p warning | grep -q 'generated the admin password' || fail "warning priority lost in the journal"
journalctl -u castd --no-pager -p info | grep -q 'castd is ready' || fail "no ready line in the journal"
# The watchdog: a shorter WatchdogSec in a drop-in, pings must advance WatchdogTimestamp...
mkdir -p /etc/systemd/system/castd.service.d
printf '[Service]\nWatchdogSec=4s\n' >/etc/systemd/system/castd.service.d/watchdog.conf
systemctl daemon-reload && systemctl restart castd || fail "restart with WatchdogSec=4s"
t1=$(show WatchdogTimestampMonotonic); sleep 5; t2=$(show WatchdogTimestampMonotonic)
[ "$t2" -gt "$t1" ] || fail "no WATCHDOG=1 pings (WatchdogTimestamp $t1 -> $t2)"
# ...and a frozen castd is killed by the watchdog and restarted (Restart=on-failure).
pid=$(show MainPID); restarts=$(show NRestarts)
kill -STOP "$pid"
for _ in $(seq 1 20); do [ "$(show NRestarts)" -gt "$restarts" ] && [ "$(systemctl is-active castd)" = active ] && break; sleep 1; done
[ "$(show NRestarts)" -gt "$restarts" ] || fail "a frozen castd was not restarted by the watchdog"
[ "$(show MainPID)" != "$pid" ] && [ "$(systemctl is-active castd)" = active ] || fail "castd did not come back"
journalctl -u castd --no-pager | grep -i 'watchdog timeout' || fail "no watchdog timeout in the journal"
curl -fsS http://127.0.0.1:8080/api/status >/dev/null || fail "/api/status after the restart"
rm -rf /etc/systemd/system/castd.service.d && systemctl daemon-reload
# Purge under systemd: stopped, disabled, data and user gone.
dpkg --purge castd || fail "dpkg --purge"
[ "$(systemctl is-active castd)" != active ] || fail "castd still active after purge"
[ ! -e /var/lib/castd ] || fail "/var/lib/castd left"
! getent passwd castd || fail "user castd left"
[ ! -e /etc/systemd/system/multi-user.target.wants/castd.service ] || fail "enable symlink left"
verdict PASS
CHECK
chmod 755 "$WORK/root/usr/local/sbin/castd-check"
cat >"$WORK/root/etc/systemd/system/castd-check.service" <<'UNIT'
[Unit]
Description=castd package check (test-deb-nspawn.sh)
After=basic.target network.target
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/castd-check
[Install]
WantedBy=multi-user.target
UNIT
mkdir -p "$WORK/root/etc/systemd/system/multi-user.target.wants"
ln -s /etc/systemd/system/castd-check.service "$WORK/root/etc/systemd/system/multi-user.target.wants/"

echo "== booting Debian 12 under systemd-nspawn --boot; the checks run inside"
# --register=no --keep-unit: the host needs no systemd/machined.
timeout 300 systemd-nspawn --quiet --boot --register=no --keep-unit --directory="$WORK/root" \
  --console=pipe >"$WORK/console.log" 2>&1 || true
cat "$WORK/root/var/tmp/castd-check.log" 2>/dev/null | grep -v '^+ ' || true
result=$(cat "$WORK/root/var/tmp/castd-check.result" 2>/dev/null || echo "no result (console: $(tail -n 20 "$WORK/console.log"))")
[ "$result" = PASS ] || fail "$result"
echo "== test-deb-nspawn: OK"
