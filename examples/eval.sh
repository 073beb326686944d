#!/usr/bin/env bash
# Runs the example eval offline with one command: factory eval builds each of
# the ten cases of eval/suite/ (Python, Go, JavaScript, Rust, C++) in a fresh
# repository, copies the case's hidden tests in after the build, runs the
# checks and prints the table. Every model answer comes from
# eval/transcripts/<case>/<model>/<run>.jsonl. No network and no API key are
# needed; the toolchains are: python3, go, node with npm, cargo, make and c++.
#
# The transcripts were WRITTEN FOR THIS EXAMPLE, not produced by a real model
# (see eval/README.md): eight cases are solved, roman passes its own tests but
# not the hidden ones, and rle fails to build. Set EXAMPLE_RECORD_BASE_URL to
# re-record them against a (scripted) OpenAI-compatible server instead.
#
# Exit code: factory's (0 when the eval ran, whatever the solve rate).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
example=$here/eval
work=$(mktemp -d "${TMPDIR:-/tmp}/factory-eval-example.XXXXXX")
out=$work/out

# shellcheck source=lib.sh
. "$here/lib.sh"
example_factory eval "$work"

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
