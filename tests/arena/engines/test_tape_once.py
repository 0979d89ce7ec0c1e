"""The straight data path: one tape load per process, one plan per cohort.

``arena replay`` used to load the tape up to three times in the driver and plan every cohort
twice (once to find the starts with something to decide, again in the runner). Counted here at
the two places that do the work: the columnar tape reader, and the schedule builder.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import replays.tapefile
from arena.run import plan as planning
from tests.conftest import Arena

RANGE = "2024-09-01..2024-09-29"  # five Sundays of the embedded sample, each with a universe
AGENTS = ("--agent", "fav=favourite", "--agent", "idle=hold")


def counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """Replace ``module.name`` by a wrapper that counts its calls (the list's length)."""
    calls: list[int] = []
    real: Callable[..., Any] = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


@pytest.mark.parametrize(
    "command",
    [
        ("replay", "--starts", RANGE, *AGENTS),
        ("backtest", "favourite", "--against", "hold", "--starts", RANGE),
        ("sweep", "favourite", "--grid", "stake=100,200", "--against", "hold", "--starts", RANGE),
    ],
    ids=["replay", "backtest", "sweep"],
)
def test_a_run_in_one_process_loads_the_tape_once_and_plans_each_start_once(
    arena: Arena, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    loads = counting(monkeypatch, replays.tapefile, "_read_columnar")
    schedules = counting(monkeypatch, planning, "build_schedule")
    result = arena(*command, "--db", tmp_path / "run.db", "--jobs", "1", "--json")
    assert result.exit_code == 0, result.output
    assert len(loads) == 1
    # five starts, each planned once: a sweep's cohorts of one start share its plan
    assert len(schedules) == 5
