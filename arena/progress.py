"""Progress on long work, shown on a terminal and nowhere else.

A replay of LLM agents runs for minutes to hours; a backtest, a sweep, an import or a training
run for minutes. On a terminal each shows a bar with what is done, the time so far and an
estimate of the time left (rich's progress, on stderr), and, for slow decisions, a line each
above the bar: the cohort's start where the work has more than one cohort (two workers' lines
of one week were otherwise the same), the agent, the week, its model calls, its seconds and the
failure seen most often so far by that agent, so a run whose every prompt is refused says why
in its first minute, not when it ends. Under ``--json``, or when stdout or stderr is not a
terminal (a pipe, a CI log, a test), nothing is shown: the output is the result alone.

This module knows nothing of runs: a decision is anything with the fields of ``Seen`` (the
runner's ``arena.run.pace.DecisionSeen``), so every layer may use it.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from arena.console import make_console

ECHOED = 2
"""Columns the display leaves free at the right: a Ctrl-C's ``^C``, echoed by the terminal
after a bar as wide as the screen, wrapped it onto a line of its own, and the display, erasing
the lines it drew from there, left its top bar on the screen for good."""

SLOW = 1.0
"""A decision that took this many seconds or more gets a line of its own, as does any that
asked a model."""


class Seen(Protocol):
    """A decision as a run reports it (``arena.run.pace.DecisionSeen``)."""

    @property
    def start(self) -> str: ...
    @property
    def agent(self) -> str: ...
    @property
    def week(self) -> int: ...
    @property
    def seconds(self) -> float: ...
    @property
    def calls(self) -> int: ...
    @property
    def failures(self) -> tuple[str, ...]: ...


def on_a_terminal(*, as_json: bool = False) -> bool:
    """Whether progress may be shown: not under ``--json``, and both streams a terminal."""
    return not as_json and sys.stdout.isatty() and sys.stderr.isatty()


class Work:
    """One piece of long work on a terminal: a bar of ``total`` items (cohorts, files,
    epochs) and, once decisions are reported, a bar of those too, each with an ETA."""

    def __init__(
        self, progress: Progress, unit: str, total: int, decisions: int, shown: bool
    ) -> None:
        self.progress = progress
        self.shown = shown
        self.task = progress.add_task(unit, total=total)
        self._cohorts = total > 1  # a decision's line names its cohort
        self._decisions = decisions
        self._decided: TaskID | None = None
        self._failed: dict[str, Counter[str]] = {}

    @property
    def watcher(self) -> Callable[[Seen], None] | None:
        """``decided`` when the work is shown, else None: a run nobody watches is asked for no
        decisions at all (its workers send none, so nothing is paid for them)."""
        return self.decided if self.shown else None

    def advance(self, *_: object) -> None:
        """One item done (usable as an ``on_done`` callback: its argument is ignored)."""
        self.progress.advance(self.task)

    def decided(self, seen: Seen) -> None:
        """A decision made: counted, and a line of its own when it was slow or asked a model."""
        if self._decisions:
            if self._decided is None:
                self._decided = self.progress.add_task("decisions", total=self._decisions)
            self.progress.advance(self._decided)
        failed = self._failed.setdefault(seen.agent, Counter())
        failed.update(seen.failures)
        if self.shown and (seen.calls or seen.seconds >= SLOW):
            line = decision_line(seen, failed, cohort=self._cohorts)
            self.progress.console.print(line, highlight=False)


def decision_line(seen: Seen, failed: Counter[str], *, cohort: bool = False) -> str:
    """``[start] agent · week · calls · seconds · the most common failure so far (how
    often)``; the cohort's start with ``cohort``."""
    line = (
        f"[bold]{escape(seen.agent)}[/] week {seen.week} · {seen.calls} call(s) · "
        f"{seen.seconds:.1f} s"
    )
    if cohort:
        line = f"{escape(seen.start)} {line}"
    if failed:
        reason, count = failed.most_common(1)[0]
        line += f" · [yellow]most common failure: {escape(reason)} ({count})[/]"
    return line


@contextmanager
def progress_of(
    what: str,
    total: int,
    *,
    unit: str = "cohorts",
    shown: bool,
    decisions: int = 0,
    console: Console | None = None,
) -> Iterator[Work]:
    """A bar for ``what`` (``replaying``, ``importing``...) over ``total`` ``unit``, on stderr,
    gone when the work ends; ``decisions``: how many decisions the work will make, for a bar
    of them once the first is reported. Not ``shown``, nothing is drawn (``on_a_terminal``).
    ``console``: where to draw instead of stderr (a test's)."""
    if console is None:
        console = make_console(stderr=True)
        console.width = max(console.width - ECHOED, 1)
    progress = Progress(
        TextColumn(f"[bold]{escape(what)}"),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not shown,
    )
    with progress:
        yield Work(progress, unit, total, decisions, shown)
