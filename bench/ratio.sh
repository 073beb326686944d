#!/usr/bin/env bash
# ratio.sh [BENCH_OUTPUT...] — summarise `go test -bench` output from
# bench/ without benchstat: median and min ms/op per benchmark over all
# -count runs, then the harness/plain ratios. Reads stdin if no file given.
set -euo pipefail

awk '
/^Benchmark/ && $4 == "ns/op" {
	name = $1; sub(/-[0-9]+$/, "", name)
	n[name]++; v[name, n[name]] = $3 / 1e6
}
function sortv(name,   i, j, t) {
	for (i = 1; i <= n[name]; i++) s[i] = v[name, i]
	for (i = 2; i <= n[name]; i++)
		for (j = i; j > 1 && s[j-1] > s[j]; j--) { t = s[j]; s[j] = s[j-1]; s[j-1] = t }
}
function median(name,   k) {
	sortv(name); k = n[name]
	return k % 2 ? s[(k+1)/2] : (s[k/2] + s[k/2+1]) / 2
}
function minimum(name) { sortv(name); return s[1] }
function ratio(h, p) {
	if (!(h in n) || !(p in n)) return
	printf "%-56s %6.2fx (median)  %6.2fx (min)\n", h " / " p ":", median(h) / median(p), minimum(h) / minimum(p)
}
END {
	printf "%-40s %5s %12s %12s\n", "benchmark", "runs", "median ms/op", "min ms/op"
	for (name in n) order[++k] = name
	for (i = 2; i <= k; i++)
		for (j = i; j > 1 && order[j-1] > order[j]; j--) { t = order[j]; order[j] = order[j-1]; order[j-1] = t }
	for (i = 1; i <= k; i++)
		printf "%-40s %5d %12.1f %12.1f\n", order[i], n[order[i]], median(order[i]), minimum(order[i])
	print ""
	ratio("BenchmarkAttemptPass", "BenchmarkPlainScriptPass")
	ratio("BenchmarkAttemptFailRollback", "BenchmarkPlainScriptFail")
}
' "$@"
