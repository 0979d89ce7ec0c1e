"""Parallel replays: what the worker processes start with."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from arena.engines import BLAS_THREAD_VARIABLES, one_blas_thread_per_worker


def _environment_of_a_spawned_process(names: tuple[str, ...]) -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in names}


def test_workers_get_one_blas_thread_unless_the_user_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in BLAS_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's choice stands
    context = multiprocessing.get_context("spawn")
    with one_blas_thread_per_worker(), context.Pool(1) as pool:
        seen = pool.apply(_environment_of_a_spawned_process, (BLAS_THREAD_VARIABLES,))
    assert seen == {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "1"}
    # and this process's environment is as it was
    assert "OPENBLAS_NUM_THREADS" not in os.environ and "MKL_NUM_THREADS" not in os.environ
    assert os.environ["OMP_NUM_THREADS"] == "3"
