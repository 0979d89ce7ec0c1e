"""The first start a tape offers: where a cohort on any tape begins when no start is given.

A fixed default date suits one tape only (2024-09-01, the embedded election sample's, which
keeps its documented default so the README's figures stay as they are); on every other tape it
is a failure that names nothing. A market can first be traded at the later of its opening and
its first price point; those instants, each rounded up to a whole minute (a start a person can
type back, ``--start 2026-09-28T08:50``), are tried in order, and the first one whose cohort
would decide something (``arena.run.plan.try_plan``) is the default.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from arena.run.cohort import CohortConfig
from arena.run.plan import CohortPlan, try_plan
from replays.tape import Tape

MINUTE = 60


def tradable_from(tape: Tape) -> np.ndarray:
    """Every instant a market of the tape first has a price while open (its first point, or
    its opening if later), rounded up to a whole minute: sorted, unique."""
    found = []
    for m, info in enumerate(tape.markets):
        times = tape.times(m)
        if times.size == 0:
            continue
        first = int(times[0]) if info.open_ts is None else max(int(times[0]), info.open_ts)
        found.append(-(-first // MINUTE) * MINUTE)
    return np.unique(np.array(found, dtype=np.int64))


def first_start(tape: Tape, config: CohortConfig) -> int | None:
    """The earliest of :func:`tradable_from`'s instants at which a cohort with ``config``'s
    settings (its own start aside) decides something, or None when there is none."""
    for ts in tradable_from(tape):
        probe = config.model_copy(update={"start": datetime.fromtimestamp(int(ts), UTC)})
        if isinstance(try_plan(tape, probe), CohortPlan):
            return int(ts)
    return None
