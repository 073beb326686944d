#!/usr/bin/env bash
# floor_ratio.sh — whole-process wall time of one `factory run` attempt against
# an independent floor script doing the same git + fsync + exec work.
#
# Usage (from anywhere inside the module):
#   FLOOR=/path/to/floor.sh MKREPO=/path/to/mkrepo.sh bash bench/floor_ratio.sh
#   bash bench/floor_ratio.sh /path/to/floor.sh /path/to/mkrepo.sh
#
# Environment (all optional except FLOOR/MKREPO when not given as arguments):
#   PAIRS=9        A B pairs per row (median of each side is reported)
#   PATHS="pass fail"
#   SANDBOX="auto off"   factory --sandbox auto (the default) against the floor's
#                  `unshare -rmn` confinement, and --sandbox off against FLOOR_SANDBOX=0
#   IDLE="0 1000"  rows without and with that many idle `sleep` processes on the
#                  machine, started by this script (own session) and killed after
#   ROUNDS=1       run the idle blocks this many times in turn (PAIRS pairs a row each
#                  time) and pool them, so drift hits rows with and without idle alike
#   NFILES=10000   tracked files in the repository made by mkrepo.sh
#   KEEP=1         keep the scratch directory (printed) for inspection
#   STRACE=1       after timing, count execve'd git processes per attempt (needs strace)
#
# A = `bash FLOOR REPO pass|fail`, B = one `factory run` process on a one-file
# work order (allowed file src/f00042.py, acceptance `true` or `false`,
# --max-attempts 1), the model answered instantly from a transcript recorded
# once, before timing, against a throwaway scripted local server. Runs are
# interleaved A B A B ...; after every run the repository is reset to its
# committed state off the clock. Times are taken with time.monotonic_ns()
# around subprocess start and wait, identically for both sides.
#
# Requirements: go, git, bash, python3 (for the timing loop and the one-shot
# recording server).
set -euo pipefail

FLOOR=${1:-${FLOOR:-}}
MKREPO=${2:-${MKREPO:-}}
if [ -z "$FLOOR" ] || [ -z "$MKREPO" ]; then
	echo "usage: FLOOR=floor.sh MKREPO=mkrepo.sh $0   (or: $0 FLOOR MKREPO)" >&2
	exit 2
fi
FLOOR=$(cd "$(dirname "$FLOOR")" && pwd)/$(basename "$FLOOR")
MKREPO=$(cd "$(dirname "$MKREPO")" && pwd)/$(basename "$MKREPO")
PAIRS=${PAIRS:-9}
PATHS=${PATHS:-pass fail}
SANDBOX=${SANDBOX:-auto off}
IDLE=${IDLE:-0 1000}
ROUNDS=${ROUNDS:-1}
NFILES=${NFILES:-10000}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/factory-floor.XXXXXX")
if [ -z "${KEEP:-}" ]; then trap 'rm -rf "$tmp"' EXIT; else echo "scratch: $tmp" >&2; fi

# Same isolated git environment for both sides: no user or system config.
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@factory.invalid GIT_AUTHOR_DATE=2001-01-01T00:00:00Z
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@factory.invalid GIT_COMMITTER_DATE=2001-01-01T00:00:00Z
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_COMMON_DIR GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES

# The real interpreter, not a pyenv/asdf shim (a shim costs ~100 ms a start).
py=$(python3 -c 'import sys; print(sys.executable)')

echo "building factory ..." >&2
(cd "$root" && go build -o "$tmp/factory" ./cmd/factory)

echo "making the $NFILES-file repository with $MKREPO ..." >&2
repo=$tmp/repo
bash "$MKREPO" "$repo" "$NFILES"
# mkrepo.sh's commit of 10,000 loose objects starts git's automatic gc in the
# background, which rewrites .git/info/refs and packed-refs while the first runs
# go on (factory then reports a command changing git metadata and fails). Let it
# finish, then pack, off the clock, as build_ratio.sh does.
# The background gc may start after the commit returns: retry while it runs.
for _ in $(seq 1200); do git -C "$repo" gc -q 2>/dev/null && break; sleep 0.1; done
git -C "$repo" gc -q
git -C "$repo" status --porcelain >/dev/null # settle racily-clean index entries

