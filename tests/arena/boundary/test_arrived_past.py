"""An isolated worker's ``Past`` (``ArrivedPast``): laid out from the points that have arrived and
the markets listed, never from the tape's totals, and showing exactly what the run's own
``Past`` shows of them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.boundary.past import ArrivedPast, Delta, PastFeed, room
from arena.run.runner import CohortRunner
from arena.run.settings import RunOptions, RunSettings
from ledger.events import DecisionMade
from ledger.stream import MemorySink
from replays.asof import UniverseWalk
from replays.markets import MarketInfo, Resolution
from replays.synthetic import random_walk_tape
from replays.tape import Tape
from strategies.api import Decision, Strategy, View
from tests.arena.run.test_plan import config
from tests.arena.run.test_rolling import TAPE as ROLLING
from tests.arena.run.test_rolling import _ids
from tests.conftest import DAY, HOUR, START
from tests.replays.test_asof import covered_tapes


def moved(past: ArrivedPast, feed: PastFeed, listed: int, shown: np.ndarray) -> np.ndarray:
    """``past``, showing ``shown`` points of each market listed before, moved on to every point
    of the first ``listed`` markets that has arrived, as ``Isolated.decide`` sends them; what
    it shows now."""
    since = np.zeros(listed, dtype=np.int64)
    since[: shown.size] = shown
    delta, shape = feed.delta(since), feed.layout
    past.apply(delta, shape.widths[:listed], shape.yes_column[:listed])
    return delta.until


@given(case=covered_tapes(), lists=st.lists(st.integers(0, 3), min_size=12, max_size=12))
@settings(max_examples=100, deadline=None)
def test_it_shows_what_the_runs_past_shows_of_the_markets_listed(
    case: tuple[Tape, list[int], np.ndarray], lists: list[int]
) -> None:
    """For any tape, instants and markets listing a few at a time, each listed market's history
    is the tape's cut at the instant; the layout has the listed markets only, each with room
    for the points arrived and no more than ``room`` gives (a power of two, from the past)."""
    tape, chosen, instants = case
    feed, walk, past = PastFeed(tape, chosen), UniverseWalk(tape, chosen), ArrivedPast()
    listed, shown = 0, np.zeros(0, dtype=np.int64)
    for step, ts in enumerate(instants.tolist()):
        feed.advance(walk.at(ts))
        listed = min(len(chosen), listed + lists[step % len(lists)])
        shown = moved(past, feed, listed, shown)
        assert len(past.layout.widths) == listed
        for j, m in enumerate(chosen[:listed]):
            got_t, got_v = past.history(j, ts)
            want_t, want_v = tape.history(m, ts)
            np.testing.assert_array_equal(got_t, want_t)
            np.testing.assert_array_equal(got_v, want_v)
            arrived = int(feed.seen[j])
            assert arrived <= past.layout.lengths[j] <= room(arrived)


def test_room_grows_by_doubling_from_what_has_arrived() -> None:
    """One market, a point an hour: room for 32 points until the 33rd arrives, then for 64
    until the 65th, 128 until the 129th, then 256; the points are always the tape's."""
    tape = random_walk_tape(1, 200, seed=1, step_seconds=3_600)
    feed, walk, past = PastFeed(tape, [0]), UniverseWalk(tape, [0]), ArrivedPast()
    lengths, shown = [], np.zeros(0, dtype=np.int64)
    for ts in tape.times(0).tolist():
        feed.advance(walk.at(ts))
        shown = moved(past, feed, 1, shown)
        lengths.append(past.layout.lengths[0])
    assert [room(n) for n in (0, 31, 32, 33, 63, 64, 65)] == [32, 32, 64, 64, 64, 128, 128]
    assert lengths == [32] * 32 + [64] * 32 + [128] * 64 + [256] * 72
    times, _ = past.history(0, int(tape.times(0)[-1]))
    np.testing.assert_array_equal(times, tape.times(0))


def test_an_outgrown_market_moves_alone_and_the_whole_is_laid_out_again_rarely() -> None:
    """``a`` arrives whole at the first decision (1,000 points), ``b`` gets a point a decision
    and ``c`` three. The first decision lays them out end to end (rooms 1,024, 32 and 32: 1,088
    points, in buffers of 1,632). ``c`` outgrows its room at decision 11 (33 points) and is
    moved alone to room for 64 past the others (its 30 points copied), at 22 to 128 (63
    copied); ``b`` at 33 to 64 (32 copied); ``c`` at 43 to 256 (126 copied): 1,600 of the
    1,632 taken. At 65 ``b`` needs 128 more, and every market is laid out again (1,000 + 64 +
    192 copied). Laying every market out again at each of those five changes, as the worker
    did, copied 5,676 points (1,040 + 1,084 + 1,128 + 1,168 + 1,256), ``a``'s thousand each
    time. What each market shows is what was sent, throughout."""
    past, seen = ArrivedPast(), np.zeros(3, dtype=np.int64)
    sent: list[list[int]] = [[], [], []]
    changes = []
    for d in range(1, 66):
        until = np.array([1000, d, 3 * d], dtype=np.int64)
        times = [list(range(1000 * j + int(a), 1000 * j + int(b))) for j, (a, b) in
                 enumerate(zip(seen, until, strict=True))]  # fmt: skip
        flat = np.array([t for market in times for t in market], dtype=np.int64)
        before = past.layout, past.relayouts
        past.apply(Delta(seen, until, flat, flat / 1e4), (1, 1, 1), (0, 0, 0))
        if (past.layout, past.relayouts) != before:
            changes.append((d, past.layout.lengths, past.relayouts, past.copied))
        for market, new in zip(sent, times, strict=True):
            market.extend(new)
        for j, market in enumerate(sent):
            got_t, got_v = past.history(j, 10**6)
            assert got_t.tolist() == market
            np.testing.assert_array_equal(got_v[:, 0], np.array(market) / 1e4)
        seen = until
    assert changes == [
        (1, (1024, 32, 32), 1, 0),
        (11, (1024, 32, 64), 1, 30),
        (22, (1024, 32, 128), 1, 30 + 63),
        (33, (1024, 64, 128), 1, 30 + 63 + 32),
        (43, (1024, 64, 256), 1, 30 + 63 + 32 + 126),
        (65, (1024, 128, 256), 2, 30 + 63 + 32 + 126 + 1000 + 64 + 192),
    ]


