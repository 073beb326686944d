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
# target; default: go's, GOMAXPROCS), FUZZMINIMIZETIME (default 50x: go
# minimizes every input that finds new code before fuzzing on, by default
# for up to 60 s, in time that grows with the square of the input's length,
# so that a short run of a target slower than a few microseconds was all
# minimizing; and a minimization cut off by a time limit kills its worker,
# whose executions are then not counted and whose restart redoes the
# target's setup. A count bounds it without either: 50 calls of the target
# per input, counted with the others. A failing input is still written,
# minimized as far as the count allowed; FUZZMINIMIZETIME=30s for a long
# hunt), FUZZ_MIN_EXECS (default 1000, or the count of a FUZZTIME of fewer
# than 1000x: a target that executed fewer inputs in its time fails, since a
# target that executes nothing proves nothing; 0 turns the check off). A
# target slow by design (git is its oracle: processes per input) says so in
# its doc comment, with a lower floor and why:
#   // fuzz.sh: min-execs 20 (several git processes per input)
# which replaces the default for that target (not FUZZ_MIN_EXECS).
# Each target's count of executions ("execs: N", the last line go prints)
# and its rate are printed after it and in a table at the end. A failing
# input is written by go to <package>/testdata/fuzz/<Target>/ — commit it
# with the fix, as a regression.
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
minimize=${FUZZMINIMIZETIME:-50x}
min_execs=1000
if [[ $fuzztime =~ ^([0-9]+)x$ ]] && ((BASH_REMATCH[1] < min_execs)); then
	min_execs=${BASH_REMATCH[1]}
fi
min_execs=${FUZZ_MIN_EXECS:-$min_execs}
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

# execs prints "N S" from a fuzzing log: the executions and the seconds
# elapsed on go's last progress line ("fuzz: elapsed: 1m2s, execs: 1234
# (123/sec), ..."), or, for a run that ended while go was still running
# the corpus it had (seeds, testdata and the inputs of earlier runs, kept
# in GOCACHE/fuzz), its last "gathering baseline coverage: N/M" line;
# nothing when there is neither.
execs() {
	local line d n h=0 m=0 s=0
	line=$(sed -n -e 's/^fuzz: elapsed: \([0-9hms]*\), execs: \([0-9]*\) .*/\2 \1/p' \
		-e 's/^fuzz: elapsed: \([0-9hms]*\), gathering baseline coverage: \([0-9]*\)\/.*/\2 \1/p' "$1" | tail -n 1)
	[[ -n $line ]] || return 0
	read -r n d <<<"$line"
	[[ $d =~ ([0-9]+)h ]] && h=${BASH_REMATCH[1]}
	[[ $d =~ ([0-9]+)m ]] && m=${BASH_REMATCH[1]}
	[[ $d =~ ([0-9]+)s ]] && s=${BASH_REMATCH[1]}
	echo "$n $((h * 3600 + m * 60 + s))"
}

# declared_min prints the floor target's doc comment declares in package
# directory dir ("// fuzz.sh: min-execs N (why)" in the comment just above
# "func Target("), if any.
declared_min() {
	local dir=$1 target=$2
	awk -v fn="func $target(" '
		/^\/\// { c = c "\n" $0; next }
		index($0, fn) == 1 { if (match(c, /fuzz\.sh: min-execs [0-9]+/)) { s = substr(c, RSTART, RLENGTH); sub(/.* /, "", s); print s }; exit }
		{ c = "" }' "$dir"/*_test.go
}

# deadline_race reports whether a failed fuzzing log shows only Go's
# end-of-run race: the deadline message, and no failing input or test failure.
deadline_race() {
	grep -q '^    context deadline exceeded$' "$1" &&
		! grep -q -e 'Failing input written to' -e '^panic:' -e '_test\.go:[0-9]*:' "$1"
}

failed=()
rates=()
count=0
start=$SECONDS
for pkg in "${pkgs[@]}"; do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	list=$(go test -list '^Fuzz' "$pkg") || {
		echo "fuzz.sh: cannot list the fuzz targets of $pkg:" >&2
		echo "$list" >&2
		failed+=("$pkg (list)")
		continue
	}
	for target in $(grep '^Fuzz' <<<"$list"); do
		count=$((count + 1))
		load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null) # the rate depends on it
		echo "=== $pkg $target ($fuzztime, load ${load:-?})"
		log=$(mktemp)
		held=1
		if go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "${parallel[@]}" 2>&1 | tee "$log"; then
			:
		elif deadline_race "$log"; then
			echo "fuzz.sh: $target: bare 'context deadline exceeded', no failing input (go.dev/issue/75804); replaying its corpus"
			if ! go test "$pkg" -run "^${target}\$" -count 1; then
				failed+=("$pkg $target (corpus replay)") held=0
			fi
		else
			failed+=("$pkg $target") held=0
		fi
		read -r n secs < <(execs "$log")
		n=${n:-0} secs=${secs:-0}
		rate=$((secs > 0 ? n / secs : n))
		echo "fuzz.sh: $target: $n inputs executed in ${secs}s ($rate/s)"
		rates+=("$(printf '%-32s %-22s %10d in %4ds %8d/s  (load %s)' "${pkg#github.com/factory-harness/factory/}" "$target" "$n" "$secs" "$rate" "${load:-?}")")
		floor=$min_execs
		if [[ -z ${FUZZ_MIN_EXECS:-} ]]; then
			declared=$(declared_min "$dir" "$target")
			floor=${declared:-$floor}
		fi
		if ((held && n < floor)); then
			echo "fuzz.sh: $target executed $n inputs, fewer than $floor: it does not fuzz (a slow or stalled target: time one input, see docs/testing.md)" >&2
			failed+=("$pkg $target ($n inputs executed, fewer than $floor)")
		fi
		rm -f "$log"
	done
done

echo "fuzz.sh: $count targets in $((SECONDS - start))s; inputs executed (go's last count) and the rate:"
printf '  %s\n' "${rates[@]}"
if ((${#failed[@]} > 0)); then
	echo "fuzz.sh: FAILED:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
if ((count == 0)); then
	echo "fuzz.sh: no fuzz targets found in ${patterns[*]}" >&2
	exit 1
fi
