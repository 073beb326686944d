#!/usr/bin/env bash
# build_ratio.sh — harness time per work order of a whole `factory build`
# process against an independent yardstick: per work order, the shared
# floor's pass path (floor.sh) plus the commit a build must make.
#
# Usage (from anywhere inside the module):
#   FLOOR=/path/to/floor.sh MKREPO=/path/to/mkrepo.sh bash bench/build_ratio.sh
#   bash bench/build_ratio.sh /path/to/floor.sh /path/to/mkrepo.sh
#
# Environment (all optional except FLOOR/MKREPO when not given as arguments):
#   PAIRS=9        A B pairs (median of each side is reported)
#   K=5            work orders in the plan (each overwrites one src/fNNNNN.py)
#   NFILES=10000   tracked files in the repository made by mkrepo.sh
#   EXAMPLE=1      also time examples/build.sh's build, when it exists (see below)
#   KEEP=1         keep the scratch directory (printed) for inspection
#   STRACE=1       after timing, count git processes / execs / fsyncs per side (needs strace)
#
# A = yardstick.sh (written below; it never calls factory): on a fresh branch,
#     for each of the K work orders, floor.sh's pass path for that work
#     order's file (the same commands, in the same order, minus the final
#     `reset --hard` that only makes floor.sh repeatable), then
#     `git add -- FILE && git commit -q -m ...`.
# B = one `factory build --plan P --branch bench-build --max-attempts 1
#     --replay T` process: the plan has K work orders, WO-i overwrites
#     src/f000NN.py (acceptance `true`, global verification the repository's
#     `bash scripts/verify.sh`, as in floor.sh); the model is answered from a
#     transcript recorded once, before timing, against a throwaway scripted
#     local server that proposes `x = 2` with the file's right base_sha256.
#
# floor.sh itself is read only to check that the yardstick still mirrors it
# (its pass path hashes src/f00042.py; the yardstick hashes each work
# order's file instead).
#
# Runs are interleaved A B A B ...; before every run, off the clock, the
# repository is put back exactly (build branches deleted, base branch checked
# out, `reset --hard` to the base commit, `git clean -fdq`, --out removed),
# because a build reuses its branch and --out by design and replay must see
# the same requests. Times: time.monotonic_ns() around subprocess start and
# wait, identically for both sides. For B the build's own events.jsonl (node
# durations) and run summaries (command durations) are read afterwards to
# split its time into model (se node), commands, and harness.
#
# Requirements: go, git, bash, python3.
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
K=${K:-5}
NFILES=${NFILES:-10000}
[ "$K" -ge 1 ] && [ "$K" -le 99 ] && [ "$NFILES" -gt "$K" ] || { echo "need 1 <= K <= 99 < NFILES" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/factory-build.XXXXXX")
if [ -z "${KEEP:-}" ]; then trap 'rm -rf "$tmp"' EXIT; else echo "scratch: $tmp" >&2; fi

# Same isolated git environment for both sides: no user or system config.
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@factory.invalid GIT_AUTHOR_DATE=2001-01-01T00:00:00Z
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@factory.invalid GIT_COMMITTER_DATE=2001-01-01T00:00:00Z
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_COMMON_DIR GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES

# The real interpreter, not a pyenv/asdf shim (a shim costs ~100 ms a start).
py=$(python3 -c 'import sys; print(sys.executable)')

# The yardstick checks it still mirrors floor.sh's pass path.
for step in 'rev-parse --is-inside-work-tree' 'rev-parse HEAD' 'status --porcelain --untracked-files=all' \
	'ls-files -o -i --exclude-standard --directory' 'sha256sum' 'sync' 'bash scripts/verify.sh' 'write-tree'; do
	grep -qF -- "$step" "$FLOOR" || { echo "$FLOOR no longer has '$step'; update the yardstick in $0" >&2; exit 1; }
done

echo "building factory ..." >&2
(cd "$root" && go build -o "$tmp/factory" ./cmd/factory)

echo "making the $NFILES-file repository with $MKREPO ..." >&2
repo=$tmp/repo
bash "$MKREPO" "$repo" "$NFILES"
git -C "$repo" status --porcelain >/dev/null # settle racily-clean index entries
base_branch=$(git -C "$repo" symbolic-ref --short HEAD)
base_commit=$(git -C "$repo" rev-parse HEAD)

# The work orders' files: src/f00001.py .. src/f000KK.py.
files=()
for i in $(seq 1 "$K"); do files+=("src/f$(printf %05d "$i").py"); done

# A: the yardstick. Per work order exactly floor.sh's pass path for that
# work order's file, without floor.sh's closing `reset --hard` (a build keeps
# its work), then the commit a build makes. One branch, as a build has.
cat >"$tmp/yardstick.sh" <<'EOF'
#!/usr/bin/env bash
# Usage: yardstick.sh REPO FILE...   (never calls factory)
set -e
repo=$1; shift
git -C "$repo" checkout -q -b bench-floor
n=0
for f in "$@"; do
  n=$((n+1))
  git -C "$repo" rev-parse --is-inside-work-tree >/dev/null
  base=$(git -C "$repo" rev-parse HEAD)
  [ -z "$(git -C "$repo" status --porcelain --untracked-files=all)" ]
  git -C "$repo" ls-files -o -i --exclude-standard --directory >/dev/null
  sha256sum "$repo/$f" >/dev/null
  printf 'x = 2\n' > "$repo/$f.tmp" && sync "$repo/$f.tmp" && mv "$repo/$f.tmp" "$repo/$f"
  (cd "$repo" && bash scripts/verify.sh)
  (cd "$repo" && true)   # acceptance command
  git -C "$repo" add -- "$f" && git -C "$repo" write-tree >/dev/null
  git -C "$repo" add -- "$f" && git -C "$repo" commit -q -m "factory: WO-$n overwrite $f"
done
EOF

# B: the plan, in the layout `factory plan` writes.
plan=$tmp/plan
mkdir -p "$plan"
"$py" - "$plan" "${files[@]}" <<'EOF'
import json, os, sys
plan, files = sys.argv[1], sys.argv[2:]
cond = lambda kind, path: {"kind": kind, "path": path}
wos = []
for i, f in enumerate(files, 1):
    wo = {"id": f"WO-{i:02d}", "title": f"overwrite {f}", "intent": f"Overwrite {f} with x = 2.",
          "preconditions": [cond("file_exists", f)], "postconditions": [cond("file_exists", f)],
          "allowed_files": [f], "forbidden": [], "acceptance_commands": ["true"], "context_files": [f]}
    wos.append(wo)
    json.dump(wo, open(os.path.join(plan, wo["id"] + ".json"), "w"), indent=2)
manifest = {"verify_contract": {"command": "bash scripts/verify.sh",
                                "requires": [cond("file_exists", "scripts/verify.sh")]},
            "work_orders": wos}
json.dump(manifest, open(os.path.join(plan, "WORK_ORDERS_MANIFEST.json"), "w"), indent=2)
EOF

# Record one transcript for the whole build against a scripted server: each
# request names its work order's file; the answer overwrites that file.
cat >"$tmp/server.py" <<'EOF'
import hashlib, json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
repo, files = sys.argv[2], sys.argv[3:]
sha = {f: hashlib.sha256(open(f"{repo}/{f}", "rb").read()).hexdigest() for f in files}
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        req = json.loads(raw)
        text = json.dumps(req["messages"])
        hits = [f for f in files if f in text]
        if len(hits) != 1:
            self.send_error(400, f"request names {hits}, want exactly one work order file"); return
        f = hits[0]
        proposal = json.dumps({"summary": "overwrite one file",
            "writes": [{"path": f, "base_sha256": sha[f], "content": "x = 2\n"}]})
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

# Puts the repository back to exactly the state every timed run starts from.
reset_repo() {
	git -C "$repo" checkout -q -f "$base_branch"
	git -C "$repo" for-each-ref --format='%(refname:short)' refs/heads/ | while read -r b; do
		[ "$b" = "$base_branch" ] || git -C "$repo" branch -q -D "$b"
	done
	git -C "$repo" reset -q --hard "$base_commit"
	git -C "$repo" clean -fdq
}

"$py" "$tmp/server.py" "$tmp/port" "$repo" "${files[@]}" &
server=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
set +e
OPENAI_API_KEY=bench "$tmp/factory" build -q --plan "$plan" --repo "$repo" --out "$tmp/rec-out" \
	--branch bench-build --llm-model bench --max-attempts 1 \
	--llm-base-url "http://127.0.0.1:$(cat "$tmp/port")/v1" --record "$tmp/transcript.jsonl" >/dev/null
code=$?
set -e
kill "$server"; wait "$server" 2>/dev/null || true
[ "$code" = 0 ] || { echo "recording build exited $code, want 0" >&2; exit 1; }
n=$(git -C "$repo" rev-list --count "$base_commit..bench-build")
[ "$n" = "$K" ] || { echo "recording build made $n commits, want $K" >&2; exit 1; }
rm -rf "$tmp/rec-out"
reset_repo

echo "timing: $PAIRS pairs A B, K=$K work orders; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$py" - "$tmp" "$repo" "$base_branch" "$base_commit" "$PAIRS" "$K" "${files[@]}" <<'EOF'
import glob, json, os, shutil, statistics, subprocess, sys, time
from datetime import datetime
tmp, repo, base_branch, base_commit = sys.argv[1:5]
pairs, K, files = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7:]
DEVNULL = subprocess.DEVNULL
git = lambda *a, **kw: subprocess.run(["git", "-C", repo, *a], check=True, **kw)

