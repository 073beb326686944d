#!/usr/bin/env bash
# Runs the example eval offline with one command: factory eval builds each of
# the six cases of eval/suite/ in a fresh repository, copies the case's hidden
# tests in after the build, runs the checks and prints the table. Every model
# answer comes from eval/transcripts/<case>/<model>/<run>.jsonl. No network and
# no API key are needed.
#
# The transcripts were WRITTEN FOR THIS EXAMPLE, not produced by a real model
# (see eval/README.md): four cases are solved, roman passes its own tests but
# not the hidden ones, and rle fails to build. Set EXAMPLE_RECORD_BASE_URL to
# re-record them against a (scripted) OpenAI-compatible server instead.
#
# Exit code: factory's (0 when the eval ran, whatever the solve rate).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
example=$here/eval
work=$(mktemp -d "${TMPDIR:-/tmp}/factory-eval-example.XXXXXX")
out=$work/out

factory=${FACTORY:-}
if [ -z "$factory" ]; then
  # A factory on PATH from before `factory eval` existed would fail.
  if command -v factory >/dev/null 2>&1 && factory eval --help >/dev/null 2>&1; then
    factory=factory
  else
    echo "building factory into $work/factory ..." >&2
    (cd "$here/.." && go build -o "$work/factory" ./cmd/factory)
    factory=$work/factory
  fi
fi

export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=Example GIT_AUTHOR_EMAIL=example@factory.invalid GIT_AUTHOR_DATE=2001-01-01T00:00:00Z
export GIT_COMMITTER_NAME=Example GIT_COMMITTER_EMAIL=example@factory.invalid GIT_COMMITTER_DATE=2001-01-01T00:00:00Z

model=(--replay "$example/transcripts")
if [ -n "${EXAMPLE_RECORD_BASE_URL:-}" ]; then
  rm -rf "$example/transcripts"
  model=(--record "$example/transcripts" --llm-base-url "$EXAMPLE_RECORD_BASE_URL" --poll-interval 10ms)
fi

# --python and --no-review keep the prompts, and so the transcripts, the same
# on every machine.
set +e
"$factory" eval --suite "$example/suite" --out "$out" --llm-model example-scripted-model \
  --no-review --python python3 -j 2 "${model[@]}"
code=$?
set -e
echo
echo "artifacts: $out"
exit "$code"
