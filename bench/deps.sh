#!/usr/bin/env bash
# deps.sh — issue 36's targets for the dependency step, measured in one run,
# paired (see "Dependency step" in README.md):
#   cold:  the step through the gateway, empty dependency cache, against the
#          driver's commands run directly against the same local registry
#          with an empty cache (npm: install --package-lock-only, then ci;
#          Go: go mod download all, then go list -deps -test)      <= 1.3x
#   skip:  a step with nothing changed                              <= 50 ms
#   warm:  a reinstall from the warm cache, registry closed, against
#          npm ci --offline / GOPROXY=off go mod download all + go list
#          from a warm cache                                        <= 1.2x
# Each iteration runs every side once, in rotated order: "direct", "step"
# (deps.Step, --sandbox off) and "boxed" (deps.Step confined as factory
# confines it; only with user namespaces). Medians over PAIRS iterations, the
# ratios being medians of the per-iteration ratios. Needs go and npm.
#
# Usage (from anywhere inside the module):
#   PAIRS=9 bash bench/deps.sh                 # every scenario
#   PAIRS=15 bash bench/deps.sh 'DepsCold/go'  # one (a go test -bench regexp)
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${PAIRS:-9}
bin=$(mktemp)
log=$(mktemp)
trap 'rm -f "$bin" "$log"' EXIT
go test -c -o "$bin" ./bench/ # once: the pairs time the step, not the compiler
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(go version); npm $(npm --version)" >&2
(cd bench && "$bin" -test.run '^$' -test.bench "${1:-^BenchmarkDeps}" -test.benchtime "${PAIRS}x" -test.timeout 3h) | tee "$log" >&2
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$log" <<'PY'
import re, sys
rows = []
for line in open(sys.argv[1]):
    m = re.match(r"BenchmarkDeps(\w+)/(\w+)-\d+\s+\d+\s+\d+ ns/op\s+(.*)", line.strip())
    if not m:
        continue
    metrics = {unit: float(v) for v, unit in re.findall(r"([0-9.e+-]+) (\S+)", m[3])}
    rows.append((m[1].lower(), m[2], metrics))
print(f"{'scenario':<10} {'direct ms':>9} {'step ms':>8} {'step/direct':>18} {'boxed ms':>9} {'boxed/direct':>18}  target")
print(f"{'':<10} {'':>9} {'':>8} {'wall (cpu)':>18} {'':>9} {'wall (cpu)':>18}")
for kind, eco, m in rows:
    name = f"{kind} {eco}"
    if kind == "skip":
        print(f"{name:<10} {'':>9} {m['skip-ms']:>8.2f} {'':>18} {'':>9} {'':>18}  <= 50 ms (largest {m['max-skip-ms']:.2f} ms)")
        continue
    def side(s, w):
        if f"{s}/direct" not in m:
            return f"{'-':>{w}} {'-':>18}"
        r = f"{m[s + '/direct']:.2f}x ({m[s + '/direct-cpu']:.2f}x)"
        return f"{m[s + '-ms']:>{w}.0f} {r:>18}"
    print(f"{name:<10} {m['direct-ms']:>9.0f} {side('step', 8)} {side('boxed', 9)}  {'<= 1.3x' if kind == 'cold' else '<= 1.2x'}")
    for other in sorted({u[:-len("/direct")] for u in m if u.endswith("/direct")} - {"step", "boxed"}):
        print(f"{'  ' + other:<10} {'':>9} {side(other, 8)}")
PY