def reset():
    """Back to exactly the base state, off the clock (see reset_repo)."""
    git("checkout", "-q", "-f", base_branch)
    heads = git("for-each-ref", "--format=%(refname:short)", "refs/heads/", capture_output=True, text=True).stdout.split()
    for b in heads:
        if b != base_branch:
            git("branch", "-q", "-D", b)
    git("reset", "-q", "--hard", base_commit)
    git("clean", "-fdq")
    st = git("status", "--porcelain", "--untracked-files=all", capture_output=True, text=True).stdout
    if st:
        sys.exit("repository not clean after reset:\n" + st)

def check_built(branch):
    n = git("rev-list", "--count", f"{base_commit}..{branch}", capture_output=True, text=True).stdout.strip()
    if n != str(K):
        sys.exit(f"{branch}: {n} commits, want {K}")

def timed(argv):
    w0, t0 = time.time_ns(), time.monotonic_ns()
    p = subprocess.run(argv, stdin=DEVNULL, stdout=DEVNULL, stderr=subprocess.PIPE)
    dt, w1 = (time.monotonic_ns() - t0) / 1e6, time.time_ns()
    if p.returncode != 0:
        sys.exit(f"{argv} exited {p.returncode}\n{p.stderr.decode()}")
    return dt, w0, w1

