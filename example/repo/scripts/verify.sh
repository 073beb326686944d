#!/usr/bin/env bash
# Global verification for the example repo, run by the factory as `bash scripts/verify.sh`.
set -euo pipefail
python3 -m compileall -q calc.py tests
python3 -m unittest discover -s tests -t . -q
