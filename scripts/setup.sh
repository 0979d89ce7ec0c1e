#!/usr/bin/env bash
# Creates .venv (Python >= 3.11) and installs arena with its development tools and the parquet
# extra (the tests write and read Parquet), from nothing; installs Chromium (Debian's package)
# when it is missing, for the tests that render reports.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev,parquet]'
if ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq chromium >/dev/null
  else
    echo "setup: chromium is missing and apt-get cannot install it here (needs apt-get as root); the HTML report tests need it" >&2
  fi
fi