# Work orders: identical except the acceptance command.
for mode in pass fail; do
	accept=true; [ "$mode" = fail ] && accept=false
	cat >"$tmp/wo-$mode.json" <<EOF
{
  "id": "WO-01",
  "title": "bench: overwrite one file",
  "intent": "Overwrite src/f00042.py with x = 2.",
  "allowed_files": ["src/f00042.py"],
  "forbidden": [],
  "acceptance_commands": ["$accept"],
  "context_files": []
}
EOF
done

# Record one transcript per work order against a scripted server that
# answers every request with the same proposal (the floor's write).
base_sha=$(sha256sum "$repo/src/f00042.py" | cut -d' ' -f1)
cat >"$tmp/server.py" <<'EOF'
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
proposal = json.dumps({"summary": "overwrite one file",
    "writes": [{"path": "src/f00042.py", "base_sha256": sys.argv[2], "content": "x = 2\n"}]})
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps({"id": "bench", "object": "chat.completion", "created": 0, "model": req["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": proposal}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
s = HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
EOF
"$py" "$tmp/server.py" "$tmp/port" "$base_sha" &
server=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
reset_repo() { git -C "$repo" reset -q --hard && git -C "$repo" clean -fdq; }
for mode in pass fail; do
	want=0; [ "$mode" = fail ] && want=1
	set +e
	OPENAI_API_KEY=bench "$tmp/factory" run -q --repo "$repo" --work-order "$tmp/wo-$mode.json" \
		--out "$tmp/rec-out-$mode" --llm-model bench --max-attempts 1 \
		--llm-base-url "http://127.0.0.1:$(cat "$tmp/port")/v1" --record "$tmp/transcript-$mode.jsonl" >/dev/null
	code=$?
	set -e
	[ "$code" = "$want" ] || { kill "$server"; echo "recording $mode run exited $code, want $want" >&2; exit 1; }
	reset_repo
done
kill "$server"; wait "$server" 2>/dev/null || true

# Write back, off the clock, what making the repositories dirtied (10,000 files, packs): left to the
# kernel, the writeback lands some 30 s later, in the first rows timed, and slows factory's
# parallel stat more than the single-threaded floor.
sync
echo "timing: $ROUNDS x $PAIRS pairs A B per row (paths: $PATHS; sandbox: $SANDBOX; idle: $IDLE); load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$py" - "$tmp" "$repo" "$FLOOR" "$PAIRS" "$PATHS" "$SANDBOX" "$IDLE" "$ROUNDS" <<'EOF'
import os, resource, shutil, signal, statistics, subprocess, sys, time
tmp, repo, floor, pairs, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[8])
cpu = {}  # argv[0..1] + mode/sandbox key -> CPU ms of each timed run
paths, sandboxes, idles = sys.argv[5].split(), sys.argv[6].split(), [int(n) for n in sys.argv[7].split()]
DEVNULL = subprocess.DEVNULL

def reset():
    subprocess.run(["git", "-C", repo, "reset", "-q", "--hard"], check=True)
    subprocess.run(["git", "-C", repo, "clean", "-fdq"], check=True)
    st = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=all"],
                        check=True, capture_output=True, text=True).stdout
    if st:
        sys.exit("repository not clean after reset:\n" + st)

last_cpu = [0.0]
def timed(argv, want, env=None):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic_ns()
    p = subprocess.run(argv, stdin=DEVNULL, stdout=DEVNULL, stderr=subprocess.PIPE, env=env)
    dt = (time.monotonic_ns() - t0) / 1e6
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU time of the whole process tree (every descendant is waited for):
    # unlike wall time, it hardly depends on what else the machine runs.
    last_cpu[0] = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000
    if p.returncode != want:
        why = ""
        if "--out" in argv:
            import glob, json
            for f in glob.glob(os.path.join(argv[argv.index("--out") + 1], "*", "run_summary.json")):
                why += open(f).read()[:2000]
        sys.exit(f"{argv} exited {p.returncode}, want {want}\n{p.stderr.decode()}{why}")
    return dt

