"""``arena report`` and ``arena lab`` load numpy with one BLAS thread unless the user set it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from arena.blas import THREAD_VARIABLES

PROBE = (
    "import sys, os; import {module}; "
    "print(os.environ.get('OPENBLAS_NUM_THREADS'), 'numpy' in sys.modules)"
)


@pytest.mark.parametrize("module", ["arena.commands.report", "arena.forecasting.lab"])
def test_the_command_loads_numpy_with_one_blas_thread(module: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)],
        env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert out.split()[0] == "1"


def test_a_thread_count_the_user_set_is_kept() -> None:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(module="arena.commands.report")],
        env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert out.split()[0] == "2"  # numpy itself loads later, when a report bootstraps
