"""A rolling cohort (``listing="rolling"``): markets that list during the cohort's first week
join it as they list, at most ``universe`` live at once, and no agent sees or trades a market
before it lists.

Times are offsets from ``START`` (Sunday 2024-01-07 00:00 UTC), as in ``conftest.py``.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

from arena.run.plan import ROLLING_DAYS, plan_cohorts, rolling_listings
from arena.run.runner import CohortRunner
from arena.run.settings import RunOptions, RunSettings
from ledger.events import CohortOpened, DecisionMade, MarketListed, OrderFilled, OrderRejected
from ledger.stream import MemorySink
from strategies.api import Bet, Decision, MarketMeta, Strategy, View
from strategies.builtin.hold import Hold
from tests.arena.run.test_plan import config, market, tape_of
from tests.conftest import DAY, HOUR, START

# a: open at the start, all week. b lists at +1h (its first point), c at +2h, d at +2h with
# less volume known then, e lists after the first week (never joins), f is priced from +30m
# but opens (lists) at +4h.
TAPE = tape_of(
    (market("a", volume=50.0, close_ts=START + 6 * DAY), [(-HOUR, 0.5), (DAY, 0.6)],
     (6 * DAY, "Yes")),
    (market("b", volume=10.0, close_ts=START + 3 * HOUR), [(HOUR, 0.3), (2 * HOUR, 0.4)],
     (3 * HOUR, "No")),
    (market("c", volume=1.0, close_ts=START + DAY, volume_history=((START + 2 * HOUR, 9.0),)),
     [(2 * HOUR, 0.7)], (DAY, "Yes")),
    (market("d", volume=900.0, close_ts=START + DAY, volume_history=((START + 2 * HOUR, 5.0),)),
     [(2 * HOUR, 0.2)], (DAY, "No")),
    (market("e", volume=99.0, close_ts=START + 9 * DAY), [(8 * DAY, 0.5)], (9 * DAY, "Yes")),
    (market("f", volume=99.0, close_ts=START + 5 * HOUR, open_ts=START + 4 * HOUR),
     [(HOUR // 2, 0.5)], (5 * HOUR, "Yes")),
)  # fmt: skip


def _ids(universe: Any) -> list[str]:
    return [TAPE.markets[m].id for m in universe]


def test_markets_join_in_listing_order_ranked_by_what_is_known_then() -> None:
    first = [0]  # a, open at the start
    joined, instants = rolling_listings(TAPE, START, 10, first)
    # c before d at +2h: c's volume then (9) beats d's (5), though d's final volume is 900
    assert _ids(joined) == ["b", "c", "d", "f"]
    assert [t - START for t in instants] == [HOUR, 2 * HOUR, 2 * HOUR, 4 * HOUR]
    assert ROLLING_DAYS == 7  # e lists on day 8: after the window


def test_at_most_n_markets_are_live_at_once() -> None:
    """With room for 2: a is live all week; b joins at +1h (2 live); c and d at +2h find b
    still live (its last point is at +2h), so neither joins; at +4h b is gone and f joins."""
    joined, _ = rolling_listings(TAPE, START, 2, [0])
    assert _ids(joined) == ["b", "f"]


def test_a_start_cohort_is_what_it_was() -> None:
    (planned,), _ = plan_cohorts(TAPE, [config()])
    assert _ids(planned.plan.universe) == ["a"] and planned.plan.listed == ()


class Probe(Strategy):
    """Writes down the markets it is shown, and tries to buy d before it lists."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, tuple[str, ...]]] = []

    def decide(self, view: View) -> Decision:
        self.seen.append((view.ts - START, tuple(view.markets.ids)))
        if view.ts - START < 2 * HOUR:
            return Decision(bets=[Bet(market="d", side="YES", amount=60.0)])
        return Decision(bets=[Bet(market="d", side="NO", amount=60.0)])


