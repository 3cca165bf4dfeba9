#!/usr/bin/env bash
# install-tools.sh installs the command-line tools the migration tests run
# (squawk, the PostgreSQL migration linter, and the dbmate binary) into the
# project-local directory .tools/ (gitignored), at pinned versions, from npm.
#
#   scripts/install-tools.sh            # install (no-op when already there)
#   TOOLS_DIR=/some/dir scripts/install-tools.sh
#
# Afterwards the binaries are .tools/bin/squawk and .tools/bin/dbmate.
set -euo pipefail

SQUAWK_VERSION=2.66.0
DBMATE_VERSION=2.36.0

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${TOOLS_DIR:-$root/.tools}"
mkdir -p "$tools/bin"

have() { # have BIN VERSION: the installed binary reports VERSION
	[ -x "$tools/bin/$1" ] && "$tools/bin/$1" --version 2>/dev/null | grep -q "$2"
}

# PgBouncer, which the fault suite (internal/faults) runs in front of
# PostgreSQL: Debian's package, installed when missing if we may.
if ! command -v pgbouncer >/dev/null && [ ! -x /usr/sbin/pgbouncer ]; then
	if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
		echo "install-tools: installing pgbouncer (apt-get)"
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y pgbouncer >/dev/null || { apt-get update >/dev/null && apt-get install -y pgbouncer >/dev/null; }
	else
		echo "install-tools: the fault suite needs pgbouncer: run, as root, apt-get install pgbouncer (Debian/Ubuntu)" >&2
		exit 1
	fi
fi

if have squawk "$SQUAWK_VERSION" && have dbmate "$DBMATE_VERSION"; then
	echo "install-tools: squawk $SQUAWK_VERSION and dbmate $DBMATE_VERSION already in $tools/bin"
	exit 0
fi

command -v npm >/dev/null || { echo "install-tools: npm is required (apt-get install npm)" >&2; exit 1; }

npm install --prefix "$tools/npm" --no-save --no-audit --no-fund --loglevel=error \
	"squawk-cli@$SQUAWK_VERSION" "@dbmate/linux-x64@$DBMATE_VERSION"

# squawk-cli ships a node launcher; link the platform binary it wraps directly.
squawk_bin="$(find "$tools/npm/node_modules/@squawk-cli" -type f -name squawk -perm -u+x | head -n1)"
dbmate_bin="$(find "$tools/npm/node_modules/@dbmate/linux-x64" -type f -name dbmate | head -n1)"
[ -n "$squawk_bin" ] || { echo "install-tools: squawk binary not found after npm install" >&2; exit 1; }
[ -n "$dbmate_bin" ] || { echo "install-tools: dbmate binary not found after npm install" >&2; exit 1; }
chmod +x "$squawk_bin" "$dbmate_bin"
ln -sf "$squawk_bin" "$tools/bin/squawk"
ln -sf "$dbmate_bin" "$tools/bin/dbmate"

"$tools/bin/squawk" --version
"$tools/bin/dbmate" --version
