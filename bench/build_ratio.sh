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
#   PAIRS=9        A B pairs per scenario (median of each side is reported)
#   K=5            work orders in the 10,000-file scenario's plan
#   NFILES=10000   tracked files in the repository made by mkrepo.sh
#   SCENARIOS="repo example"   which scenarios to time (example: only when
#                  examples/build.sh and examples/textstats/ exist)
#   BUILD_FLAGS=   extra flags for every timed `factory build` (word-split),
#                  e.g. BUILD_FLAGS="--sandbox off" to time it without confinement
#   KEEP=1         keep the scratch directory (printed) for inspection
#   STRACE=1       after timing, run each side once more under strace: per WO git
#                  processes, execs, fsyncs and the time in each child program
#
# Scenarios
#   repo:    the mkrepo.sh repository (10,000 tracked files, an ignored .env).
#            A plan of K work orders; WO-i overwrites src/f0000i.py with
#            `x = 2` (acceptance `true`; global verification the repository's
#            `bash scripts/verify.sh`, as in floor.sh). The model is a
#            throwaway scripted server (each proposal with the right
#            base_sha256), recorded once with --record; timed runs --replay.
#   example: the bundled example, exactly the `factory build` command of
#            examples/build.sh (spec → replayed plan → 4 work orders into a
#            repository the build creates), with its transcript.
#
# A = yardstick.sh (written below; it never calls factory). Per work order:
#     floor.sh's pass path for that work order's files, the same commands in
#     the same order (minus floor.sh's final `reset --hard`, which only makes
#     it repeatable), with the work order's real verification and acceptance
#     commands, then `git add -- FILES && git commit -q -m ...`. Before the
#     first work order it does what a build does once: `git checkout -b` of
#     the build branch (and, for the example, `git init` + an empty commit).
# B = one `factory build ... --replay TRANSCRIPT` process.
#
# Runs are interleaved A B A B ... after one untimed warm-up of each side.
# Before every run, off the clock, the repository is put back exactly (repo:
# extra branches deleted, base branch checked out, `reset --hard` to the base
# commit, `git clean -fdq`; example: repository removed) and --out is
# removed, because a build reuses its branch and --out by design and replay
# must see the same requests. Times: time.monotonic_ns() around subprocess
# start and wait, identically for both sides. For B the build's own
# events.jsonl (node durations, timestamps) and run summaries (command
# durations) are read afterwards to split its wall time: model (se node),
# commands, and the harness's own phases.
#
# Requirements: go, git, bash, python3 (strace only for STRACE=1).
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
SCENARIOS=${SCENARIOS:-repo example}
[ "$K" -ge 1 ] && [ "$K" -le 99 ] && [ "$NFILES" -gt "$K" ] || { echo "need 1 <= K <= 99 < NFILES" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/factory-build.XXXXXX")
if [ -z "${KEEP:-}" ]; then trap 'rm -rf "$tmp"' EXIT; else echo "scratch: $tmp" >&2; fi

# No user or system git config on either side.
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_COMMON_DIR GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
identity() { # NAME: a fixed author and committer, as floor_ratio.sh and examples/build.sh set
	export GIT_AUTHOR_NAME=$1 GIT_AUTHOR_EMAIL=$2 GIT_AUTHOR_DATE=2001-01-01T00:00:00Z
	export GIT_COMMITTER_NAME=$1 GIT_COMMITTER_EMAIL=$2 GIT_COMMITTER_DATE=2001-01-01T00:00:00Z
}

# The real interpreter, not a pyenv/asdf shim (a shim costs ~100 ms a start).
py=$(python3 -c 'import sys; print(sys.executable)')

# The yardstick must keep mirroring floor.sh's pass path.
for step in 'rev-parse --is-inside-work-tree' 'rev-parse HEAD' 'status --porcelain --untracked-files=all' \
	'ls-files -o -i --exclude-standard --directory' 'sha256sum' 'sync' 'bash scripts/verify.sh' 'write-tree'; do
	grep -qF -- "$step" "$FLOOR" || { echo "$FLOOR no longer has '$step'; update yardstick.sh in $0" >&2; exit 1; }
done

echo "building factory ..." >&2
(cd "$root" && go build -o "$tmp/factory" ./cmd/factory)

# ---------------------------------------------------------------------------
# A: the yardstick. Usage: yardstick.sh REPO VERIFY WODIR...
# Each WODIR holds files/ (the files the work order writes, at their paths)
# and acceptance (its commands, one per line). Commands run as floor.sh runs
# its own: `(cd REPO && CMD)`, word-split, no extra shell.
cat >"$tmp/yardstick.sh" <<'EOF'
#!/usr/bin/env bash
set -e
shopt -s globstar dotglob nullglob
repo=$1; verify=$2; shift 2
if [ ! -d "$repo" ]; then  # what a build does for a --repo that does not exist
  git init -q -b main "$repo" && git -C "$repo" commit -q --allow-empty -m init
fi
git -C "$repo" checkout -q -b bench-floor
n=0
for wo in "$@"; do
  n=$((n+1))
  files=()
  for p in "$wo"/files/**; do [ -f "$p" ] && files+=("${p#"$wo"/files/}"); done
  # floor.sh's pass path, for this work order's files and commands:
  git -C "$repo" rev-parse --is-inside-work-tree >/dev/null
  base=$(git -C "$repo" rev-parse HEAD)
  [ -z "$(git -C "$repo" status --porcelain --untracked-files=all)" ]
  git -C "$repo" ls-files -o -i --exclude-standard --directory >/dev/null
  for f in "${files[@]}"; do
    if [ -e "$repo/$f" ]; then sha256sum "$repo/$f" >/dev/null; fi
    dir=$repo/$f; dir=${dir%/*}
    [ -d "$dir" ] || mkdir -p "$dir"
    IFS= read -r -d '' content <"$wo/files/$f" || true
    printf '%s' "$content" > "$repo/$f.tmp" && sync "$repo/$f.tmp" && mv "$repo/$f.tmp" "$repo/$f"
  done
  (cd "$repo" && $verify)
  while IFS= read -r cmd; do (cd "$repo" && $cmd) >/dev/null 2>&1; done <"$wo/acceptance"
  git -C "$repo" add -- "${files[@]}" && git -C "$repo" write-tree >/dev/null
  # ... plus the commit a build makes:
  git -C "$repo" add -- "${files[@]}" && git -C "$repo" commit -q -m "factory: WO-$n"
done
EOF

# Scenario descriptions for the timing loop (one JSON object per line).
: >"$tmp/scenarios.jsonl"

# ---------------------------------------------------------------------------
# Scenario repo: the 10,000-file repository.
if [[ " $SCENARIOS " == *" repo "* ]]; then
	identity bench bench@factory.invalid
	echo "making the $NFILES-file repository with $MKREPO ..." >&2
	repo=$tmp/repo
	bash "$MKREPO" "$repo" "$NFILES"
	# mkrepo.sh's commit of 10,000 loose objects starts git's automatic gc in
	# the background; left alone it races with whatever runs next (it rewrites
	# .git/info/refs and packed-refs, which factory reports as a command
	# changing git metadata) and adds noise. Let it finish, then pack, off the
	# clock, as a real repository is.
	# The background gc may start after the commit returns: retry while it runs.
	for _ in $(seq 1200); do git -C "$repo" gc -q 2>/dev/null && break; sleep 0.1; done
	git -C "$repo" gc -q
	git -C "$repo" status --porcelain >/dev/null # settle racily-clean index entries
	base_branch=$(git -C "$repo" symbolic-ref --short HEAD)
	base_commit=$(git -C "$repo" rev-parse HEAD)
	files=()
	for i in $(seq 1 "$K"); do files+=("src/f$(printf %05d "$i").py"); done

	# The plan (factory plan's layout) and the yardstick's work order dirs.
	plan=$tmp/plan
	"$py" - "$plan" "$tmp/wo-repo" "${files[@]}" <<'EOF'
import json, os, sys
plan, wodirs, files = sys.argv[1], sys.argv[2], sys.argv[3:]
cond = lambda kind, path: {"kind": kind, "path": path}
os.makedirs(plan)
wos = []
for i, f in enumerate(files, 1):
    wo = {"id": f"WO-{i:02d}", "title": f"overwrite {f}", "intent": f"Overwrite {f} with x = 2.",
          "preconditions": [cond("file_exists", f)], "postconditions": [cond("file_exists", f)],
          "allowed_files": [f], "forbidden": [], "acceptance_commands": ["true"], "context_files": [f]}
    wos.append(wo)
    json.dump(wo, open(os.path.join(plan, wo["id"] + ".json"), "w"), indent=2)
    d = os.path.join(wodirs, wo["id"])
    os.makedirs(os.path.join(d, "files", os.path.dirname(f)))
    open(os.path.join(d, "files", f), "w").write("x = 2\n")
    open(os.path.join(d, "acceptance"), "w").write("true\n")
manifest = {"verify_contract": {"command": "bash scripts/verify.sh",
                                "requires": [cond("file_exists", "scripts/verify.sh")]},
            "work_orders": wos}
json.dump(manifest, open(os.path.join(plan, "WORK_ORDERS_MANIFEST.json"), "w"), indent=2)
EOF

	# Record one transcript for the whole build against a scripted server:
	# each request names its work order's file; the answer overwrites it.
	cat >"$tmp/server.py" <<'EOF'
import hashlib, json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
repo, files = sys.argv[2], sys.argv[3:]
sha = {f: hashlib.sha256(open(f"{repo}/{f}", "rb").read()).hexdigest() for f in files}
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        hits = [f for f in files if f in json.dumps(req["messages"])]
        if len(hits) != 1:
            self.send_error(400, f"request names {hits}, want exactly one work order file"); return
        proposal = json.dumps({"summary": "overwrite one file",
            "writes": [{"path": hits[0], "base_sha256": sha[hits[0]], "content": "x = 2\n"}]})
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
	"$py" "$tmp/server.py" "$tmp/port" "$repo" "${files[@]}" &
	server=$!
	for _ in $(seq 200); do [ -s "$tmp/port" ] && break; sleep 0.05; done
	set +e
	OPENAI_API_KEY=bench "$tmp/factory" build --plan "$plan" --repo "$repo" --out "$tmp/rec-out" \
		--branch bench-build --llm-model bench --max-attempts 1 \
		--llm-base-url "http://127.0.0.1:$(cat "$tmp/port")/v1" --record "$tmp/transcript.jsonl" >"$tmp/rec.log" 2>&1
	code=$?
	set -e
	kill "$server"; wait "$server" 2>/dev/null || true
	[ "$code" = 0 ] || { cat "$tmp/rec.log" >&2; echo "recording build exited $code, want 0" >&2; exit 1; }
	rm -rf "$tmp/rec-out"
	# Back to the base state (the timing loop does the same before every run).
	git -C "$repo" checkout -q -f "$base_branch" && git -C "$repo" branch -q -D bench-build
	git -C "$repo" reset -q --hard "$base_commit" && git -C "$repo" clean -fdq

	"$py" - "$tmp" "$repo" "$base_branch" "$base_commit" "$K" >>"$tmp/scenarios.jsonl" <<'EOF'
import json, os, sys
tmp, repo, base_branch, base_commit, k = sys.argv[1:]
wos = sorted(os.path.join(tmp, "wo-repo", d) for d in os.listdir(os.path.join(tmp, "wo-repo")))
print(json.dumps({
    "name": f"repo ({sum(1 for _ in os.scandir(os.path.join(repo, 'src')))} files)", "k": int(k),
    "repo": repo, "reset": "git", "base_branch": base_branch, "base_commit": base_commit,
    "env": {k: v for k, v in os.environ.items() if k.startswith("GIT_")},
    "a": ["bash", os.path.join(tmp, "yardstick.sh"), repo, "bash scripts/verify.sh", *wos],
    "b": [os.path.join(tmp, "factory"), "build", "-q", "--plan", os.path.join(tmp, "plan"), "--repo", repo,
          "--out", "{out}", "--branch", "bench-build", "--llm-model", "bench", "--max-attempts", "1",
          "--replay", os.path.join(tmp, "transcript.jsonl")]}))
EOF
fi

# ---------------------------------------------------------------------------
# Scenario example: examples/build.sh's build, timed as the factory command
# alone (not the go build or the project's test run build.sh adds).
ex=$root/examples/textstats
if [[ " $SCENARIOS " == *" example "* ]]; then
	if [ ! -f "$root/examples/build.sh" ] || [ ! -f "$ex/answers/plan.json" ]; then
		echo "no examples/build.sh or examples/textstats/answers/plan.json: skipping the example scenario" >&2
	else
		grep -qF -- '--llm-model example-scripted-model --no-review --python python3' "$root/examples/build.sh" ||
			{ echo "examples/build.sh's factory build command changed; update the example scenario in $0" >&2; exit 1; }
		identity Example example@factory.invalid
		"$py" - "$tmp" "$ex" >>"$tmp/scenarios.jsonl" <<'EOF'
import json, os, shutil, sys
tmp, ex = sys.argv[1:]
plan = json.load(open(os.path.join(ex, "answers", "plan.json")))
wos = []
for wo in plan["work_orders"]:
    d = os.path.join(tmp, "wo-example", wo["id"])
    shutil.copytree(os.path.join(ex, "answers", wo["id"]), os.path.join(d, "files"))
    open(os.path.join(d, "acceptance"), "w").write("".join(c + "\n" for c in wo["acceptance_commands"]))
    wos.append(d)
repo = os.path.join(tmp, "example-repo")
print(json.dumps({
    "name": "example (textstats)", "k": len(wos), "repo": repo, "reset": "fresh",
    "env": {k: v for k, v in os.environ.items() if k.startswith("GIT_")},
    "a": ["bash", os.path.join(tmp, "yardstick.sh"), repo, plan["verify_contract"]["command"], *wos],
    "b": [os.path.join(tmp, "factory"), "build", "-q", "--spec", os.path.join(ex, "spec.md"), "--repo", repo,
          "--out", "{out}", "--llm-model", "example-scripted-model", "--no-review", "--python", "python3",
          "--replay", os.path.join(ex, "transcript.jsonl")]}))
EOF
	fi
fi

# ---------------------------------------------------------------------------
# Write back, off the clock, what making the repositories dirtied (10,000 files, packs): left to the
# kernel, the writeback lands some 30 s later, in the first rows timed, and slows factory's
# parallel stat more than the single-threaded floor.
sync
echo "timing: $PAIRS pairs A B per scenario; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$py" - "$tmp" "$PAIRS" "${STRACE:-}" ${BUILD_FLAGS:-} <<'EOF'
import collections, glob, json, os, re, shutil, statistics, subprocess, sys, time
from datetime import datetime
tmp, pairs, want_strace, build_flags = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4:]
DEVNULL = subprocess.DEVNULL
med = statistics.median

def git(sc, *a):
    return subprocess.run(["git", "-C", sc["repo"], *a], check=True, capture_output=True, text=True,
                          env={**os.environ, **sc["env"]}).stdout

def reset(sc):
    """Back to exactly the state every run starts from, off the clock."""
    if sc["reset"] == "fresh":
        shutil.rmtree(sc["repo"], ignore_errors=True)
    else:
        git(sc, "checkout", "-q", "-f", sc["base_branch"])
        for b in git(sc, "for-each-ref", "--format=%(refname:short)", "refs/heads/").split():
            if b != sc["base_branch"]:
                git(sc, "branch", "-q", "-D", b)
        git(sc, "reset", "-q", "--hard", sc["base_commit"])
        git(sc, "clean", "-fdq")
        if st := git(sc, "status", "--porcelain", "--untracked-files=all"):
            sys.exit("repository not clean after reset:\n" + st)
    shutil.rmtree(os.path.join(tmp, "out"), ignore_errors=True)

def check_built(sc):
    """Exactly one new commit per work order on the checked-out branch."""
    since = "HEAD" if sc["reset"] == "fresh" else sc["base_commit"] + "..HEAD"
    n = int(git(sc, "rev-list", "--count", since)) - (1 if sc["reset"] == "fresh" else 0)
    if n != sc["k"] or git(sc, "status", "--porcelain"):
        sys.exit(f"{sc['name']}: {n} commits (want {sc['k']}) or a dirty tree after a run")

def argv(sc, side):
    return [x.replace("{out}", os.path.join(tmp, "out")) for x in sc[side]] + (build_flags if side == "b" else [])

def timed(sc, side, prefix=()):
    env = {**os.environ, **sc["env"]}
    w0, t0 = time.time_ns(), time.monotonic_ns()
    p = subprocess.run([*prefix, *argv(sc, side)], stdin=DEVNULL, stdout=DEVNULL, stderr=subprocess.PIPE, env=env)
    dt, w1 = (time.monotonic_ns() - t0) / 1e6, time.time_ns()
    if p.returncode != 0:
        sys.exit(f"{sc['name']} {side}: exited {p.returncode}\n{p.stderr.decode()}")
    check_built(sc)
    return dt, w0 / 1e6, w1 / 1e6

def ts(s):  # RFC 3339 with nanoseconds -> ms since the epoch
    head, _, frac = s.rstrip("Z").partition(".")
    return int(datetime.fromisoformat(head + "+00:00").timestamp()) * 1e3 + int(frac.ljust(9, "0")[:9]) / 1e6

PER = ["preflight (baseline, journal)", "se node (model: replay)", "tr node (write)", "po node: commands",
       "po node: harness", "finalize node (tree hash, audit)", "between nodes",
       "commit + cleanup + dirty check"]

def breakdown(wall, w0, w1):
    """Split one build's wall time (ms) with its events.jsonl and run summaries."""
    [bdir] = glob.glob(os.path.join(tmp, "out", "builds", "*"))
    ev = [json.loads(l) for l in open(os.path.join(bdir, "events.jsonl"))]
    t = lambda e: ts(e["ts"])
    first = lambda name: t(next(e for e in ev if e["event"] == name))
    last_wo_end = t([e for e in ev if e["event"] == "wo_end"][-1])
    seg = {"startup + exit (process, checks, lock, summary)": first("build_start") - w0 + w1 - first("build_end"),
           "plan (load or replayed compile, validate)": first("plan") - first("build_start"),
           "branch + progress from trailers": first("wo_start") - first("plan"),
           "after the last work order": first("build_end") - last_wo_end}
    per = dict.fromkeys(PER, 0.0)
    model = cmds = 0.0
    for wo in dict.fromkeys(e["wo"] for e in ev if e["event"] == "wo_start"):
        mine = [e for e in ev if e.get("wo") == wo]
        nodes = [e for e in mine if e["event"] == "node"]
        start = t(next(e for e in mine if e["event"] == "wo_start"))
        end = t(next(e for e in mine if e["event"] == "wo_end"))
        [summ] = glob.glob(os.path.join(bdir, wo, "*", "run_summary.json"))
        c = sum(r["duration_seconds"] * 1e3 for a in json.load(open(summ))["attempts"]
                for r in a.get("verify", []) + a.get("acceptance", []))
        cmds += c
        per["preflight (baseline, journal)"] += t(nodes[0]) - nodes[0]["duration_ms"] - start
        for prev, n in zip(nodes, nodes[1:]):
            per["between nodes"] += t(n) - n["duration_ms"] - t(prev)
        for n in nodes:
            d = n["duration_ms"]
            if n["node"] == "se":
                per["se node (model: replay)"] += d; model += d
            elif n["node"] == "tr":
                per["tr node (write)"] += d
            elif n["node"] == "po":
                per["po node: commands"] += c; per["po node: harness"] += d - c
            else:
                per["finalize node (tree hash, audit)"] += d
        per["commit + cleanup + dirty check"] += end - t(nodes[-1])
    seg.update(per)
    seg["unaccounted"] = wall - sum(seg.values())
    return seg, model, cmds

report = []
scenarios = [json.loads(l) for l in open(os.path.join(tmp, "scenarios.jsonl"))]
for sc in scenarios:
    K = sc["k"]
    reset(sc)
    for side in ("a", "b"):  # one untimed warm-up of each side (page cache, index refresh)
        timed(sc, side); reset(sc)
    A, B, segs, model, cmds, loads = [], [], [], [], [], []
    for i in range(pairs):
        loads.append(os.getloadavg()[0])
        A.append(timed(sc, "a")[0]); reset(sc)
        dt, w0, w1 = timed(sc, "b"); B.append(dt)
        s, m, c = breakdown(dt, w0, w1); segs.append(s); model.append(m); cmds.append(c)
        reset(sc)
    loads.append(os.getloadavg()[0])
    ma, mb = med(A), med(B)
    r = [y / x for x, y in zip(A, B)]
    harness = [(y - m - c) / K for y, m, c in zip(B, model, cmds)]
    print(f"== {sc['name']}{' ' + ' '.join(build_flags) if build_flags else ''}: K={K} work orders, {pairs} pairs A B; "
          f"load average (1 min) during the pairs {min(loads):.1f}..{max(loads):.1f}")
    print(f"   {'':<28} {'whole run ms':>12} {'per WO ms':>10}")
    print(f"   {'A yardstick (floor+commit)':<28} {ma:>12.1f} {ma/K:>10.1f}")
    print(f"   {'B factory build':<28} {mb:>12.1f} {mb/K:>10.1f}")
    print(f"   B/A of the medians {mb/ma:.2f}x; per pair: median {med(r):.2f}x, min..max {min(r):.2f}..{max(r):.2f}")
    d = [(y - x) / K for x, y in zip(A, B)]
    print(f"   B-A per WO: median {med(d):.1f} ms, min..max {min(d):.1f}..{max(d):.1f}")
    print(f"   A: {' '.join(f'{x:.0f}' for x in A)}")
    print(f"   B: {' '.join(f'{x:.0f}' for x in B)}")
    print(f"   B per WO (medians): model (se node) {med(model)/K:.1f} ms, commands (verify+acceptance) "
          f"{med(cmds)/K:.1f} ms, harness only (B - model - commands) {med(harness):.1f} ms "
          f"({min(harness):.1f}..{max(harness):.1f})")
    print(f"   B broken down, ms (median over the pairs of each row; rows below the line are per WO):")
    for k in segs[0]:
        if k == PER[0]:
            print("   " + "-" * 60)
        v = med([s[k] for s in segs])
        print(f"     {k:<52} {v / K if k in PER else v:>7.1f}")
    report.append((sc["name"], K, ma / K, mb / K, mb / ma, min(r), max(r), med(d), med(harness), min(loads), max(loads)))

print("\nsummary (per work order, medians of the pairs):")
print("| scenario | K | yardstick ms/WO | build ms/WO | build/yardstick (per pair min..max) | build - yardstick ms/WO | build harness-only ms/WO | load |")
print("|---|---|---|---|---|---|---|---|")
for name, K, a, b, ratio, lo, hi, dd, h, l0, l1 in report:
    print(f"| {name} | {K} | {a:.1f} | {b:.1f} | **{ratio:.2f}×** ({lo:.2f}..{hi:.2f}) | {dd:.1f} | {h:.1f} | {l0:.1f}–{l1:.1f} |")

if not want_strace:
    sys.exit(0)
# One more run of each side under strace (slower: the counts matter, the
# times only relative to each other): processes, fsyncs and the wall time of
# each child program, git by subcommand, per work order.
execve = re.compile(r'^(\d+) +([\d.]+) execve\("([^"]*)", \[(.*?)\].*?(?:= (-?\d+)|<unfinished \.\.\.>)$')
resumed = re.compile(r'^(\d+) +[\d.]+ <\.\.\. execve resumed>.*= (-?\d+)')
sync = re.compile(r'^\d+ +[\d.]+ f(?:data)?sync\(')
syncfs = re.compile(r'^\d+ +[\d.]+ syncfs\(')
exited = re.compile(r'^(\d+) +([\d.]+) \+\+\+ (?:exited|killed)')
for sc in scenarios:
    K = sc["k"]
    for side in ("a", "b"):
        trace = os.path.join(tmp, f"strace-{side}.txt")
        reset(sc)
        timed(sc, side, ["strace", "-f", "--seccomp-bpf", "-q", "-ttt", "-e", "trace=execve,fsync,fdatasync,syncfs", "-o", trace])
        reset(sc)
        start, prog, end, pending, syncs, fss = {}, {}, {}, {}, 0, 0
        lines = open(trace).read().splitlines()
        root = lines[0].split()[0]  # the process being measured
        for l in lines:
            if m := execve.match(l):
                pid, t = m.group(1), float(m.group(2))
                args = re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(4))
                name = m.group(3).rsplit("/", 1)[-1]
                if name == "git":
                    rest, i = args[1:], 0
                    while i < len(rest) and rest[i].startswith("-"):
                        i += 2 if rest[i] in ("-c", "-C") else 1
                    name = "git " + (rest[i] if i < len(rest) else "?")
                if m.group(5) is None:
                    pending[pid] = (t, name)
                elif m.group(5) == "0":
                    start.setdefault(pid, t); prog[pid] = name  # the last image a pid runs names it
            elif m := resumed.match(l):
                if m.group(2) == "0" and m.group(1) in pending:
                    t, name = pending[m.group(1)]
                    start.setdefault(m.group(1), t); prog[m.group(1)] = name
                pending.pop(m.group(1), None)
            elif sync.match(l):
                syncs += 1
            elif syncfs.match(l):
                fss += 1
            elif m := exited.match(l):
                end[m.group(1)] = float(m.group(2))
        by = collections.defaultdict(lambda: [0, 0.0])
        for pid, name in prog.items():
            if pid in end and pid != root:
                by[name][0] += 1; by[name][1] += (end[pid] - start[pid]) * 1e3
        gits = sum(c for n, (c, _) in by.items() if n.startswith("git "))
        who = "A yardstick" if side == "a" else "B factory build"
        print(f"\n{sc['name']} {who} under strace, per WO (whole run / K): {gits / K:.1f} git processes, "
              f"{sum(c for c, _ in by.values()) / K:.1f} execs, {syncs / K:.1f} fsyncs, {fss / K:.1f} syncfs; "
              f"wall {(end[root] - start[root]) * 1e3 / K:.1f} ms/WO")
        for name, (c, ms) in sorted(by.items(), key=lambda kv: -kv[1][1]):
            print(f"    {name:<24} {c / K:>5.1f}/WO {ms / K:>8.1f} ms/WO")
EOF
