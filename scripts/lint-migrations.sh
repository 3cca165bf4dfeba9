#!/usr/bin/env bash
# lint-migrations.sh runs squawk, the PostgreSQL migration linter, with its
# default rules over every committed SQL migration (the example's and the
# generator's golden files). Any finding fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/install-tools.sh >/dev/null
mapfile -t files < <(git ls-files '*.sql')
if [ "${#files[@]}" -eq 0 ]; then
	echo "lint-migrations: no committed .sql files found" >&2
	exit 1
fi
echo "squawk: ${#files[@]} files"
.tools/bin/squawk "${files[@]}"