def a(mode, sandbox):  # the floor restores the repository itself
    env = dict(os.environ, FLOOR_SANDBOX="0" if sandbox == "off" else "1")
    return ["bash", floor, repo, mode], 0, env

n = 0
def b(mode, sandbox):
    global n
    n += 1
    out = os.path.join(tmp, f"out-{mode}-{n}")
    return [os.path.join(tmp, "factory"), "run", "-q", "--repo", repo,
            "--work-order", os.path.join(tmp, f"wo-{mode}.json"), "--out", out,
            "--llm-model", "bench", "--max-attempts", "1", "--sandbox", sandbox,
            "--replay", os.path.join(tmp, f"transcript-{mode}.jsonl")], (0 if mode == "pass" else 1), None

class Idle:
    """count idle `sleep` processes in a session of their own, killed by stop."""
    def __init__(self, count):
        self.p = None
        if not count:
            return
        self.p = subprocess.Popen(["bash", "-c", f"for i in $(seq {count}); do sleep 3600 & done; wait"],
                                  stdin=DEVNULL, stdout=DEVNULL, stderr=DEVNULL, start_new_session=True)
        for _ in range(1200):
            got = subprocess.run(["pgrep", "-c", "-s", str(self.p.pid)], capture_output=True, text=True).stdout.strip()
            if got and int(got) >= count + 1:
                return
            time.sleep(0.1)
        self.stop()
        sys.exit(f"could not start {count} idle processes")
    def stop(self):
        if self.p:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.p.wait()
            self.p = None

# ROUNDS > 1 runs the blocks (one per idle count) that many times in turn, PAIRS pairs a row
# each time, and pools them: drift over the run then hits the rows with and without idle
# processes alike instead of whichever block ran when it came.
runs = {}
for rnd in range(rounds):
    for idle in idles:
        load = Idle(idle)
        try:
            for sandbox in sandboxes:
                for mode in paths:
                    # One untimed warm-up of each side (page cache, index refresh).
                    for side in (a, b):
                        argv, want, env = side(mode, sandbox); timed(argv, want, env); reset()
                    A, B, CA, CB = runs.setdefault((mode, sandbox, idle), ([], [], [], []))
                    for i in range(pairs):
                        argv, want, env = a(mode, sandbox); A.append(timed(argv, want, env)); CA.append(last_cpu[0]); reset()
                        argv, want, env = b(mode, sandbox); B.append(timed(argv, want, env)); CB.append(last_cpu[0]); reset()
                        shutil.rmtree(argv[argv.index("--out") + 1], ignore_errors=True)
        finally:
            load.stop()
results = [(m, s, i, A, B) for (m, s, i), (A, B, _, _) in runs.items()]
cpu = {k: (CA, CB) for k, (_, _, CA, CB) in runs.items()}
pairs *= rounds

print(f"{'path':<5} {'factory vs floor':<22} {'idle':>5} {'floor A ms':>11} {'factory B ms':>13} {'B/A':>6}   (median of {pairs} pairs; per-pair B/A min..max)")
for mode, sandbox, idle, A, B in results:
    ma, mb = statistics.median(A), statistics.median(B)
    r = [y / x for x, y in zip(A, B)]
    vs = f"{sandbox} vs {'unshare -rmn' if sandbox != 'off' else 'bare'}"
    print(f"{mode:<5} {vs:<22} {idle:>5} {ma:>11.1f} {mb:>13.1f} {mb/ma:>5.2f}x   ({min(r):.2f}..{max(r):.2f})")
    print(f"      A: {' '.join(f'{x:.0f}' for x in A)}")
    print(f"      B: {' '.join(f'{x:.0f}' for x in B)}")
print()
print(f"{'path':<5} {'factory vs floor':<22} {'idle':>5} {'floor A cpu ms':>15} {'factory B cpu ms':>17} {'B/A':>6}   (CPU time of the process tree, user + system; medians)")
for mode, sandbox, idle, A, B in results:
    CA, CB = cpu[(mode, sandbox, idle)]
    ma, mb = statistics.median(CA), statistics.median(CB)
    vs = f"{sandbox} vs {'unshare -rmn' if sandbox != 'off' else 'bare'}"
    print(f"{mode:<5} {vs:<22} {idle:>5} {ma:>15.1f} {mb:>17.1f} {mb/ma:>5.2f}x")
