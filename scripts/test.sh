#!/usr/bin/env bash
# test.sh runs the project's tests: it installs the command-line tools the
# migration tests use (scripts/install-tools.sh), then go test on every
# package. Extra arguments go to go test, e.g. scripts/test.sh -run Golden.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-tools.sh
go test -count=1 -timeout 30m ./... "$@"
