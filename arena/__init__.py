"""The application: cohorts, the deterministic replay loop, the CLI, the terminal view, reports.

This module is the public face for Python callers and plugin authors, beside ``strategies.api``
(what a strategy is and sees): what a notebook or a plugin's own tests need is imported from
here, so a module moving inside the wings never breaks them.

* ``open_run(path)``: a run's log and its tables, for a notebook.
* ``CohortConfig``, ``CohortRunner``: what a cohort is, and one replayed in this process.
* ``load_tape``, ``sample_path``: a tape file, and the embedded 2024 election sample's path.
* ``Book``: one agent's book in a cohort's state (cash, positions, scored bets).

Each is imported on first use, so ``import arena`` (and ``arena --help``) stays free of numpy and
the rest.
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False  # typing's own, without importing typing (a few ms of every start-up)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from arena.reports.notebook import Run
    from arena.run.cohort import CohortConfig as CohortConfig
    from arena.run.runner import CohortRunner as CohortRunner
    from ledger.projection import Book as Book
    from replays.samples import sample_path as sample_path
    from replays.tapefile import load_tape as load_tape

__version__ = "0.1.0"

_PUBLIC = {
    "CohortConfig": "arena.run.cohort",
    "CohortRunner": "arena.run.runner",
    "Book": "ledger.projection",
    "load_tape": "replays.tapefile",
    "sample_path": "replays.samples",
}
__all__ = ["open_run", *_PUBLIC]


def __getattr__(name: str) -> Any:
    """The public names above, imported when first read."""
    if name in _PUBLIC:
        return getattr(import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'arena' has no attribute {name!r}")


def open_run(path: str | Path, cohorts: list[str] | None = None) -> Run:
    """Open a run's log and read its tables; see :func:`arena.reports.notebook.open_run`."""
    from arena.reports.notebook import open_run as _open_run

    return _open_run(path, cohorts)