# What confinement adds per attempt: paired rows of the same path and idle count.
by = {(m, s, i): (statistics.median(A), statistics.median(B)) for m, s, i, A, B in results}
for mode in paths:
    for idle in idles:
        if (mode, "auto", idle) in by and (mode, "off", idle) in by:
            fa = by[(mode, "auto", idle)][0] - by[(mode, "off", idle)][0]
            fb = by[(mode, "auto", idle)][1] - by[(mode, "off", idle)][1]
            ca = statistics.median(cpu[(mode, "auto", idle)][0]) - statistics.median(cpu[(mode, "off", idle)][0])
            cb = statistics.median(cpu[(mode, "auto", idle)][1]) - statistics.median(cpu[(mode, "off", idle)][1])
            print(f"confinement, {mode}, idle {idle}: wall floor {fa:+.1f} ms, factory {fb:+.1f} ms; CPU floor {ca:+.1f} ms, factory {cb:+.1f} ms per attempt (2 commands; factory also probes once per process)")
# What the idle processes add, as the issue bounds it (<= 5 %): each row's B/A with them over the
# same row's B/A without. The floor ran under the same load, so drift between the two blocks
# cancels as far as it hits both sides alike.
ratio = {k: b / a for k, (a, b) in by.items()}
cpu_ratio = {k: statistics.median(cb) / statistics.median(ca) for k, (ca, cb) in cpu.items()}
for mode in paths:
    for sandbox in sandboxes:
        base = [i for i in idles if i == 0]
        for idle in idles:
            if idle and base and (mode, sandbox, idle) in ratio and (mode, sandbox, 0) in ratio:
                c0, c1 = (cpu_ratio[(mode, sandbox, i)] for i in (0, idle))
                print(f"idle {idle} vs 0, {mode}, --sandbox {sandbox}: wall B/A {ratio[(mode, sandbox, 0)]:.2f}x -> {ratio[(mode, sandbox, idle)]:.2f}x ({(ratio[(mode, sandbox, idle)] / ratio[(mode, sandbox, 0)] - 1) * 100:+.1f} %); "
                      f"CPU B/A {c0:.2f}x -> {c1:.2f}x ({(c1 / c0 - 1) * 100:+.1f} %)")
EOF

if [ -n "${STRACE:-}" ]; then
	command -v strace >/dev/null || { echo "STRACE=1 needs strace" >&2; exit 1; }
	for mode in pass fail; do
		want=0; [ "$mode" = fail ] && want=1
		for side in floor factory; do
			if [ "$side" = floor ]; then
				argv=(bash "$FLOOR" "$repo" "$mode")
			else
				argv=("$tmp/factory" run -q --repo "$repo" --work-order "$tmp/wo-$mode.json" --out "$tmp/strace-out-$mode"
					--llm-model bench --max-attempts 1 --replay "$tmp/transcript-$mode.jsonl")
			fi
			set +e
			strace -f -qq -e trace=execve,fsync,fdatasync,syncfs -o "$tmp/strace-$side-$mode.txt" "${argv[@]}" >/dev/null 2>&1
			set -e
			reset_repo
			gits=$(grep -c 'execve("[^"]*/git"' "$tmp/strace-$side-$mode.txt" || true)
			execs=$(grep 'execve(' "$tmp/strace-$side-$mode.txt" | grep -vc ' = -1 ' || true)
			syncs=$(grep -cE '^[0-9]+ +f(data)?sync\(' "$tmp/strace-$side-$mode.txt" || true)
			syncfs=$(grep -cE '^[0-9]+ +syncfs\(' "$tmp/strace-$side-$mode.txt" || true)
			printf '%-5s %-8s git processes %2s  successful execs %2s  fsync calls %2s  syncfs calls %2s\n' "$mode" "$side" "$gits" "$execs" "$syncs" "$syncfs"
			grep -o 'execve("[^"]*/git", \[[^]]*\]' "$tmp/strace-$side-$mode.txt" | sed 's/execve("[^"]*", \["git", /    git /; s/", "/ /g; s/"//g; s/\]$//'
		done
	done
fi
