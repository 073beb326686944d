#!/usr/bin/env bash
# The project's own checks: byte-compile, then its unit tests.
set -euo pipefail
python3 -m compileall -q .
python3 -m unittest discover -s tests -t .
