#!/usr/bin/env bash
# test.sh runs every test of the project, with the race detector, against a
# real PostgreSQL that the tests start themselves (runtime/idemtest). It first
# installs, pinned and into .tools/, the two command-line tools the migration
# tests drive (squawk and dbmate). Extra arguments go to go test:
#
#   scripts/test.sh                         # everything
#   scripts/test.sh -run Twins ./runtime/...
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-tools.sh >/dev/null
export PATH="$PWD/.tools/bin:$PATH"
if [ "$#" -eq 0 ]; then
	set -- ./...
fi
exec go test -race -count=1 -timeout 30m "$@"
