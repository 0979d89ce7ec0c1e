"""``arena.step.timeline`` and ``arena.step.view``: the view at a cut is the report of the log cut
there.

Every stop of every cohort of the shared weekly log (fav and coin, three cohorts) is visited
forward and then backward with checkpoints every few events, so restoring and folding forward
are both exercised; at each, for each agent, the leaderboard and the portfolio shown must be
what ``report_data`` says of a ``Ledger`` folded from the events before the cut.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.reports.model import report_data
from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from arena.step import panels
from arena.step import timeline as timeline_module
from arena.step.timeline import LogTimeline
from arena.step.view import build_view, sparkline
from ledger.events import (
    CohortOpened,
    DecisionMade,
    Event,
    Marked,
    MarketListed,
    ModelCall,
    ModelCalled,
    PromptStored,
)
from ledger.projection import CohortState, Ledger
from ledger.snapshot import encode_state
from ledger.store import EventStore
from ledger.stream import MemorySink
from tests.arena.run.test_multi_outcome import START, ThreeWay, election


@pytest.fixture(scope="module")
def cohorts(weekly_log: Path) -> dict[str, list[Event]]:
    with EventStore.open(weekly_log, readonly=True) as store:
        return {c: list(store.read(stream=c)) for c in store.streams()}


def report_agents(events: list[Event]) -> list[dict[str, object]]:
    data = report_data(Ledger().apply_all(events))
    [cohort] = data["cohorts"]
    return list(cohort["agents"])


def test_every_stop_forward_and_back_shows_what_the_report_of_the_cut_says(
    cohorts: dict[str, list[Event]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timeline_module, "CHECKPOINT_EVERY", 7)
    for cohort, events in cohorts.items():
        line = LogTimeline(events, cohort)
        cuts = [s.cut for s in line.stops]
        assert cuts == sorted(cuts) and cuts[-1] == len(events)
        assert sum(s.kind == "decision" for s in line.stops) == sum(
            isinstance(e, DecisionMade) for e in events
        )
        for cut in cuts + cuts[::-1]:
            expected = report_agents(events[:cut])
            for agent in ("fav", "coin"):
                view = build_view(line, cut, agent)
                shown = [(s.agent, s.total_value, s.return_pct, s.brier, s.n_resolved)
                         for s in view.standings]  # fmt: skip
                assert shown == [
                    (a["agent"], a["total_value"], a["return_pct"], a["brier"], a["n_resolved"])
                    for a in expected
                ]
                mine = next(a for a in expected if a["agent"] == agent)
                assert view.portfolio.total_value == mine["total_value"]
                assert view.portfolio.cash == mine["cash"]


def test_before_the_first_event_nobody_holds_anything(cohorts: dict[str, list[Event]]) -> None:
    """Back from the first stop is cut 0, before the opening: the view took a portfolio of
    an agent with no account yet and the app ended with a KeyError."""
    cohort, events = next(iter(cohorts.items()))
    view = build_view(LogTimeline(events, cohort), 0, "fav")
    assert (view.portfolio.total_value, view.portfolio.positions, view.standings) == (0.0, (), [])
    assert len(view.markets) == 0 and view.decision is None


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_the_state_at_any_cut_in_any_order_is_the_fold_of_the_events_before_it(
    cohorts: dict[str, list[Event]], data: st.DataObject
) -> None:
    cohort, events = next(iter(cohorts.items()))
    line = LogTimeline(events, cohort)
    for cut in data.draw(st.lists(st.integers(0, len(events)), min_size=1, max_size=8)):
        fold = CohortState(cohort)
        for e in events[:cut]:
            fold.apply(e)
        assert encode_state(line.state_at(cut)) == encode_state(fold)


def test_a_copy_has_everything_the_state_has_and_shares_nothing_the_fold_changes(
    cohorts: dict[str, list[Event]],
) -> None:
    """Folding the rest of the log into a copy leaves the original as it was."""
    cohort, events = next(iter(cohorts.items()))
    half = CohortState(cohort)
    for e in events[: len(events) // 2]:
        half.apply(e)
    before = encode_state(half)
    copy = half.copy()
    assert set(vars(copy)) == set(vars(half))
    assert encode_state(copy) == before
    for e in events[len(events) // 2 :]:
        copy.apply(e)
    assert encode_state(half) == before
    assert encode_state(copy) != before


def test_markets_show_only_marks_before_the_cut(cohorts: dict[str, list[Event]]) -> None:
    """The history of each market is its marks before the cut, the price its last one, and
    the change is against the mark before the agent's previous decision."""
    cohort, events = next(iter(cohorts.items()))
    line = LogTimeline(events, cohort)
    decisions = [s for s in line.stops if s.kind == "decision" and s.agent == "fav"]
    for previous, stop in itertools.pairwise(decisions):
        view = build_view(line, stop.cut, "fav")
        for row in view.markets:
            before = [
                p[0]
                for e in events[: stop.cut] if isinstance(e, Marked)
                for m, p in zip(e.markets, e.prices, strict=True) if m == row.market
            ]  # fmt: skip
            assert row.spark == sparkline(before[-10:])
            assert row.prices[0] == before[-1]
            at_previous = [
                p[0]
                for e in events[: previous.at] if isinstance(e, Marked)
                for m, p in zip(e.markets, e.prices, strict=True) if m == row.market
            ]  # fmt: skip
            assert row.change == before[-1] - at_previous[-1]