def _run(**kw: Any) -> tuple[list[Any], Probe]:
    probe = Probe()
    cfg = config(agents={"p": "hold", "h": "hold"}, decision_cadence="hourly", **kw)
    sink = MemorySink()
    run = CohortRunner(TAPE, cfg, strategies={"p": probe, "h": Hold()}).run(sink)
    return sink.read(run.cohort), probe


def test_no_agent_sees_or_trades_a_market_before_it_lists() -> None:
    events, probe = _run(listing="rolling")
    listed = {e.market: e.ts - START for e in events if isinstance(e, MarketListed)}
    assert listed == {"a": 0, "b": HOUR, "c": 2 * HOUR, "d": 2 * HOUR, "f": 4 * HOUR}
    for offset, ids in probe.seen:
        assert all(listed[m] <= offset for m in ids), (offset, ids)
    assert probe.seen[0] == (0, ("a",)) and probe.seen[1] == (HOUR, ("a", "b"))
    assert probe.seen[2][1] == ("a", "b", "c", "d")
    rejected = [e for e in events if isinstance(e, OrderRejected)]
    assert [(e.ts - START, e.market) for e in rejected][:2] == [(0, "d"), (HOUR, "d")]
    assert "not in this cohort's universe" in rejected[0].reason
    fills = [e for e in events if isinstance(e, OrderFilled)]
    assert fills and fills[0].ts - START == 2 * HOUR and fills[0].market == "d"
    opened = next(e for e in events if isinstance(e, CohortOpened))
    assert opened.universe == ["a"] and opened.settings["listing"] == "rolling"


@pytest.mark.parametrize("listing", ["start", "rolling"])
def test_listing_is_in_the_cohort_id_only_when_rolling(listing: str) -> None:
    base = config().cohort_id(TAPE.hash)
    other = config(listing=listing).cohort_id(TAPE.hash)
    assert (base == other) == (listing == "start")


class Lister(Strategy):
    """Holds, saying which markets its view shows and which it finds anywhere in its process."""

    def decide(self, view: View) -> Decision:
        shown = ",".join(view.markets.ids)
        held = sorted({o.id for o in gc.get_objects() if isinstance(o, MarketMeta)})
        return Decision.hold(f"{shown}|{','.join(held)}")


@pytest.mark.slow  # a worker process per agent
def test_an_isolated_worker_holds_no_market_before_it_lists() -> None:
    """Under --isolate the worker is sent each market's facts as it lists, so not even the
    worker's memory holds a later market (a plugin can search it)."""
    cfg = config(agents={"l": "hold"}, decision_cadence="hourly", listing="rolling")
    settings = RunSettings(cohort=cfg, options=RunOptions(decision_timeout=30.0, isolate=True))
    sink = MemorySink()
    run = CohortRunner(TAPE, settings, strategies={"l": Lister()}).run(sink)
    events = sink.read(run.cohort)
    listed = {e.market: e.ts - START for e in events if isinstance(e, MarketListed)}
    seen = [(e.ts - START, e.reasoning) for e in events if isinstance(e, DecisionMade)]
    assert seen[0] == (0, "a|a") and seen[1] == (HOUR, "a,b|a,b")
    for offset, reasoning in seen:
        shown, held = (part.split(",") for part in reasoning.split("|"))
        assert all(listed[m] <= offset for m in shown + held), (offset, reasoning)


def test_a_rolling_cohort_reports_every_market_it_listed_and_replays_as_itself() -> None:
    """The report counts the markets a rolling cohort listed, not only its start's, and the
    settings it gives back (the HTML page's replay command) name the listing."""
    from arena.reports.model import cohort_settings, universe_size
    from ledger.projection import Ledger

    def state(events: list[Any]) -> Any:
        (only,) = Ledger().apply_all(events).cohorts.values()
        return only

    rolling = state(_run(listing="rolling")[0])
    assert universe_size(rolling) == 5  # a, b, c, d, f
    assert cohort_settings(rolling)["listing"] == "rolling"
    start_only = state(_run()[0])
    assert universe_size(start_only) == 1 and "listing" not in cohort_settings(start_only)
