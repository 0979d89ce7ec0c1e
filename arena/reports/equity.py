"""Equity curves: each agent's total value after every mark, folded from the log.

The report's fast fold (``ledger.rebuild``) keeps only the final state; a curve needs the
state at every ``Marked`` event, so the pages that draw curves fold each cohort once more,
event by event. Only the HTML reports ask for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ledger.errors import IntegrityError, LedgerError
from ledger.events import Marked
from ledger.projection import CohortState
from ledger.restore import check_stream
from ledger.store import EventStore


@dataclass
class CohortRecord:
    """One cohort folded from the log, with each agent's total value after every mark."""

    state: CohortState
    start: int
    offsets: list[int]  # seconds since the cohort's start, one per Marked event
    values: dict[str, list[float]]  # agent -> cash + positions value at each offset


def fold_cohort(store: EventStore, cohort: str) -> CohortRecord:
    """Fold one cohort's stream, recording every agent's total value after each mark. Every
    event is checked first as ``arena report`` checks the ones it folds (its link, its order:
    ``ledger.restore.check_stream``), and a closed cohort's fold must end in the state its
    close recorded: the curves are drawn from the events, not from the snapshot the figures
    came from, so they are held to the same close (IntegrityError if not)."""
    check_stream(store, cohort)
    state = CohortState(cohort)
    offsets: list[int] = []
    values: dict[str, list[float]] = {}
    for event in store.read(stream=cohort):
        state.apply(event)
        if isinstance(event, Marked) and state.opened is not None:
            offsets.append(event.ts - state.opened.start)
            for agent, book in state.books.items():
                total = book.cash + state.positions_value(agent)
                values.setdefault(agent, []).append(total)
    if state.opened is None:
        raise LedgerError(f"cohort {cohort} has no CohortOpened event in the log")
    if state.closed is not None and state.digest() != state.closed.state_digest:
        raise IntegrityError(
            f"{store.path}: cohort {cohort} does not rebuild to the state its close recorded"
        )
    return CohortRecord(state, state.opened.start, offsets, values)


def mean_equity(records: Sequence[CohortRecord], agent: str) -> tuple[np.ndarray, np.ndarray]:
    """The agent's total value averaged over cohorts, by time since each cohort's start.

    A cohort that has ended contributes its final value to later offsets (everything it held has
    settled by then), so the average never jumps because a short cohort dropped out. Cohorts
    the agent is not in are left out.
    """
    records = [r for r in records if agent in r.values]
    grid = np.unique(np.concatenate([np.asarray(r.offsets, dtype=np.int64) for r in records]))
    total = np.zeros(grid.size)
    for r in records:
        offsets = np.asarray(r.offsets, dtype=np.int64)
        idx = np.searchsorted(offsets, grid, side="right") - 1
        values = np.asarray(r.values[agent])
        total += np.where(idx >= 0, values[np.maximum(idx, 0)], r.state.books[agent].initial_cash)
    return grid, total / len(records)
