#!/usr/bin/env bash
# Issue 29: a parallel build against a serial one. A scripted model answers
# every work order with a correct solution after LATENCY (default 2s); the
# same plans are built with -j 1 and -j 3, and the first-parent histories'
# trees compared commit by commit. Plans: six orders in three chains of
# two, and twelve orders of a realistic dependency shape.
# Usage (from the module root): LATENCY=1s bash bench/parallel.sh
set -euo pipefail
cd "$(dirname "$0")"
FACTORY_BENCH_PARALLEL=1 LATENCY="${LATENCY:-2s}" go test -count=1 -run '^TestParallelBuild$' -v . | grep -E 'latency|FAIL|ok|---'
