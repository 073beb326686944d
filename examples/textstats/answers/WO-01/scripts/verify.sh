#!/usr/bin/env bash
# The project's whole check: every module byte-compiles, then every test passes.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m compileall -q textstats tests
python3 -m unittest discover -s tests -t .
