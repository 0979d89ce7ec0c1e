#!/usr/bin/env bash
# Sets up what a replay needs (arena and its core dependencies), then replays the embedded 2024
# election sample with the built-in agents.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh core
.venv/bin/arena replay "$@"