def ts(s):  # RFC 3339 with nanoseconds -> ns since the epoch
    head, frac = s.rstrip("Z").split(".") if "." in s else (s.rstrip("Z"), "0")
    sec = datetime.fromisoformat(head + "+00:00").timestamp()
    return int(sec) * 10**9 + int(frac.ljust(9, "0")[:9])

def breakdown(out, wall, w0, w1):
    """Split one build's wall time (ms) using its events.jsonl and run summaries."""
    [bdir] = glob.glob(os.path.join(out, "builds", "*"))
    ev = [json.loads(l) for l in open(os.path.join(bdir, "events.jsonl"))]
    t = lambda e: ts(e["ts"]) / 1e6
    first = lambda name: next(e for e in ev if e["event"] == name)
    seg = {"startup+exit (process, checks, lock, summary)": (t(first("build_start")) - w0 / 1e6) + (w1 / 1e6 - t(first("build_end"))),
           "plan (load + validate)": t(first("plan")) - t(first("build_start")),
           "branch + progress from trailers": t(first("wo_start")) - t(first("plan"))}
    per = {k: 0.0 for k in ("preflight", "se (model: replay)", "tr (write)", "po (commands)", "po (harness)",
                            "finalize", "between nodes", "commit + cleanup + dirty check")}
    wos = [e["wo"] for e in ev if e["event"] == "wo_start"]
    cmds = 0.0
    for wo in wos:
        mine = [e for e in ev if e.get("wo") == wo]
        start = t(next(e for e in mine if e["event"] == "wo_start"))
        end = t(next(e for e in mine if e["event"] == "wo_end"))
        nodes = [e for e in mine if e["event"] == "node"]
        per["preflight"] += t(nodes[0]) - nodes[0]["duration_ms"] - start
        prev = None
        for n in nodes:
            if prev is not None:
                per["between nodes"] += t(n) - n["duration_ms"] - t(prev)
            prev = n
        [summ] = glob.glob(os.path.join(bdir, wo, "*", "run_summary.json"))
        c = sum(r["duration_seconds"] * 1e3 for a in json.load(open(summ))["attempts"]
                for r in a.get("verify", []) + a.get("acceptance", []))
        cmds += c
        for n in nodes:
            d = n["duration_ms"]
            if n["node"] == "se": per["se (model: replay)"] += d
            elif n["node"] == "tr": per["tr (write)"] += d
            elif n["node"] == "po": per["po (commands)"] += c; per["po (harness)"] += d - c
            else: per["finalize"] += d
        per["commit + cleanup + dirty check"] += end - t(nodes[-1])
    seg["end (after the last work order)"] = t(first("build_end")) - t(next(e for e in reversed(ev) if e["event"] == "wo_end"))
    seg.update({"per WO: " + k: v for k, v in per.items()})
    seg["other (unaccounted)"] = wall - sum(seg.values())
    return seg, per["se (model: replay)"], cmds

