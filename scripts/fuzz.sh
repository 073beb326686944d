#!/usr/bin/env bash
# Run every fuzz target of the module briefly, one after the other, so that a
# parser regression fails CI. Targets are discovered with `go test -list`,
# so a new Fuzz function is picked up without editing this script.
#
#   scripts/fuzz.sh                 # every target, 10s each
#   FUZZTIME=1m scripts/fuzz.sh     # longer (any -fuzztime value: 30s, 5m, 1000x)
#   scripts/fuzz.sh ./internal/llm  # only these packages
#
# Environment: FUZZTIME (default 10s), FUZZ_PARALLEL (fuzzing workers per
# target; default: go's, GOMAXPROCS), FUZZMINIMIZETIME (default 5s: go
# minimizes every input that finds new coverage for up to this long, which
# on slow targets such as the HTTP ones would eat a short run; a failing
# input is still written, minimized as far as time allowed). A failing input is written by go to
# <package>/testdata/fuzz/<Target>/ — commit it with the fix, as a regression.
# Exit status: 0 when every target held, 1 when any failed (all are run).
#
# Go 1.26's fuzzing coordinator can end a run that found nothing with a bare
# "context deadline exceeded" when -fuzztime expires while a worker is busy
# (go.dev/issue/75804, fixed in Go 1.27). A real finding always prints
# "Failing input written to"; so a run that fails with only that message is
# replayed over its whole corpus (seeds and testdata, deterministic) and held
# when the replay passes. Anything else still fails.
set -uo pipefail

cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
minimize=${FUZZMINIMIZETIME:-5s}
parallel=()
if [[ -n ${FUZZ_PARALLEL:-} ]]; then
	parallel=(-parallel "$FUZZ_PARALLEL")
fi

if (($# > 0)); then
	patterns=("$@")
else
	patterns=(./...)
fi
# Packages whose test files define a fuzz target.
mapfile -t pkgs < <(go list -f '{{.ImportPath}} {{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' "${patterns[@]}" |
	while read -r pkg dir files; do
		for f in $files; do
			if grep -q '^func Fuzz' "$dir/$f"; then
				echo "$pkg"
				break
			fi
		done
	done)

# deadline_race reports whether a failed fuzzing log shows only Go's
# end-of-run race: the deadline message, and no failing input or test failure.
deadline_race() {
	grep -q '^    context deadline exceeded$' "$1" &&
		! grep -q -e 'Failing input written to' -e '^panic:' -e '_test\.go:[0-9]*:' "$1"
}

failed=()
count=0
start=$SECONDS
for pkg in "${pkgs[@]}"; do
	list=$(go test -list '^Fuzz' "$pkg") || {
		echo "fuzz.sh: cannot list the fuzz targets of $pkg:" >&2
		echo "$list" >&2
		failed+=("$pkg (list)")
		continue
	}
	for target in $(grep '^Fuzz' <<<"$list"); do
		count=$((count + 1))
		echo "=== $pkg $target ($fuzztime)"
		log=$(mktemp)
		if go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "${parallel[@]}" 2>&1 | tee "$log"; then
			:
		elif deadline_race "$log"; then
			echo "fuzz.sh: $target: bare 'context deadline exceeded', no failing input (go.dev/issue/75804); replaying its corpus"
			if ! go test "$pkg" -run "^${target}\$" -count 1; then
				failed+=("$pkg $target (corpus replay)")
			fi
		else
			failed+=("$pkg $target")
		fi
		rm -f "$log"
	done
done

echo "fuzz.sh: $count targets in $((SECONDS - start))s"
if ((${#failed[@]} > 0)); then
	echo "fuzz.sh: FAILED:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
if ((count == 0)); then
	echo "fuzz.sh: no fuzz targets found in ${patterns[*]}" >&2
	exit 1
fi
