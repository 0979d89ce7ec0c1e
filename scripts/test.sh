#!/usr/bin/env bash
# Sets everything up, then runs what CI runs: lint, format check, types, import contracts, and
# the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
# the layering as code: pyproject.toml's [tool.importlinter] contracts (no cache dir in the tree)
.venv/bin/lint-imports --no-cache --no-logo
.venv/bin/python -m pytest "$@"
