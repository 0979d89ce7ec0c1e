"""What every engine shares: the work of one run, the engine's contract, and its errors.

An engine takes the planned cohorts of a run and yields each one's recording as it finishes (in
any order); ``arena.engines.driver`` alone writes the log, in the cohorts' order, so the engine
changes how long a run takes and nothing it writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from arena.engines.recorded import RecordedCohort
from arena.errors import ArenaError
from arena.run.pace import Watcher
from arena.run.plan import PlannedCohort
from arena.run.settings import DEFAULT_OPTIONS, RunOptions, RunSettings
from replays.bookfile import load_books
from replays.books import Books
from replays.tape import Tape
from replays.tapefile import load_tape

Finished = tuple[int, Callable[[], RecordedCohort]]
"""A cohort that finished: its index among those asked for, and how to fetch its recording
(a Ray engine leaves it in the object store until the driver is ready to append it)."""


class EngineError(ArenaError, RuntimeError):
    """An engine that cannot start (Ray missing, a cluster address that does not answer)."""


@dataclass(frozen=True)
class TapeSource:
    """A tape (and the order books its orders meet, if any) loaded once in this process, and
    the files they came from: cohorts replayed here use ``tape`` and ``books``; a worker in
    another process loads the files once, for every cohort it runs."""

    path: Path
    tape: Tape
    books_path: Path | None = None
    books: Books | None = None

    @classmethod
    def load(cls, path: Path | str, books: Path | str | None = None) -> TapeSource:
        if books is None:
            return cls(Path(path), load_tape(path))
        return cls(Path(path), load_tape(path), Path(books), load_books(books))


@dataclass(frozen=True)
class CohortWork:
    """What every cohort of one run is replayed with, besides its config and plan."""

    source: TapeSource
    options: RunOptions = DEFAULT_OPTIONS
    journal: Path | None = None
    """Where workers keep what their slow cohorts committed (``arena.engines.recorded``): a
    folder every worker can reach (on a cluster, a path that exists on every node); a fast
    cohort runs without it where it does not exist."""

    def settings(self, cohort: PlannedCohort) -> RunSettings:
        journal = None if self.journal is None else str(self.journal)
        return RunSettings(cohort=cohort.config, options=self.options, journal=journal)


class Engine(Protocol):
    """Runs cohorts and yields each recording once it is made, in completion order; with a
    ``watch``, tells it of every decision of every cohort as the workers make them (in this
    process, one call at a time, maybe from a thread of its own; the cohorts' decisions
    interleaved). Without one, the workers report nothing.

    A ``watch`` that raises ends the run at once on every engine, its error raised by ``run``
    as a cohort's would be, the cohorts still out stopped: as in a run in the driver's own
    process, where the watcher is called by the runner itself. Finishing them unwatched would
    hide a broken display for as long as the run lasts (hours, for an LLM agent's) and report
    it only then; the log the driver has written is a prefix the same command resumes."""

    def run(
        self, work: CohortWork, cohorts: Sequence[PlannedCohort], watch: Watcher | None = None
    ) -> Iterator[Finished]: ...
