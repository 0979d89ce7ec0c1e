"""A hostile plugin under ``--isolate`` looks for how many points a market will have: future
information, since a market that stops being priced early has, say, stopped trading. Its
worker holds only the points that have arrived and room laid out from them
(``arena.boundary.past.ArrivedPast``), so the count is nowhere in its process until the last
point has arrived. In process, ``gc`` reaches the tape and finds it at once: what ``--isolate``
is for.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from arena.run.settings import RunOptions, RunSettings
from ledger.events import DecisionMade
from ledger.stream import MemorySink
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from tests.conftest import DAY

T0 = 1_704_067_200  # Monday 2024-01-01
POINTS = 997
"""The number of points of market ``long``: odd, so no room laid out in powers of two is it."""
STEP = 600
BEFORE = 5
"""Points of ``long`` before the start: its history at the first decision."""

SEARCHER = '''
import gc
import sys

import numpy as np

from strategies.api import Decision, Strategy

TARGET = "{points}"  # a text: an int in this file would be among its code's constants


def is_count(x, n):
    """Whether ``x`` is the integer ``n``, or an array holding it or ``n`` long."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return x == n
    if isinstance(x, np.ndarray):
        return n in x.shape or (x.dtype.kind in "iu" and x.size > 0 and bool((x == n).any()))
    return False


def anywhere(n):
    """Whether anything this process can reach holds ``n``: every object the collector
    tracks, every frame on the stack (the worker's locals), and everything they refer to, to
    the end (a tuple of plain numbers is not tracked, but is what holds it). This file's own
    frames, which hold ``n`` to search for it, are left out."""
    stack = gc.get_objects()
    frame = sys._getframe()
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    seen = set()
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if type(o).__name__ == "frame" and o.f_code.co_filename == __file__:
            continue
        if is_count(o, n):
            return True
        stack.extend(gc.get_referents(o))
    return False


class Searcher(Strategy):
    def decide(self, view):
        arrived = len(view.markets.history("long")[0])
        return Decision.hold(f"{{arrived}} {{anywhere(int(TARGET))}}")
'''


def counted_tape() -> Tape:
    """``long``: ``POINTS`` points ``STEP`` seconds apart from ``BEFORE`` before the start
    (its last a little under 7 days in); ``other``: a point a day for 10 days, so decisions
    go on after ``long``'s last point."""
    markets = [
        MarketInfo(id="long", question="long?", outcomes=("Yes", "No"), volume=10.0),
        MarketInfo(id="other", question="other?", outcomes=("Yes", "No"), volume=5.0),
    ]
    first = T0 - BEFORE * STEP
    series = {
        "long": (first + STEP * np.arange(POINTS, dtype=np.int64), np.full(POINTS, 0.4)),
        "other": (T0 - DAY + DAY * np.arange(12, dtype=np.int64), np.full(12, 0.6)),
    }
    resolutions = [Resolution(market=m, ts=T0 + 12 * DAY, winner="Yes") for m in series]
    return Tape.from_series(markets, series, resolutions, source="counted")


def searched(tmp_path: Path, isolate: bool) -> list[tuple[int, bool]]:
    """Each decision's (points of ``long`` arrived, whether its count was found)."""
    plugin = tmp_path / "searcher.py"
    plugin.write_text(SEARCHER.format(points=POINTS))
    config = CohortConfig(
        start=datetime.fromtimestamp(T0, UTC),
        agents={"s": f"{plugin}:Searcher"},
        universe=2,
        decision_cadence="daily",
        mark_cadence="daily",
    )
    options = RunOptions(decision_timeout=60.0, isolate=isolate)
    runner = CohortRunner(counted_tape(), RunSettings(cohort=config, options=options))
    sink = MemorySink()
    runner.run(sink)
    made = [e for e in sink.read(runner.cohort) if isinstance(e, DecisionMade)]
    assert made and not [e.error for e in made if e.error]
    return [(int(a), f == "True") for a, f in (e.reasoning.split() for e in made)]


@pytest.mark.slow  # a worker process, and every object of it searched at each decision
def test_an_isolated_plugin_finds_no_count_of_points_still_to_come(tmp_path: Path) -> None:
    seen = searched(tmp_path, isolate=True)
    # daily decisions from the start: 5 points, then 144 more a day, all 997 from day 7
    assert [a for a, _ in seen[:3]] == [BEFORE + 1, BEFORE + 1 + 144, BEFORE + 1 + 288]
    early = [found for arrived, found in seen if arrived < POINTS]
    late = [found for arrived, found in seen if arrived == POINTS]
    assert len(early) == 7 and not any(early)
    assert late and all(late)  # every point arrived: the count is there, and the search sees it


def test_in_process_the_count_is_found_before_its_points_arrive(tmp_path: Path) -> None:
    seen = searched(tmp_path, isolate=False)
    assert seen[0] == (BEFORE + 1, True)
