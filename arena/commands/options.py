"""Options shared by the commands that run cohorts (``replay`` and ``backtest``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])

DECISION_TIMEOUT = 300.0
"""Long enough for an LLM agent's call with its retries, short enough that a hung plugin
costs minutes, not the run."""


def _on_miss(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """``--on-miss`` sets ``ARENA_LLM_ON_MISS``, which the model connection reads in every
    worker (see ``strategies.llm.connection``)."""
    if value is not None:
        os.environ["ARENA_LLM_ON_MISS"] = value


_COHORT_OPTIONS = (
    click.option("--tape", "tape_path", type=click.Path(dir_okay=False, path_type=Path),
                 help="Tape file (default: the embedded 2024 election sample)."),
    click.option("--rules", type=click.Choice(["v1", "v2"]), default="v1", show_default=True,
                 help="Betting rules: v1 caps each bet, v2 a decision's total (all or none)."),
    click.option("--cash", type=float, default=10_000.0, show_default=True,
                 help="Starting cash of every agent."),
    click.option("--universe", type=int, default=500, show_default=True,
                 help="Top N markets by volume open at the start."),
    click.option("--decisions", "decision_cadence", default="weekly", show_default=True,
                 help="Decision cadence: weekly, daily, hourly, tick, or e.g. 6h."),
    click.option("--marks", "mark_cadence", default="daily", show_default=True,
                 help="Mark cadence (snapshots, equity curves): weekly, daily, hourly, tick, 6h…"),
    click.option("--seed", type=int, default=0, show_default=True,
                 help="Seed of every agent's random generator."),
    click.option("--jobs", type=int, default=0,
                 help="Worker processes (default: CPU cores)."),
    click.option("--timeout", "decision_timeout", type=float, default=DECISION_TIMEOUT,
                 show_default=True,
                 help="Seconds a strategy may take per decision before it is recorded as an "
                      "error and HOLD (0: no limit)."),
    click.option("--on-miss", type=click.Choice(["error", "hold"]), expose_value=False,
                 callback=_on_miss,
                 help="A model question missing from a replay's cassette: stop the run with "
                      "an error (default), or HOLD as before. Sets ARENA_LLM_ON_MISS."),
    click.option("--isolate", is_flag=True,
                 help="Run each agent's code in a worker process of its own (for plugins you "
                      "do not trust; the same log for honest ones, slower per decision)."),
)  # fmt: skip


def cohort_options(command: F) -> F:
    """Add the cohort settings (tape, rules, cash, universe, cadences, seed, jobs, timeout,
    isolation)."""
    for option in reversed(_COHORT_OPTIONS):
        command = option(command)
    return command
