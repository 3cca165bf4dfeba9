#!/usr/bin/env bash
# test.sh runs every test of the project against a real PostgreSQL that the
# tests start themselves (runtime/idemtest), after installing the two
# command-line tools the migration tests drive (squawk and dbmate, pinned,
# into .tools/). Extra arguments go to `go test`.
#
#   scripts/test.sh                 # everything, with the race detector
#   scripts/test.sh -run Twins ./runtime/...
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/install-tools.sh >/dev/null
export PATH="$root/.tools/bin:$PATH"
if [ "$#" -eq 0 ]; then
	set -- ./...
fi
exec go test -race -count=1 -timeout 20m "$@"
