#!/usr/bin/env bash
# repomap.sh — what the repository map costs: cold and warm `factory map`
# (wall time, CPU, peak RSS via /usr/bin/time -v, and the map's own time as
# factory reports it on stderr), the time until `factory plan` sends its
# first model request, and that request's size in tokens (bytes / 3, the
# budget meter's estimate) with the default --map-tokens.
#
# Usage (from anywhere inside the module):
#   bash bench/repomap.sh                        # a generated repository (bench/repomap_gen.py, 10,000 files)
#   REPO=gosrc bash bench/repomap.sh             # Go's own source tree, $(go env GOROOT)/src, committed in a scratch repository
#   MKREPO=/path/to/mkrepo.sh bash bench/repomap.sh   # floor_ratio.sh's 10,000-file repository, made by its mkrepo.sh
#   REPO=/path/to/work-tree bash bench/repomap.sh     # an existing repository (its HEAD; its map cache is removed for cold runs)
# Environment:
#   NFILES     files of a generated or mkrepo.sh repository (default 10000)
#   SPEC       a spec file (default: one naming a file and a function of the repository)
#   RUNS       warm runs, median reported (default 5); COLD_RUNS cold runs (default 1)
#   BASELINE   another factory binary (say, an older build): every cold and warm run is made by
#              both, in turn (A = this tree's factory, B = BASELINE), and B/A is printed per figure;
#              their caches sit side by side in <git dir>/factory/repomap
#   PLAN=0     skip the `factory plan` rows
#   KEEP=1     keep the scratch directory
# Click and commander (the issue's other trees) need the network to fetch; point REPO at a
# checkout of them where one is at hand.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$(mktemp -d)
[[ ${KEEP:-} == 1 ]] && echo "scratch: $scratch" || trap 'rm -rf "$scratch"' EXIT
go build -o "$scratch/factory" ./cmd/factory
factory="$scratch/factory"
baseline=${BASELINE:-}
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@factory.invalid GIT_AUTHOR_DATE=2001-01-01T00:00:00Z
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@factory.invalid GIT_COMMITTER_DATE=2001-01-01T00:00:00Z

commit_tree() { # commit_tree DIR: the files of DIR as one commit, packed
	git -C "$1" init -q -b main
	git -C "$1" add -A
	git -C "$1" commit -q -m tree
	for _ in $(seq 600); do git -C "$1" gc -q 2>/dev/null && break; sleep 0.1; done
}

repo=${REPO:-}
case $repo in
"")
	repo="$scratch/repo"
	if [[ -n ${MKREPO:-} ]]; then
		bash "$MKREPO" "$repo" "${NFILES:-10000}"
		for _ in $(seq 600); do git -C "$repo" gc -q 2>/dev/null && break; sleep 0.1; done
	else
		python3 bench/repomap_gen.py "$repo" "${NFILES:-10000}"
		commit_tree "$repo"
	fi
	;;
gosrc)
	repo="$scratch/gosrc"
	cp -r "$(go env GOROOT)/src" "$repo"
	commit_tree "$repo"
	echo "Go's source tree: $(go version | cut -d' ' -f3)"
	;;
esac
gitdir=$(git -C "$repo" rev-parse --path-format=absolute --git-dir)
echo "repository: $repo ($(git -C "$repo" ls-tree -r --name-only HEAD | wc -l) tracked files), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

spec=${SPEC:-}
if [[ -z $spec ]]; then
	# A spec naming one source file of the repository and its first function.
	file="" fn=""
	for f in $(git -C "$repo" ls-tree -r --name-only HEAD | grep -E '\.(go|py)$' | grep -v -e '^vendor/' -e '/vendor/' -e _test | sort | head -200); do
		fn=$(git -C "$repo" show "HEAD:$f" | sed -nE 's/^(func|def) (\([^)]*\) )?([A-Za-z_][A-Za-z0-9_]*).*/\3/p' | head -1)
		file=$f
		[[ -n $fn ]] && break
	done
	spec="$scratch/spec.md"
	if [[ -n $fn ]]; then
		printf '# Change\n\nExtend `%s` in `%s` to accept an optional limit, and keep its callers working.\n' "$fn" "$file" >"$spec"
	else
		printf '# Change\n\nOverwrite %s with x = 2.\n' "$file" >"$spec"
	fi
	echo "spec: $(tail -1 "$spec")"
fi

