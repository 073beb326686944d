#!/usr/bin/env bash
# Builds the textstats example offline with one command: factory build turns
# textstats/spec.md into a fresh git repository, one commit per work order,
# answering the planner and every work order from textstats/transcript.jsonl.
# No network and no API key are needed. Fixed identity and dates make the
# commit hashes the same on every machine.
#
# The transcript was WRITTEN FOR THIS EXAMPLE, not produced by a real model:
# see examples/README.md. Set EXAMPLE_RECORD_BASE_URL to re-record it against
# a (scripted) OpenAI-compatible server instead of replaying.
#
# Exit code: factory's; 0 only if the build passed and the built project's
# tests pass when run afterwards.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
example=$here/textstats
work=$(mktemp -d "${TMPDIR:-/tmp}/factory-build-example.XXXXXX")
repo=$work/repo # does not exist yet: factory build creates it
out=$work/out

# shellcheck source=lib.sh
. "$here/lib.sh"
example_factory build "$work"

model=(--replay "$example/transcript.jsonl")
if [ -n "${EXAMPLE_RECORD_BASE_URL:-}" ]; then
  rm -f "$example/transcript.jsonl"
  model=(--record "$example/transcript.jsonl" --llm-base-url "$EXAMPLE_RECORD_BASE_URL" --poll-interval 10ms)
fi

# --python and --no-review keep the prompts, and so the transcript, the same
# on every machine (the default interpreter depends on what is on PATH).
set +e
"$factory" build --spec "$example/spec.md" --repo "$repo" --out "$out" \
  --llm-model example-scripted-model --no-review --python python3 "${model[@]}"
code=$?
set -e

echo
echo "repository: $repo"
echo "artifacts:  $out"
if [ -d "$repo/.git" ]; then
  echo
  echo "commits on $(git -C "$repo" branch --show-current):"
  git -C "$repo" log --oneline
fi
if [ "$code" -ne 0 ]; then
  exit "$code"
fi
echo
echo "the built project's own tests:"
cd "$repo"
python3 -m unittest discover -s tests -t .
