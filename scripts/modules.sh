#!/usr/bin/env bash
# modules.sh prints the directory of every Go module in the repository,
# relative to its root, the root module (.) first. scripts/test.sh and
# .ci/run go through them: `./...` in one module does not reach another.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
echo .
find . -name go.mod -not -path ./go.mod \
	-not -path './.tools/*' -not -path '*/node_modules/*' -not -path '*/testdata/*' |
	sed 's#^\./##; s#/go.mod$##' | sort
