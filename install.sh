#!/usr/bin/env bash
# Installs Slipway on this host from the checkout it sits in: the static
# binary, /var/lib/slipway, /etc/slipway/slipway.env and a hardened systemd
# unit. The service runs as root with only the capabilities its sandbox
# needs: the process runtime runs each deployment as a uid of its own, taken
# from SLIPWAY_SANDBOX_UID_RANGE (default 200000-265535; no user of the host
# may have a uid in it), inside its own mount, PID and IPC namespaces.
#
#   ./install.sh                     build and install under /usr/local, enable the service
#   ./install.sh --prefix /opt/sw    install the binary under another prefix
#   DESTDIR=/tmp/root ./install.sh   stage into a directory (packaging, tests): no user, no systemctl
#   ./install.sh --uninstall         remove the binary, unit and docs; keep data and configuration
#   ./install.sh --dry-run           print what would be done and change nothing (combines with the above)
#
# The unit's Documentation= points at $PREFIX/share/doc/slipway, where the README and SECURITY.md
# are installed.
set -euo pipefail

PREFIX=/usr/local
UNINSTALL=0
DRY_RUN=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) PREFIX="${2:?--prefix needs a directory}"; shift 2 ;;
    --prefix=*) PREFIX="${1#--prefix=}"; shift ;;
    --uninstall) UNINSTALL=1; shift ;;
    --dry-run|-n) DRY_RUN=1; shift ;;
    # The help is the comment block at the top of this file.
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
DESTDIR="${DESTDIR:-}"
BIN="$DESTDIR$PREFIX/bin/slipway"
UNIT="$DESTDIR/etc/systemd/system/slipway.service"
ENVFILE="$DESTDIR/etc/slipway/slipway.env"
DATA="$DESTDIR/var/lib/slipway"
DOC="$DESTDIR$PREFIX/share/doc/slipway"

# run executes a command that changes the system, or only prints it with --dry-run.
run() {
  if [ "$DRY_RUN" = 1 ]; then
    echo "would run: $*"
  else
    "$@"
  fi
}
# write_file PATH MODE writes standard input to PATH, or only says so with --dry-run.
write_file() {
  if [ "$DRY_RUN" = 1 ]; then
    echo "would write $1 (mode $2):"
    sed 's/^/    /'
  else
    cat > "$1"
    chmod "$2" "$1"
  fi
}

