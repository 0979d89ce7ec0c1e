"""The application: cohorts, the deterministic replay loop, the CLI, the terminal view, reports.

``arena.open_run(path)`` opens a run for a notebook (see :mod:`arena.reports.notebook`); it is
imported on first use, so ``import arena`` (and ``arena --help``) stays free of numpy and the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from arena.reports.notebook import Run

__version__ = "0.1.0"


def open_run(path: str | Path, cohorts: list[str] | None = None) -> Run:
    """Open a run's log and read its tables; see :func:`arena.reports.notebook.open_run`."""
    from arena.reports.notebook import open_run as _open_run

    return _open_run(path, cohorts)
