#!/usr/bin/env bash
# test.sh runs every test of the project, with the race detector, against a
# real PostgreSQL that the tests start themselves (runtime/idemtest). It first
# installs, pinned and into .tools/, the two command-line tools the migration
# tests drive (squawk and dbmate). Extra arguments go to go test:
#
#   scripts/test.sh                         # everything
#   scripts/test.sh -run Twins ./runtime/...
#   scripts/test.sh ./internal/compat/...   # a nested module's packages
#
# The repository holds nested modules (scripts/modules.sh lists them) so
# that what only the tests or the demo need stays out of the root go.mod.
# With no package arguments every module is tested; a package argument runs
# in the module that holds its directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-tools.sh >/dev/null
export PATH="$PWD/.tools/bin:$PATH"

flags=() patterns=()
for a in "$@"; do
	case "$a" in
	./* | .) patterns+=("$a") ;;
	*) flags+=("$a") ;;
	esac
done
if [ "${#patterns[@]}" -eq 0 ]; then
	for m in $(scripts/modules.sh); do
		if [ "$m" = . ]; then patterns+=(./...); else patterns+=("./$m/..."); fi
	done
fi

# module DIR: the innermost module directory holding the pattern's directory.
module() {
	local dir="${1#./}" best=.
	dir="${dir%/...}"
	for m in $(scripts/modules.sh); do
		case "$dir/" in "$m"/*) [ "${#m}" -gt "${#best}" ] && best="$m" ;; esac
	done
	echo "$best"
}

# The modules' go test runs overlap, IDEMGEN_TEST_JOBS at a time (2 unless
# set; 1 runs them one after another): much of a module's time is spent
# waiting on PostgreSQL and on the go commands its tests start, time another
# module's tests can use. Each module's output is held back and printed
# whole, in scripts/modules.sh's order, so the log reads as if they had run
# in turn.
jobs="${IDEMGEN_TEST_JOBS:-2}"
case "$jobs" in '' | *[!0-9]* | 0) echo "test.sh: IDEMGEN_TEST_JOBS must be a positive number, not '$jobs'" >&2; exit 2 ;; esac
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

run=() pids=()
for m in $(scripts/modules.sh); do
	mine=()
	for p in "${patterns[@]}"; do
		if [ "$(module "$p")" = "$m" ]; then
			rel="${p#./}"
			[ "$m" != . ] && rel="${rel#"$m"}" && rel="${rel#/}"
			mine+=("./$rel")
		fi
	done
	[ "${#mine[@]}" -eq 0 ] && continue
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
	i="${#run[@]}"
	(
		[ "$m" != . ] && echo "== module $m"
		go test -C "$m" -race -count=1 -timeout 30m ${flags[@]+"${flags[@]}"} "${mine[@]}" && echo ok >"$logs/$i.ok"
	) >"$logs/$i.log" 2>&1 &
	run+=("$m") pids+=("$!")
done

status=0
for i in "${!run[@]}"; do
	wait "${pids[$i]}" 2>/dev/null || true
	cat "$logs/$i.log"
	[ -e "$logs/$i.ok" ] || status=1
done
exit "$status"