systemd_running() { [ -z "$DESTDIR" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; }

if [ "$UNINSTALL" = 1 ]; then
  if systemd_running; then
    run systemctl disable --now slipway.service 2>/dev/null || true
  fi
  run rm -f "$BIN" "$UNIT"
  run rm -rf "$DOC"
  if systemd_running; then run systemctl daemon-reload || true; fi
  [ "$DRY_RUN" = 1 ] && exit 0
  echo "Removed $BIN, $UNIT and $DOC."
  echo "Kept the data in $DATA and the configuration in $ENVFILE; remove them by hand if you want them gone."
  exit 0
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="$(git -C "$here" describe --always --dirty 2>/dev/null || echo dev)"
command -v go >/dev/null || { echo "install.sh: Go is needed to build Slipway (https://go.dev/dl/)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [ "$DRY_RUN" = 1 ]; then
  echo "would build slipway $version (CGO_ENABLED=0 go build) into $BIN"
else
  echo "Building slipway $version ..."
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$tmp/slipway" .)
fi

run install -d -m 0755 "$(dirname "$BIN")" "$(dirname "$UNIT")" "$DOC"
run install -m 0755 "$tmp/slipway" "$BIN"
run install -m 0644 "$here/README.md" "$here/SECURITY.md" "$DOC/"
# 0711: deployments' uids walk down to their own directory; nobody lists it.
run install -d -m 0711 "$DATA"
run install -d -m 0755 "$(dirname "$ENVFILE")"
if [ -z "$DESTDIR" ] && [ "$(id -u)" = 0 ]; then
  # Earlier versions ran as a `slipway` user; the service is root's now.
  run chown -R root:root "$DATA"
fi

if [ ! -e "$ENVFILE" ]; then
  write_file "$ENVFILE" 0600 <<'ENV'
# Slipway configuration: environment variables read by `slipway serve`.
# Every variable is optional; the defaults are shown.

# Listen address, and the URL clients use to reach it (derived from the address when unset).
#SLIPWAY_ADDR=127.0.0.1:8484
#SLIPWAY_PUBLIC_URL=http://127.0.0.1:8484

# Where the database, master key and uploads live (the unit sets /var/lib/slipway).
#SLIPWAY_DATA_DIR=/var/lib/slipway

# Logging: trace, debug, info, warn, error; json or console.
#SLIPWAY_LOG_LEVEL=info
#SLIPWAY_LOG_FORMAT=json

# 32-byte key (64 hex characters or base64) that encrypts secrets at rest. When neither is
# set, a key is generated into $SLIPWAY_DATA_DIR/master.key (mode 0600) on first start.
#SLIPWAY_MASTER_KEY=
#SLIPWAY_MASTER_KEY_FILE=

# On first start only: use this value (at least 32 characters) as the organization-admin API key
# instead of generating one into $SLIPWAY_DATA_DIR/initial-api-key.
#SLIPWAY_BOOTSTRAP_API_KEY=

# Largest source archive an upload URL accepts, in MB.
#SLIPWAY_MAX_UPLOAD_MB=200

# How deployments run: auto, docker or process.
#SLIPWAY_RUNTIME=auto

# Process runtime: the uids (and gids of the same numbers) given to deployments, one each.
# No user or group of this host may have an id in the range; it must start at 1000 or above
# and leave out 65534 (nobody).
#SLIPWAY_SANDBOX_UID_RANGE=200000-265535

# Resource limits of a deployment whose resource_spec does not set them (0: none). Memory
# (MiB, swap included) and CPU (cores) on both runtimes' agents; processes and threads per
# deployment on the process runtime (docker containers have 1024 each).
#SLIPWAY_DEFAULT_MEMORY_LIMIT_MB=2048
#SLIPWAY_DEFAULT_CPU_LIMIT=0
#SLIPWAY_PIDS_LIMIT=1024

# Proxies whose X-Forwarded-For is believed for audit records (comma-separated CIDRs or IPs).
#SLIPWAY_TRUSTED_PROXIES=

# Audit logs for every non-personal organization.
#DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS=false

# Forward audit events to a webhook (http:// or https://) or a JSON Lines file (file:///path).
#SLIPWAY_AUDIT_FORWARD_URL=
#SLIPWAY_AUDIT_FORWARD_INTERVAL=1h

# Failed logins one client address may make, and one account may receive, per window; a
# throttled caller is answered 429 with Retry-After.
#SLIPWAY_LOGIN_ATTEMPTS=10
#SLIPWAY_LOGIN_ACCOUNT_ATTEMPTS=20
#SLIPWAY_LOGIN_WINDOW=10m

# How often each serving agent is checked (engine events and process exits act at once).
#SLIPWAY_HEALTH_INTERVAL=5s

# Prometheus metrics at /metrics on a listener of their own (off when unset); scrapes send
# Authorization: Bearer <the token in $SLIPWAY_DATA_DIR/metrics-token, or in this file>.
#SLIPWAY_METRICS_ADDR=127.0.0.1:9484
#SLIPWAY_METRICS_TOKEN_FILE=

# Agent output kept per deployment, in KiB, and the keep-alive of followed log streams.
#SLIPWAY_AGENT_LOG_LIMIT_KB=2048
#SLIPWAY_LOG_HEARTBEAT=15s
ENV
fi

write_file "$UNIT" 0644 <<UNITEOF
[Unit]
Description=Slipway: self-hosted agent deployments
Documentation=file://$PREFIX/share/doc/slipway/README.md file://$PREFIX/share/doc/slipway/SECURITY.md
After=network-online.target docker.service
Wants=network-online.target

[Service]
Type=notify
NotifyAccess=main
ExecStart=$PREFIX/bin/slipway serve
EnvironmentFile=-/etc/slipway/slipway.env
Environment=SLIPWAY_DATA_DIR=/var/lib/slipway
Restart=on-failure
RestartSec=2
TimeoutStopSec=30
KillMode=mixed
LimitNOFILE=65536

# Hardening. Slipway runs as root so that the process runtime can contain
# deployment code: it gives each deployment its own uid (CAP_SETUID,
# CAP_SETGID; CAP_CHOWN and CAP_FOWNER to hand it its files, CAP_DAC_OVERRIDE
# and CAP_DAC_READ_SEARCH to remove them, CAP_KILL to stop its processes)
# and starts it in new mount, PID and IPC namespaces (CAP_SYS_ADMIN). No
# other capability is kept. NoNewPrivileges does not hinder any of this
# (nothing gains privileges through exec), and the launcher sets it for
# deployment code again.
NoNewPrivileges=yes
# Resource limits: each deployment runs in a cgroup of its own below the
# service's (memory, pids and cpu limits from its resource_spec or
# SLIPWAY_DEFAULT_MEMORY_LIMIT_MB, SLIPWAY_PIDS_LIMIT, SLIPWAY_DEFAULT_CPU_LIMIT).
# systemd hands the service's cgroup subtree to Slipway, which moves itself
# into <its cgroup>/supervisor; /sys/fs/cgroup stays writable for that
# (ProtectControlGroups would make it read-only), and deployments' uids
# cannot write it (the files are root's).
Delegate=yes
ProtectSystem=strict
ReadWritePaths=/var/lib/slipway
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectClock=yes
ProtectHostname=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
LockPersonality=yes
CapabilityBoundingSet=CAP_CHOWN CAP_FOWNER CAP_DAC_OVERRIDE CAP_DAC_READ_SEARCH CAP_KILL CAP_SETUID CAP_SETGID CAP_SYS_ADMIN
AmbientCapabilities=
RestrictNamespaces=mnt pid ipc
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
SystemCallArchitectures=native
UMask=0077

[Install]
WantedBy=multi-user.target
UNITEOF

[ "$DRY_RUN" = 1 ] && exit 0

echo "Installed $BIN ($version), $UNIT and $ENVFILE."
if systemd_running && [ "$(id -u)" = 0 ]; then
  systemctl daemon-reload
  systemctl enable --now slipway.service
  echo "slipway.service is enabled and started; the initial API key is in /var/lib/slipway/initial-api-key."
else
  echo "systemd is not managing this install; run Slipway by hand with:"
  echo "  SLIPWAY_DATA_DIR=/var/lib/slipway $PREFIX/bin/slipway serve"
fi
