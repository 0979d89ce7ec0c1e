#!/usr/bin/env bash
# Sets everything up, then replays the embedded 2024 election sample with the built-in agents.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/arena replay "$@"