def a():
    return ["bash", os.path.join(tmp, "yardstick.sh"), repo, *files], "bench-floor"

n = 0
def b():
    global n
    n += 1
    out = os.path.join(tmp, f"out-{n}")
    return [os.path.join(tmp, "factory"), "build", "-q", "--plan", os.path.join(tmp, "plan"), "--repo", repo,
            "--out", out, "--branch", "bench-build", "--llm-model", "bench", "--max-attempts", "1",
            "--replay", os.path.join(tmp, "transcript.jsonl")], "bench-build"

# One untimed warm-up of each side (page cache, index refresh).
for side in (a, b):
    argv, branch = side(); timed(argv); check_built(branch); reset()
A, B, segs, model, cmds, loads = [], [], [], [], [], []
for i in range(pairs):
    loads.append(os.getloadavg()[0])
    argv, branch = a(); A.append(timed(argv)[0]); check_built(branch); reset()
    argv, branch = b(); dt, w0, w1 = timed(argv); B.append(dt); check_built(branch)
    out = argv[argv.index("--out") + 1]
    s, m, c = breakdown(out, dt, w0, w1); segs.append(s); model.append(m); cmds.append(c)
    shutil.rmtree(out); reset()
loads.append(os.getloadavg()[0])

ma, mb = statistics.median(A), statistics.median(B)
r = [y / x for x, y in zip(A, B)]
med = lambda xs: statistics.median(xs)
print(f"K={K} work orders, {pairs} pairs A B; load average (1 min) during the pairs: {min(loads):.1f}..{max(loads):.1f}")
print(f"{'':<26} {'whole run ms':>12} {'per WO ms':>10}")
print(f"{'A yardstick (floor+commit)':<26} {ma:>12.1f} {ma/K:>10.1f}")
print(f"{'B factory build':<26} {mb:>12.1f} {mb/K:>10.1f}")
print(f"B/A (medians): {mb/ma:.2f}x   per-pair B/A: median {med(r):.2f}x, min..max {min(r):.2f}..{max(r):.2f}")
print(f"   A: {' '.join(f'{x:.0f}' for x in A)}")
print(f"   B: {' '.join(f'{x:.0f}' for x in B)}")
harness = [(b_ - m - c) / K for b_, m, c in zip(B, model, cmds)]
print(f"B per WO: model (se node) {med(model)/K:.1f} ms, commands (verify+acceptance) {med(cmds)/K:.1f} ms, "
      f"harness only {med(harness):.1f} ms (median; {min(harness):.1f}..{max(harness):.1f})")
print(f"B breakdown (median over pairs of each segment, ms; 'per WO' rows are per work order):")
for k in segs[0]:
    v = med([s[k] for s in segs])
    print(f"   {k:<48} {v / K if k.startswith('per WO') else v:>8.1f}")
EOF
