"""How an experiment reports progress without knowing who listens (a rich bar, or nobody)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

Advance = Callable[[int, str], None]
"""Move the current stage on by n units, with a short status (e.g. the training loss)."""


class Progress(Protocol):
    def stage(self, description: str, total: int) -> Advance:
        """Start a stage of ``total`` units; the returned callable advances it."""
        ...


class Silent:
    """Progress nobody watches (tests, ``--json`` piped elsewhere)."""

    def stage(self, description: str, total: int) -> Advance:
        def advance(n: int, status: str = "") -> None:
            pass

        return advance
