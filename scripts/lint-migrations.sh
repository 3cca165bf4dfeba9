#!/usr/bin/env bash
# lint-migrations.sh runs squawk, the PostgreSQL migration linter, with its
# default rules on every committed SQL migration: the ones idemgen generated
# (the example's and the generator's golden files) and the example's own.
# Any finding fails. Rules that do not apply are exempted inside the files,
# next to the statement, with the reason; no rule is disabled here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-tools.sh >/dev/null
mapfile -t files < <(git ls-files '*.sql')
if [ "${#files[@]}" -eq 0 ]; then
	echo "lint-migrations: no committed .sql files" >&2
	exit 1
fi
.tools/bin/squawk --version
.tools/bin/squawk "${files[@]}"
echo "lint-migrations: ${#files[@]} files, no findings"
