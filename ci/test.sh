#!/usr/bin/env bash
# The test command (README): every CPU test; GPU tests skip cleanly without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest -q tests "$@"
