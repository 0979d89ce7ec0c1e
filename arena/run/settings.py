"""The settings of a run, from the command line (or a Python caller) to the worker that runs it.

Two kinds of setting, kept apart because only one of them may change the log:

- ``arena.run.cohort.CohortConfig``: *what* a cohort is (start, agents, universe, cash, rules,
  cadences, seed). Its hash, with the tape's, is the cohort id, so the same settings give the
  same id and the same log from the CLI and from Python alike.
- :class:`RunOptions`: *how* cohorts run (the per-decision time limit, agents in worker
  processes, how often events are committed, how many cohorts at once, on which engine).
  None of them enters a cohort id: an honest agent logs the same bytes whatever they are.

:class:`RunSettings` carries one cohort's pair to ``arena.run.runner.CohortRunner``, whole, in this
process or in a spawned worker. Every default lives on these models, once; the CLI's options
read theirs from here (``arena.commands.options``).

pydantic rather than msgspec: ``CohortConfig`` is already a pydantic model (its
``model_dump`` is what the cohort id hashes, so it must not change shape), its validators give
field-named errors that the CLI turns into one line, and the options cross a process boundary
only once per cohort, where pickling speed does not matter.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Literal

import pydantic

from arena.errors import ArenaError
from arena.run.cohort import CohortConfig

DECISION_TIMEOUT = 300.0
"""Long enough for an LLM agent's call with its retries, short enough that a hung plugin
costs minutes, not the run."""


MAX_DECISION_TIMEOUT = 7 * 86_400.0
"""A week: past the longest wait anyone means, and inside what the time limit's timer takes
(``--timeout inf`` or ``1e308`` overflowed it, and every agent sat the cohort out)."""


COMMIT_EVERY = 2.0
"""A model-backed agent's decision takes longer than this, so each is committed as it is made;
a fast run commits every two seconds, a few transactions more than its batches."""


class SettingsError(ArenaError, ValueError):
    """Cohort settings that do not validate; the message names the field, on one line."""


class RunOptions(pydantic.BaseModel):
    """How a run's cohorts are run; never part of a cohort id."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    decision_timeout: float = pydantic.Field(
        default=DECISION_TIMEOUT,
        ge=0,
        le=MAX_DECISION_TIMEOUT,
        description="seconds a strategy may take per decision before it is recorded as an "
        "error and HOLD (0: no limit; at most a week)",
    )
    isolate: bool = pydantic.Field(
        default=False,
        description="run each agent's code in a worker process of its own (for plugins you do "
        "not trust; the same log for honest ones, slower per decision)",
    )
    commit_every: float = pydantic.Field(
        default=COMMIT_EVERY,
        ge=0,
        allow_inf_nan=False,
        description="seconds of wall clock a run's events may wait before they are committed "
        "to the log (0: after every decision); a killed run resumes from what was committed",
    )
    jobs: int = pydantic.Field(
        default=0, ge=0, description="cohorts replayed at once (0: one per CPU core)"
    )
    engine: Literal["local", "ray"] = pydantic.Field(
        default="local",
        description="where cohorts run: this machine's cores, or a Ray cluster (arena[ray]); "
        "the log, its digest and head are the same either way",
    )
    address: str | None = pydantic.Field(
        default=None,
        description="the Ray cluster to join (auto: the one 'ray start' left here); unset, a "
        "local Ray instance is started for the run",
    )

    @pydantic.field_validator("address")
    @classmethod
    def _address_for_ray(cls, value: str | None, info: pydantic.ValidationInfo) -> str | None:
        if value and info.data.get("engine") != "ray":
            raise ValueError("only with --engine ray")
        return value

    def workers(self, cohorts: int) -> int:
        """Worker processes for ``cohorts`` cohorts: ``jobs``, or one per core, never more
        than there are cohorts."""
        return max(1, min(cohorts, self.jobs or os.cpu_count() or 1))


DEFAULT_OPTIONS = RunOptions()


class RunSettings(pydantic.BaseModel):
    """One cohort as a worker runs it: what it is, and how it is run."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    cohort: CohortConfig
    options: RunOptions = DEFAULT_OPTIONS
    journal: str | None = None
    """A folder where a worker keeps what its cohort committed until the driver appends the
    cohort to the log (``arena.engines.recorded``); None: in memory only."""


def cohort_configs(
    starts: Sequence[datetime], agents: dict[str, str], **settings: Any
) -> list[CohortConfig]:
    """One ``CohortConfig`` per start with the same ``agents`` and ``settings``; settings that
    do not validate are one :class:`SettingsError` naming each field."""
    with _one_line():
        return [CohortConfig(start=start, agents=agents, **settings) for start in starts]


def run_options(**values: Any) -> RunOptions:
    """``RunOptions(**values)``; values that do not validate are one :class:`SettingsError`."""
    with _one_line():
        return RunOptions(**values)


@contextmanager
def _one_line() -> Iterator[None]:
    from strategies.loader import validation_summary

    try:
        yield
    except pydantic.ValidationError as exc:
        raise SettingsError(validation_summary(exc)) from None
