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
#
# The Citus tests (the directories in citus_dirs below) need the Citus
# extension installed for the server: when the selection holds one of
# them, scripts/install-citus.sh runs first, in the background while the
# other modules' tests run (it is skipped at once when Citus is already
# installed), and the modules holding them wait for it. When the selection
# holds ./example, its generated tests run a second time against a Citus
# cluster (IDEMGEN_TEST_CITUS, docs/operations.md).
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

# selects PATTERN DIR: the package pattern selects directory DIR (./...
# and ./x/... select what is under them; any other pattern is one package).
selects() {
	local p="${1#./}" d="$2"
	case "$p" in
	... | .../) return 0 ;;
	*/...) case "$d/" in "${p%/...}"/*) return 0 ;; esac ;;
	*) [ "${p%/}" = "$d" ] && return 0 ;;
	esac
	return 1
}

# The example's generated tests run on a Citus cluster whole, on the schema
# its migrations ship (no -distributed: every table on the coordinator, the
# runtime's Citus statement forms; docs/operations.md).
citus_example_run='.'
citus_example_skip='^$'

# The directories holding Citus tests.
citus_dirs=(runtime/idemtest/pgserver runtime/idemtest runtime/idem internal/faults internal/mutation example)
citus=0 example=0
for p in "${patterns[@]}"; do
	for d in "${citus_dirs[@]}"; do selects "$p" "$d" && citus=1; done
	selects "$p" example && example=1
done

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

if [ "$citus" = 1 ]; then
	# The build deps first, before any test starts a server: installing
	# them can upgrade the server package. A failure here is reported by
	# the build below.
	scripts/install-citus.sh --deps || true
	(
		rc=0
		scripts/install-citus.sh >"$logs/citus.log" 2>&1 || rc=$?
		echo "$rc" >"$logs/citus.rc"
	) &
	citus_pid=$!
fi

# needs_citus MODULE: the module holds a selected Citus test.
needs_citus() {
	[ "$citus" = 1 ] || return 1
	local d
	for d in "${citus_dirs[@]}"; do [ "$(module "./$d")" = "$1" ] && return 0; done
	return 1
}

# wait_citus: wait for install-citus.sh; print its log, fail if it failed.
# A module whose tests need Citus then runs none of them: they could only
# fail, and the install's error is what to read (printed again last).
wait_citus() {
	while [ ! -e "$logs/citus.rc" ] && kill -0 "$citus_pid" 2>/dev/null; do sleep 1; done
	cat "$logs/citus.log"
	[ -e "$logs/citus.rc" ] || { echo "test.sh: install-citus.sh ended without a status" >&2; return 1; }
	[ "$(cat "$logs/citus.rc")" = 0 ]
}

# citus_failed: install-citus.sh ran and failed (or ended without a status).
citus_failed() {
	[ "$citus" = 1 ] || return 1
	[ -e "$logs/citus.rc" ] && [ "$(cat "$logs/citus.rc")" = 0 ] && return 1
	return 0
}

# A module whose tests need Citus compiles them while install-citus.sh runs
# (go test -exec true builds the test binaries and runs none), then waits.
#
# The longest start first, so that what starts last is short and the slots
# end together (a long module started late is the run's tail). On a
# loaded 2-core machine the root module takes about 17 minutes
# (internal/mutation 11 of them), internal/effectscorpus 2 to 4 with a
# warm build cache and 15 with a cold one (it compiles the SDKs its cases
# import), and internal/faults, citus-example (the example's tests on a
# Citus cluster, mostly waiting on the cluster), internal/compat and
# internal/bench 1.5 to 3 each; every other module takes under a minute
# and a half. The logs are still printed in scripts/modules.sh's order
# (pos).
longest=(. internal/effectscorpus citus-example internal/faults internal/compat internal/bench)
declare -A pos
n=0
for m in $(scripts/modules.sh | sed '1a citus-example'); do
	pos[$m]=$n n=$((n + 1))
done
order=()
for m in "${longest[@]}"; do
	if [ -n "${pos[$m]+set}" ]; then order+=("$m"); fi
done
for m in $(scripts/modules.sh | sed '1a citus-example'); do
	case " ${longest[*]} " in *" $m "*) ;; *) order+=("$m") ;; esac
done
run=() pids=()
for m in "${order[@]}"; do
	mine=()
	if [ "$m" = citus-example ]; then
		[ "$example" = 1 ] && mine=(./example)
	else
		for p in "${patterns[@]}"; do
			if [ "$(module "$p")" = "$m" ]; then
				rel="${p#./}"
				[ "$m" != . ] && rel="${rel#"$m"}" && rel="${rel#/}"
				mine+=("./$rel")
			fi
		done
	fi
	[ "${#mine[@]}" -eq 0 ] && continue
	# install-citus.sh, while it runs, is a job but takes no module's place.
	while [ "$(jobs -rp | wc -l)" -ge "$((jobs + citus - $([ -e "$logs/citus.rc" ] && echo "$citus" || echo 0)))" ]; do
		wait -n || true
	done
	i="${pos[$m]}"
	(
		if [ "$m" = citus-example ]; then
			echo "== ./example on a Citus cluster (IDEMGEN_TEST_CITUS=2)"
			go test -race -count=1 -exec true ./example >/dev/null 2>&1 || true
			wait_citus || { echo "test.sh: not run: scripts/install-citus.sh failed"; exit 1; }
			IDEMGEN_TEST_CITUS=2 go test -race -count=1 -timeout 30m -run "$citus_example_run" -skip "$citus_example_skip" \
				${flags[@]+"${flags[@]}"} ./example && echo ok >"$logs/$i.ok"
		else
			[ "$m" != . ] && echo "== module $m"
			if needs_citus "$m"; then
				go test -C "$m" -race -count=1 -exec true "${mine[@]}" >/dev/null 2>&1 || true
				wait_citus || { echo "test.sh: module $m not tested: scripts/install-citus.sh failed"; exit 1; }
			fi
			go test -C "$m" -race -count=1 -timeout 30m ${flags[@]+"${flags[@]}"} "${mine[@]}" &&
				echo ok >"$logs/$i.ok"
		fi
	) >"$logs/$i.log" 2>&1 &
	run[$i]="$m" pids[$i]="$!"
done

status=0
for i in "${!run[@]}"; do
	wait "${pids[$i]}" 2>/dev/null || true
	cat "$logs/$i.log"
	[ -e "$logs/$i.ok" ] || status=1
done
# A failed Citus install is the first thing to fix: its error comes last.
if [ "$citus" = 1 ]; then wait "$citus_pid" 2>/dev/null || true; fi
if citus_failed; then
	echo
	echo "test.sh: scripts/install-citus.sh failed (exit $(cat "$logs/citus.rc" 2>/dev/null || echo none)); the modules needing Citus were not tested. Its last lines:"
	tail -n 25 "$logs/citus.log"
	status=1
fi
exit "$status"