# timed BIN LOG args...: one run of BIN; prints "wall cpu rss map" (s, s, MiB, s) where map is
# the time factory reports for the map itself (its "map: ... in Xs" line).
timed() {
	local bin=$1 log=$2
	shift 2
	/usr/bin/time -v "$bin" "$@" >"$log.out" 2>"$log.err" || true
	awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; wall = s}
		/User time|System time/ {cpu += $2} /Maximum resident/ {rss = $2 / 1024}
		/^map: / {m = $0; sub(/.* in /, "", m); sub(/s$/, "", m)}
		END {printf "%.3f %.3f %.0f %s\n", wall, cpu, rss, (m == "" ? "-" : m)}' "$log.err"
}
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }

# col SIDE COLUMN: the median of one column of the rows of one side.
col() { awk -v s="$1" -v c="$2" '$1 == s && $c != "-" {print $c}' "$scratch/rows" | median; }

# measure NAME COLD(0/1) RUNS args...: RUNS runs of each binary in turn (A this tree's, B the
# baseline), the cache removed before each run when COLD; prints the medians and B/A.
measure() {
	local name=$1 cold=$2 runs=$3
	shift 3
	local sides=(A) bins=("$factory")
	[[ -n $baseline ]] && sides+=(B) bins+=("$baseline")
	: >"$scratch/rows"
	for _ in $(seq "$runs"); do
		for k in "${!sides[@]}"; do
			[[ $cold == 1 ]] && rm -rf "$gitdir/factory/repomap"
			echo "${sides[$k]} $(timed "${bins[$k]}" "$scratch/run" "$@")" >>"$scratch/rows"
			cp "$scratch/run.err" "$scratch/last-${sides[$k]}.err"
			cp "$scratch/run.out" "$scratch/last-${sides[$k]}.out"
		done
	done
	local line="$name (median of $runs):"
	for s in "${sides[@]}"; do
		line+="  $s: $(col "$s" 2) s wall, $(col "$s" 3) s CPU, $(col "$s" 4) MiB, map $(col "$s" 5) s"
	done
	echo "$line"
	if [[ -n $baseline ]]; then
		local ratios=""
		for c in 2:wall 3:CPU 5:map; do
			ratios+=" ${c#*:} $(awk -v a="$(col A "${c%%:*}")" -v b="$(col B "${c%%:*}")" 'BEGIN {printf "%.2f", (a > 0 ? b / a : 0)}')x"
		done
		echo "    B/A:$ratios"
	fi
	echo "    A's stderr: $(grep '^map:' "$scratch/last-A.err" || true)"
}

measure "cold factory map" 1 "${COLD_RUNS:-1}" map --repo "$repo" --for "$spec"
cp "$scratch/last-A.out" "$scratch/map.txt"
# One untimed run of each binary, so that each finds its own cache warm.
timed "$factory" "$scratch/warmup" map --repo "$repo" --for "$spec" >/dev/null
[[ -n $baseline ]] && timed "$baseline" "$scratch/warmup" map --repo "$repo" --for "$spec" >/dev/null
measure "warm factory map" 0 "${RUNS:-5}" map --repo "$repo" --for "$spec"
echo "map: $(wc -c <"$scratch/map.txt") bytes, $(($(wc -c <"$scratch/map.txt") / 3)) tokens; $(head -1 "$scratch/map.txt")"

[[ ${PLAN:-1} == 0 ]] && exit 0
# The planner's request: factory plan against a model URL where nothing
# listens fails at its first request (after fast retries), having written
# that request's prompt; its time is the time until the request left.
for state in cold warm; do
	[[ $state == cold ]] && rm -rf "$gitdir/factory/repomap"
	rm -rf "$scratch/plan"
	echo "$state factory plan until its first request: $(OPENAI_API_KEY=bench timed "$factory" "$scratch/plan-$state" plan --repo "$repo" --spec "$spec" \
		--out "$scratch/plan" --llm-base-url http://127.0.0.1:9/v1 --retry-backoff 1ms --no-review | awk '{printf "%s s wall, %s s CPU, %s MiB", $1, $2, $3}')"
done
prompt="$scratch/plan/compile_artifacts/prompt_attempt_1.txt"
echo "planner request: $(wc -c <"$prompt") bytes = $(($(wc -c <"$prompt") / 3)) tokens (bytes / 3), of which the map $(($(wc -c <"$scratch/map.txt") / 3))"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
