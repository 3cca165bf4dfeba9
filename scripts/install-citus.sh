#!/usr/bin/env bash
# install-citus.sh builds Citus from the source kept in third_party/citus/
# (its sha256 checked first) and installs it into the PostgreSQL server's own
# directories, for the Citus tests (runtime/idemtest's cluster). It runs as
# root, as CI does: the extension goes into the server's lib/ and extension/
# directories, which PostgreSQL 15 cannot look for elsewhere.
#
#   scripts/install-citus.sh            # build and install, or print one line and skip
#   scripts/install-citus.sh --deps     # only apt-get the build deps (when Citus is not installed)
#   PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config scripts/install-citus.sh
#
# Installing the server headers (postgresql-server-dev-15) can upgrade the
# server package to the headers' minor version: scripts/test.sh runs --deps
# before any test starts a server, and the build itself beside the tests.
#
# It is skipped when citus.so and citus_columnar.so of this version are
# already installed for the server the tests run (the highest version under
# /usr/lib/postgresql/*/bin, as runtime/idemtest/pgserver picks it). The
# build deps are Debian packages, apt-get installed when missing. The build
# is the cheapest that CREATE EXTENSION citus needs: no LLVM bitcode (the
# servers the tests start never JIT-inline Citus), -O1 without debug
# information, no libcurl (that would only serve Citus's anonymous statistics
# collection, which a test server must not run), no lz4 (columnar
# compression, which no test uses). zstd cannot be left out: Debian's server
# headers define HAVE_LIBZSTD (pg_config.h), which Citus's columnar code
# reads, so its headers (libzstd-dev) are a build dep and Citus links it.
# docs/operations.md ("On a Citus cluster") has the timings.
#
# Concurrent runs (two test runs on one machine) take a lock: one builds, the
# other then finds it installed.
set -euo pipefail

VERSION=13.2.2
EXT_VERSION=13.2-1
SHA256=cc5fb2bc63b877065796b362d3335c94110ef22869d0590f84960bb76c2945c4
# Compiler options appended after PostgreSQL's own: the later -O wins.
COPT="${CITUS_COPT:--O1 -g0}"

deps_only=0
case "${1:-}" in
--deps) deps_only=1 ;;
'') ;;
*) echo "usage: $0 [--deps]" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/third_party/citus"
tarball="$src/citus-$VERSION.tar.gz"

say() { echo "install-citus: $*"; }
die() { echo "install-citus: $*" >&2; exit 1; }

# The server the tests run: PG_CONFIG if set, otherwise the pg_config next to
# the highest /usr/lib/postgresql/*/bin/postgres.
if [ -z "${PG_CONFIG:-}" ]; then
	bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)"
	[ -n "$bin" ] && [ -x "$bin/postgres" ] ||
		die "no PostgreSQL server under /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql-15)"
	major="$(basename "$(dirname "$bin")")"
	PG_CONFIG="$bin/pg_config"
else
	major="$("$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')" || die "PG_CONFIG=$PG_CONFIG does not run"
fi
[ "$major" = 15 ] || die "Citus $VERSION is built here for PostgreSQL 15 (its patch is for 15.x), not $major"

# installed: citus.so and citus_columnar.so of this version are in the
# server's directories, with the control file of this version's SQL.
installed() {
	[ -x "$PG_CONFIG" ] || return 1
	local lib ext
	lib="$("$PG_CONFIG" --pkglibdir)" ext="$("$PG_CONFIG" --sharedir)/extension"
	[ -f "$lib/citus.so" ] && [ -f "$lib/citus_columnar.so" ] &&
		grep -aq "Citus $VERSION " "$lib/citus.so" &&
		grep -q "default_version = '$EXT_VERSION'" "$ext/citus.control" 2>/dev/null
}

if installed; then
	[ "$deps_only" = 1 ] || say "Citus $VERSION already installed for PostgreSQL $major ($("$PG_CONFIG" --pkglibdir)/citus.so)"
	exit 0
fi

[ "$(id -u)" -eq 0 ] || die "Citus $VERSION is not installed for PostgreSQL $major; run this script as root (it installs into the server's directories)"

exec 9>"/tmp/idemgen-install-citus.lock"
flock 9
if installed; then # another run built it while this one waited
	say "Citus $VERSION already installed for PostgreSQL $major (built by a concurrent run)"
	exit 0
fi

# Build deps: the server headers (PostgreSQL's libpq-be.h includes the GSSAPI
# headers, hence libkrb5-dev; its pg_config.h defines HAVE_LIBZSTD, hence
# libzstd-dev), a compiler, make and patch.
deps=("postgresql-server-dev-$major" libkrb5-dev libzstd-dev gcc make patch)
missing=()
for p in "${deps[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	command -v apt-get >/dev/null || die "missing build dependencies: ${missing[*]} (and no apt-get)"
	say "apt-get install ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	PG_CONFIG="/usr/lib/postgresql/$major/bin/pg_config"
fi
[ -x "$PG_CONFIG" ] || die "$PG_CONFIG not found after installing postgresql-server-dev-$major"
[ "$deps_only" = 0 ] || exit 0

echo "$SHA256  $tarball" | sha256sum -c --quiet - || die "$tarball does not have the expected sha256 $SHA256"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
start="$(date +%s)"
say "building Citus $VERSION for PostgreSQL $("$PG_CONFIG" --version | cut -d' ' -f2) in $work (COPT=$COPT, $(nproc) jobs)"
tar -xzf "$tarball" -C "$work"
for p in "$src"/*.patch; do
	patch -d "$work" -p1 --quiet <"$p"
done
(
	cd "$work"
	./configure PG_CONFIG="$PG_CONFIG" --without-libcurl --without-lz4 >configure.log 2>&1 ||
		{ tail -n 30 configure.log >&2; exit 1; }
	make -j"$(nproc)" with_llvm=no COPT="$COPT" >make.log 2>&1 || { grep -E 'error|Error' make.log | head -n 30 >&2; exit 1; }
	make install with_llvm=no COPT="$COPT" >install.log 2>&1 || { tail -n 30 install.log >&2; exit 1; }
)
installed || die "Citus $VERSION was built but is not found installed for PostgreSQL $major"
say "Citus $VERSION installed for PostgreSQL $major in $(($(date +%s) - start))s"