def test_sparkline_bars_are_on_the_absolute_probability_scale() -> None:
    assert sparkline([0.0, 0.5, 1.0, 0.99]) == "▁▅██"
    assert sparkline([]) == ""


def test_moving_between_stops(cohorts: dict[str, list[Event]]) -> None:
    cohort, events = next(iter(cohorts.items()))
    line = LogTimeline(events, cohort)
    first = line.first_stop()
    assert line.previous_stop(first) == 0
    after = line.next_stop(first, "decision", "coin")
    stop = line.stop_at(after)
    assert stop is not None and stop.agent == "coin" and stop.kind == "decision"
    assert line.previous_stop(after) < after
    resolution = line.next_stop(0, "resolution")
    assert isinstance(events[line.stop_at(resolution).at], MarketListed) is False  # type: ignore[union-attr]
    assert line.next_stop(len(events)) == len(events)
    week2 = line.week_stop(2, "coin")
    assert week2 is not None
    assert line.stop_at(week2).week == 2  # type: ignore[union-attr]
    assert line.week_stop(99) is None


def test_a_multi_outcome_market_shows_its_outcomes_by_name() -> None:
    config = CohortConfig(start=datetime.fromtimestamp(START, UTC), agents={"x": "hold"},
                          decision_cadence="weekly", mark_cadence="weekly")  # fmt: skip
    sink = MemorySink()
    cohort = CohortRunner(election(), config, strategies={"x": ThreeWay()}).run(sink).cohort
    line = LogTimeline(sink.read(cohort), cohort)
    first = build_view(line, line.next_stop(0, "decision", "x"), "x")
    [row] = first.markets
    assert panels.prices(row) == "Trump 0.50 Harris 0.40 Other 0.10"
    assert row.held == "2,500 Harris, 5,000 Other"
    shown = panels.decision(first).plain
    assert "side 'harris' is not an outcome of market pres (Trump, Harris, Other)" in shown
    assert "bought 2,500.00 Harris of pres at 0.400 for $1,000.00" in shown
    second = build_view(line, line.next_stop(first.cut, "decision", "x"), "x")
    [row] = second.markets
    assert panels.prices(row) == "Trump 0.45 Harris 0.50 Other 0.05"
    assert row.change == pytest.approx(0.45 - 0.5)


def test_the_transcript_panel_shows_prompt_answer_every_reask_tokens_and_cost() -> None:
    call = ModelCall(model="m", question="decision", request="r1", system="d1",
                     messages=[{"role": "user", "content": "what now?"}], status=200,
                     answer="not json", tokens_in=100, tokens_out=20, cost=0.0012,
                     error="answer is not JSON")  # fmt: skip
    reask = ModelCall(model="m", question="decision", request="r2", reask=1, system="d1",
                      messages=[{"role": "user", "content": "JSON please"}], status=200,
                      answer='{"action": "HOLD"}', tokens_in=130, tokens_out=10,
                      cost=0.0015)  # fmt: skip
    c, t = "c1", START
    events: list[Event] = [
        CohortOpened(
            cohort=c,
            ts=t,
            start=t,
            rules="v1",
            cash=10_000.0,
            agents=["llm"],
            decision_cadence="weekly",
            mark_cadence="weekly",
        ),
        DecisionMade(
            cohort=c,
            ts=t,
            agent="llm",
            week=1,
            action="HOLD",
            prompt="the markets are ...",
            raw_response='{"action": "HOLD"}',
        ),
        PromptStored(cohort=c, ts=t, digest="d1", text="You are a trader."),
        ModelCalled(cohort=c, ts=t, agent="llm", week=1, n=1, call=call),
        ModelCalled(cohort=c, ts=t, agent="llm", week=1, n=2, call=reask),
    ]
    line = LogTimeline(events, c)
    assert [s.cut for s in line.stops] == [5, 5]  # the decision with its calls; the end
    text = panels.transcript(build_view(line, 5, "llm")).plain
    for expected in (
        "prompt\nthe markets are ...",
        'raw answer\n{"action": "HOLD"}',
        "call 1 m · decision",
        "100 in / 20 out tokens · $0.0012",
        "system You are a trader.",
        "user what now?",
        "error answer is not JSON",
        "call 2 m · decision · re-ask 1",
        "130 in / 10 out tokens · $0.0015",
        "this decision 2 model calls (1 re-asks, 1 failed), tokens 230 in / 30 out, $0.0027",
    ):
        assert expected in text, expected


def test_the_markets_title_says_why_there_are_no_rows(cohorts: dict[str, list[Event]]) -> None:
    """Before the first mark (a live replay's first screen) the title said "markets 0/0", as
    of an empty universe; it says what the cohort has so far, and counts rows once there are."""
    cohort, events = next(iter(cohorts.items()))
    line = LogTimeline(events, cohort)
    listed = next(k for k, e in enumerate(events) if isinstance(e, MarketListed))
    marked = next(k for k, e in enumerate(events) if isinstance(e, Marked))
    rows = [build_view(line, cut, "fav").markets for cut in (0, listed + 1, marked, marked + 1)]
    assert [panels.markets_title(r, len(r)) for r in rows] == [
        "markets: none listed yet",
        "markets: 1 listed, none priced yet",
        "markets: 6 listed, none priced yet",
        "markets 6/6",
    ]
    assert panels.markets_title(rows[3], 0, "zzz") == "markets 0/6 · 'zzz'"
