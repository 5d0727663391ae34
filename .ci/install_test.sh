#!/usr/bin/env bash
# Checks install.sh: a staged install into a temporary root has the binary,
# the env file (0600) and a unit that systemd-analyze accepts; --uninstall
# removes binary and unit but keeps data and configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
fail() { echo "install test: $*" >&2; exit 1; }

# --help is the comment block, nothing else; --dry-run changes nothing.
help="$(./install.sh --help)"
echo "$help" | grep -q -- '--dry-run' || fail "--help does not mention --dry-run"
echo "$help" | grep -q 'set -e' && fail "--help prints code"
plan="$(DESTDIR="$root" ./install.sh --dry-run --prefix /usr/local)"
echo "$plan" | grep -q 'would write' || fail "--dry-run printed no plan"
[ -z "$(ls -A "$root")" ] || fail "--dry-run wrote $(ls -A "$root")"

DESTDIR="$root" ./install.sh --prefix /usr/local >/dev/null
[ -x "$root/usr/local/bin/slipway" ] || fail "binary missing"
"$root/usr/local/bin/slipway" version | grep -q '^slipway ' || fail "binary does not run"
file "$root/usr/local/bin/slipway" 2>/dev/null | grep -q 'statically linked' || fail "binary is not static"
[ "$(stat -c %a "$root/etc/slipway/slipway.env")" = 600 ] || fail "env file is not 0600"
for v in SLIPWAY_ADDR SLIPWAY_DATA_DIR SLIPWAY_PUBLIC_URL SLIPWAY_LOG_LEVEL SLIPWAY_LOG_FORMAT SLIPWAY_MASTER_KEY \
         SLIPWAY_MASTER_KEY_FILE SLIPWAY_BOOTSTRAP_API_KEY SLIPWAY_MAX_UPLOAD_MB SLIPWAY_RUNTIME SLIPWAY_SANDBOX_UID_RANGE \
         SLIPWAY_LOGIN_ATTEMPTS SLIPWAY_LOGIN_ACCOUNT_ATTEMPTS SLIPWAY_LOGIN_WINDOW SLIPWAY_HEALTH_INTERVAL \
         SLIPWAY_AGENT_LOG_LIMIT_KB SLIPWAY_LOG_HEARTBEAT SLIPWAY_DEFAULT_MEMORY_LIMIT_MB SLIPWAY_DEFAULT_CPU_LIMIT \
         SLIPWAY_PIDS_LIMIT; do
  grep -q "$v" "$root/etc/slipway/slipway.env" || fail "env file does not document $v"
done
unit="$root/etc/systemd/system/slipway.service"
for d in Type=notify Restart=on-failure NoNewPrivileges=yes ProtectSystem=strict ReadWritePaths=/var/lib/slipway "CapabilityBoundingSet=CAP_CHOWN" "RestrictNamespaces=mnt pid ipc" Delegate=yes; do
  grep -q "^$d" "$unit" || fail "unit lacks $d"
done
# Deployments' cgroups are made below the service's: /sys/fs/cgroup must stay writable.
grep -q "^ProtectControlGroups=yes" "$unit" && fail "ProtectControlGroups=yes makes the deployments' cgroups impossible"
# Documentation= names files that the install put there.
for doc in $(sed -n 's#^Documentation=##p' "$unit"); do
  [ -f "$root${doc#file://}" ] || fail "Documentation= names $doc, which the install did not create"
done
# systemd-analyze checks ExecStart's binary exists: verify a copy pointing at the staged one.
check="$root/slipway.service"
sed "s#^ExecStart=/usr/local/bin/slipway#ExecStart=$root/usr/local/bin/slipway#" "$unit" > "$check"
out="$(systemd-analyze verify "$check" 2>&1 || true)"
# The slipway user need not exist on the test machine; anything else is a real error.
errs="$(echo "$out" | grep -v -e 'User=slipway' -e 'Group=slipway' -e '^$' -e 'Failed to resolve' -e 'not found in path' || true)"
if [ -n "$errs" ]; then
  echo "$out" >&2
  fail "systemd-analyze verify reported problems"
fi
mkdir -p "$root/var/lib/slipway/keep"
DESTDIR="$root" ./install.sh --uninstall >/dev/null
[ ! -e "$root/usr/local/bin/slipway" ] || fail "--uninstall kept the binary"
[ ! -e "$unit" ] || fail "--uninstall kept the unit"
[ ! -e "$root/usr/local/share/doc/slipway" ] || fail "--uninstall kept the docs"
[ -d "$root/var/lib/slipway/keep" ] || fail "--uninstall removed data"
[ -f "$root/etc/slipway/slipway.env" ] || fail "--uninstall removed configuration"
echo "install.sh: staged install, systemd-analyze verify and --uninstall OK"
