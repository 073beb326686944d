#!/usr/bin/env bash
# Runs the bundled example offline: copies example/repo into a fresh git repo
# (fixed identity and dates, so the baseline commit and run id are the same on
# every machine) and runs work_order.json against it, answering the model
# request from transcript.jsonl. No network and no API key are needed.
#
# The transcript was WRITTEN FOR THIS EXAMPLE, not produced by a real model:
# see example/README.md. Set EXAMPLE_RECORD_BASE_URL to re-record it against
# a (scripted) OpenAI-compatible server instead of replaying. Arguments are
# passed on to `factory run` (e.g. --sandbox required).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/factory-example.XXXXXX")

factory=${FACTORY:-}
if [ -z "$factory" ]; then
  if command -v factory >/dev/null 2>&1; then
    factory=factory
  else
    echo "building factory into $work/factory ..." >&2
    (cd "$here/.." && go build -buildvcs=auto -o "$work/factory" ./cmd/factory)
    factory=$work/factory
  fi
fi

export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=Example GIT_AUTHOR_EMAIL=example@factory.invalid GIT_AUTHOR_DATE=2001-01-01T00:00:00Z
export GIT_COMMITTER_NAME=Example GIT_COMMITTER_EMAIL=example@factory.invalid GIT_COMMITTER_DATE=2001-01-01T00:00:00Z
cp -R "$here/repo" "$work/repo"
git -C "$work/repo" init -q -b main
git -C "$work/repo" add -A
git -C "$work/repo" commit -q -m "example baseline"

model=(--replay "$here/transcript.jsonl")
if [ -n "${EXAMPLE_RECORD_BASE_URL:-}" ]; then
  rm -f "$here/transcript.jsonl"
  model=(--record "$here/transcript.jsonl" --llm-base-url "$EXAMPLE_RECORD_BASE_URL")
fi

set +e
"$factory" run --repo "$work/repo" --work-order "$here/work_order.json" --out "$work/out" \
  --llm-model example-scripted-model --python python3 "${model[@]}" "$@"
code=$?
set -e
echo
echo "repository after the run (changes are left uncommitted on PASS):"
git -C "$work/repo" status --short
echo "artifacts: $work/out"
exit $code
