#!/usr/bin/env bash
# repomap.sh — the repository map of a ~10,000-file repository: cold and warm
# `factory map` (wall time, peak RSS via /usr/bin/time -v), the time until
# `factory plan` sends its first model request, and that request's size in
# tokens (bytes / 3, the budget meter's estimate) with the default --map-tokens.
#
# Usage (from anywhere inside the module):
#   bash bench/repomap.sh              # a generated repository (bench/repomap_gen.py, 10,000 files)
#   REPO=/path/to/work-tree bash bench/repomap.sh   # an existing repository (its HEAD)
# Environment: NFILES (generated files, default 10000), SPEC (a spec file;
# default: one naming a file and a function of the repository), RUNS (warm
# runs, median reported; default 5), KEEP=1 keeps the scratch directory.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$(mktemp -d)
[[ ${KEEP:-} == 1 ]] && echo "scratch: $scratch" || trap 'rm -rf "$scratch"' EXIT
go build -o "$scratch/factory" ./cmd/factory
factory="$scratch/factory"

repo=${REPO:-}
if [[ -z $repo ]]; then
	repo="$scratch/repo"
	python3 bench/repomap_gen.py "$repo" "${NFILES:-10000}"
	git -C "$repo" init -q -b main
	git -C "$repo" add -A
	GIT_AUTHOR_DATE=2001-01-01T00:00:00Z GIT_COMMITTER_DATE=2001-01-01T00:00:00Z \
		git -C "$repo" -c user.name=bench -c user.email=bench@example.com commit -q -m gen
fi
gitdir=$(git -C "$repo" rev-parse --path-format=absolute --git-dir)
echo "repository: $repo ($(git -C "$repo" ls-tree -r --name-only HEAD | wc -l) tracked files), $(nproc) cores"

spec=${SPEC:-}
if [[ -z $spec ]]; then
	# A spec naming one source file of the repository and its first function.
	for file in $(git -C "$repo" ls-tree -r --name-only HEAD | grep -E '\.(go|py)$' | grep -v -e '^vendor/' -e '/vendor/' -e _test | sort | head -200); do
		fn=$(git -C "$repo" show "HEAD:$file" | sed -nE 's/^(func|def) (\([^)]*\) )?([A-Za-z_][A-Za-z0-9_]*).*/\3/p' | head -1)
		[[ -n $fn ]] && break
	done
	spec="$scratch/spec.md"
	printf '# Change\n\nExtend `%s` in `%s` to accept an optional limit, and keep its callers working.\n' "$fn" "$file" >"$spec"
	echo "spec: extend $fn in $file"
fi

timed() { # timed LOG cmd... : wall and CPU seconds and max RSS (MiB) of one run
	local log=$1
	shift
	/usr/bin/time -v "$@" >"$scratch/out" 2>"$log.err" || true
	awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; wall = s}
		/User time|System time/ {cpu += $2} /Maximum resident/ {rss = $2 / 1024}
		END {printf "%.2f s wall, %.2f s CPU, %.0f MiB", wall, cpu, rss}' "$log.err"
}

rm -rf "$gitdir/factory/repomap"
echo "cold factory map: $(timed "$scratch/cold" "$factory" map --repo "$repo" --for "$spec")   [$(grep '^map:' "$scratch/cold.err")]"
cp "$scratch/out" "$scratch/map.txt"
warm=()
for _ in $(seq "${RUNS:-5}"); do
	warm+=("$(timed "$scratch/warm" "$factory" map --repo "$repo" --for "$spec")")
done
printf 'warm factory map (median of %s): %s   [%s]\n' "${RUNS:-5}" "$(printf '%s\n' "${warm[@]}" | sort -n | sed -n "$(((${#warm[@]} + 1) / 2))p")" "$(grep '^map:' "$scratch/warm.err")"
echo "map: $(wc -c <"$scratch/map.txt") bytes, $(($(wc -c <"$scratch/map.txt") / 3)) tokens; $(head -1 "$scratch/map.txt")"

# The planner's request: factory plan against a model URL where nothing
# listens fails at its first request (after fast retries), having written
# that request's prompt; its time is the time until the request left.
for state in cold warm; do
	[[ $state == cold ]] && rm -rf "$gitdir/factory/repomap"
	rm -rf "$scratch/plan"
	echo "$state factory plan until its first request: $(OPENAI_API_KEY=bench timed "$scratch/plan-$state" "$factory" plan --repo "$repo" --spec "$spec" \
		--out "$scratch/plan" --llm-base-url http://127.0.0.1:9/v1 --retry-backoff 1ms --no-review)"
done
prompt="$scratch/plan/compile_artifacts/prompt_attempt_1.txt"
echo "planner request: $(wc -c <"$prompt") bytes = $(($(wc -c <"$prompt") / 3)) tokens (bytes / 3), of which the map $(($(wc -c <"$scratch/map.txt") / 3))"
