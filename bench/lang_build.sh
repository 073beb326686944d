#!/usr/bin/env bash
# lang_build.sh — a confined build per language against the same build with
# --sandbox off (issue 27's target: at most 1.5x on warm caches).
#
# Each pair runs internal/cli's TestBuildPerLanguage (a two-order build from a
# given plan, scripted model, real toolchains) once with --sandbox auto and
# once with --sandbox off, in alternating order, and reads the wall time of
# the `factory build` process the test logs. Medians per language and mode,
# and their ratio, are printed.
#
# Usage (from anywhere inside the module):  PAIRS=7 bash bench/lang_build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${PAIRS:-7}
log=$(mktemp)
trap 'rm -f "$log" "$log.test"' EXIT
go test -c -o "$log.test" ./internal/cli/ # once: the pairs time the builds, not the compiler
for ((i = 0; i < PAIRS; i++)); do
	modes="auto off"
	((i % 2)) && modes="off auto"
	for mode in $modes; do
		(cd internal/cli && FACTORY_LANG_BUILD_SANDBOX=$mode "$log.test" -test.run '^TestBuildPerLanguage$' -test.v -test.count=1) |
			grep -o 'build .* --sandbox [a-z]*: [0-9.]* s' >>"$log"
	done
done
python3 - "$log" <<'PY'
import re, statistics, sys
times = {}
for line in open(sys.argv[1]):
    m = re.match(r"build (.*) --sandbox (\w+): ([0-9.]+) s", line.strip())
    if m:
        times.setdefault(m[1], {}).setdefault(m[2], []).append(float(m[3]))
print(f"{'language':12} {'auto (s)':>9} {'off (s)':>9} {'auto/off':>9}  n")
for lang in sorted(times):
    a, o = statistics.median(times[lang]["auto"]), statistics.median(times[lang]["off"])
    print(f"{lang:12} {a:9.3f} {o:9.3f} {a / o:9.2f}x  {len(times[lang]['auto'])}")
PY