class Owner(Strategy):
    """Says how many markets its view lists and how many the owner of its history handle (the
    worker's ``Past``) lays out: a plugin can reach it from its view."""

    def decide(self, view: View) -> Decision:
        owner = view.markets._history.__self__  # type: ignore[attr-defined]
        shape = getattr(owner, "layout", owner)  # the Past itself, before the worker's grew
        return Decision.hold(f"{len(view.markets.ids)} {len(shape.widths)}")


@pytest.mark.slow  # a worker process
def test_an_isolated_workers_past_lays_out_only_the_markets_listed() -> None:
    """Under rolling listing the worker's ``Past`` grows with the listings: at no decision
    does it lay out a market not listed yet (its width, its points, that it will list)."""
    cfg = config(agents={"o": "hold"}, decision_cadence="hourly", listing="rolling")
    settings = RunSettings(cohort=cfg, options=RunOptions(decision_timeout=30.0, isolate=True))
    run = CohortRunner(ROLLING, settings, strategies={"o": Owner()})
    sink = MemorySink()
    run.run(sink)
    said = [e.reasoning for e in sink.read(run.cohort) if isinstance(e, DecisionMade)]
    assert said[:3] == ["1 1", "2 2", "4 4"]
    assert all(a == b for a, b in (s.split() for s in said))
    assert len(_ids(run.universe)) == 5


def listing_outcomes() -> Tape:
    """``a`` (binary) from the start; ``pres`` (three outcomes) lists at +1h and ``four``
    (four outcomes) at +2h, at their first points."""
    specs = [
        ("a", ("Yes", "No"), 50.0, [(-HOUR, [0.5]), (2 * HOUR, [0.6])]),
        ("pres", ("T", "H", "O"), 40.0, [(HOUR, [0.5, 0.4, 0.1]), (3 * HOUR, [0.4, 0.5, 0.1])]),
        ("four", ("A", "B", "C", "D"), 30.0, [(2 * HOUR, [0.4, 0.3, 0.2, 0.1])]),
    ]
    markets = [MarketInfo(id=m, question=f"{m}?", outcomes=o, volume=v, close_ts=START + DAY)
               for m, o, v, _ in specs]  # fmt: skip
    series = {
        m: (np.array([START + t for t, _ in pts], np.int64),
            np.array([p for _, p in pts]) if len(o) > 2 else np.array([p[0] for _, p in pts]))
        for m, o, _, pts in specs
    }  # fmt: skip
    winners = {"a": "Yes", "pres": "H", "four": "A"}
    return Tape.from_series(markets, series, [Resolution(market=m, ts=START + DAY, winner=w)
                                              for m, w in winners.items()])  # fmt: skip


class Quoter(Strategy):
    """Says every listed market's prices and last point, then the shape of the rows of prices
    behind its view's quotes (every outcome's price of the markets with more than two)."""

    def decide(self, view: View) -> Decision:
        m = view.markets
        seen = [(i, m.prices(i), m.history(i)[1][-1:].tolist()) for i in m.ids]
        rows = m._prices.__self__.rows  # type: ignore[attr-defined]
        return Decision.hold(f"{seen}|{rows.shape}")


@pytest.mark.slow  # a worker process
def test_a_worker_gets_the_prices_of_listed_markets_only_and_quotes_as_in_process() -> None:
    """Rolling listing with markets of three and four outcomes: the isolated agent sees what
    the in-process one sees at every decision, and its worker's rows of prices hold the listed
    ones only, as wide as the widest of them (0 rows, then 1 of 3, then 2 of 4)."""
    said = {}
    for isolate in (False, True):
        cfg = config(agents={"q": "hold"}, decision_cadence="hourly", listing="rolling",
                     universe=3)  # fmt: skip
        options = RunOptions(decision_timeout=30.0, isolate=isolate)
        run = CohortRunner(listing_outcomes(), RunSettings(cohort=cfg, options=options),
                           strategies={"q": Quoter()})  # fmt: skip
        sink = MemorySink()
        run.run(sink)
        made = [e for e in sink.read(run.cohort) if isinstance(e, DecisionMade)]
        assert not [e.error for e in made if e.error]
        said[isolate] = [e.reasoning.split("|") for e in made]
    assert [seen for seen, _ in said[True]] == [seen for seen, _ in said[False]]
    assert "'four', (0.4, 0.3, 0.2, 0.1)" in said[True][2][0]
    assert [shape for _, shape in said[False][:3]] == ["(2, 4)"] * 3
    assert [shape for _, shape in said[True][:3]] == ["(0, 1)", "(1, 3)", "(2, 4)"]
