"""The embedded sample replays only what its recording holds.

Before its re-import, the sample carried no coverage: every market counted as recorded until the
tape's last point (2024-11-12 15:01), so Vermont's presidential market, whose series ends on
2024-11-06 12:00 (its market resolved at 13:32), was marked at its last price for six more days
and traded on 11-10: `favourite` bought YES at 0.999, `contrarian` and `sign` NO at 0.001, at a
price that no longer existed. This cohort runs the same agents over those weeks. Until the
second re-import it also paid Vermont out on 11-20, when Gamma closed it, not when UMA settled it.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from arena.run.cohort import CohortConfig
from arena.run.plan import VOLUME_FINAL
from arena.run.runner import CohortRunner
from ledger.events import (
    AnyEvent,
    CohortOpened,
    Marked,
    MarketResolved,
    OrderFilled,
    PositionSettled,
)
from ledger.store import EventStore
from replays.samples import sample_path
from replays.tape import Tape
from replays.tapefile import load_tape
from strategies.api import Bet, Decision, Strategy, View
from strategies.loader import build_strategy

VERMONT = "255186"  # Will a Democrat win Vermont Presidential Election?
VERMONT_COVERED = 1730894403  # 2024-11-06 12:00:03 UTC, its last point
NOV_10 = 1731196800  # the Sunday decision at which the old sample filled it
VERMONT_SETTLED = 1730899927  # 2024-11-06 13:32:07 UTC, UMA's settlement (umaEndDate)


class Probe(Strategy):
    """Holds, noting what it is shown of Vermont at each decision."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, bool, int | None, float]] = []

    def decide(self, view: View) -> Decision:
        markets = view.markets
        i = markets.index(VERMONT)
        meta = markets.meta_at(i)
        self.seen.append((view.ts, bool(markets.open[i]), meta.end_ts, float(markets.volume[i])))
        return Decision.hold("probe")


class BuyVermont(Strategy):
    """$100 on YES of Vermont at the first decision, then holds."""

    def decide(self, view: View) -> Decision:
        if view.ts != 1730592000:
            return Decision.hold("bought")
        return Decision(bets=[Bet(market=VERMONT, side="YES", amount=100.0)])


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Tape, list[AnyEvent], Probe]:
    tape = load_tape(sample_path())
    agents = {
        "fav": "favourite",
        "con": "contrarian",
        "edge": "sign",
        "probe": "hold",
        "vt": "hold",
    }
    config = CohortConfig(start=datetime(2024, 11, 3, tzinfo=UTC), agents=agents)
    probe = Probe()
    strategies = {name: build_strategy(spec) for name, spec in agents.items()}
    strategies |= {"probe": probe, "vt": BuyVermont()}
    db = tmp_path_factory.mktemp("sample") / "run.db"
    with EventStore.open(db) as store:
        cohort = CohortRunner(tape, config, strategies=strategies).run(store).cohort
        return tape, list(store.read(stream=cohort)), probe


def test_no_mark_or_fill_of_a_market_after_its_recording_stops(
    run: tuple[Tape, list[AnyEvent], Probe],
) -> None:
    tape, events, _ = run
    marked = [(e.ts, m) for e in events if isinstance(e, Marked) for m in e.markets]
    filled = [(e.ts, e.market) for e in events if isinstance(e, OrderFilled)]
    assert [(ts, m) for ts, m in filled if m == VERMONT and ts > VERMONT_COVERED] == []
    # Vermont is marked daily from the start while it is recorded (11-03, 11-04, 11-05 and
    # 11-06 at midnight), then never again, though its market closed only on 11-20
    assert [ts for ts, m in marked if m == VERMONT] == [1730592000 + k * 86_400 for k in range(4)]
    assert max(ts for ts, _ in marked) > VERMONT_COVERED  # others are still marked after it
    assert filled, "the agents trade in this cohort"
    for ts, market in marked + filled:
        assert ts <= tape.coverage(tape.index[market]), (market, ts)


def test_agents_see_the_scheduled_end_and_no_volume(
    run: tuple[Tape, list[AnyEvent], Probe],
) -> None:
    _, _, probe = run
    # decisions on 11-03 and 11-10: Vermont tradable at the first, not at the second
    assert [(ts, tradable) for ts, tradable, _, _ in probe.seen] == [
        (1730592000, True),
        (NOV_10, False),
    ]
    for _, _, end_ts, volume in probe.seen:
        assert end_ts == 1730808000  # Gamma endDate 2024-11-05 12:00 UTC, not the 11-20 close
        assert math.isnan(volume)  # only the final volume is known: agents are shown none


def test_the_universe_says_it_was_ranked_by_final_volume(
    run: tuple[Tape, list[AnyEvent], Probe],
) -> None:
    """The shared data has only final volumes (every market is closed), so the sample has no
    volume points and no ranking by volume at the start is possible; the cohort says so."""
    tape, events, _ = run
    assert all(m.volume_history == () for m in tape.markets)
    [opened] = [e for e in events if isinstance(e, CohortOpened)]
    assert opened.settings["universe_by"] == VOLUME_FINAL


def test_vermont_pays_out_when_uma_settled_it_not_when_gamma_closed_it(
    run: tuple[Tape, list[AnyEvent], Probe],
) -> None:
    """Settled by UMA on 11-06 13:32:07, closed by Gamma on 11-20 17:38: the sample used to pay
    out two weeks late. Bought on 11-03 00:00 at the 11-02 12:00:03 price (0.9885; the 11-03
    point is 3 s after the decision): 100 / 0.9885 = 101.1634 shares, paid $1 each."""
    _, events, _ = run
    [resolved] = [e for e in events if isinstance(e, MarketResolved) and e.market == VERMONT]
    assert resolved.ts == VERMONT_SETTLED and resolved.winner == "Yes"
    [bought] = [e for e in events if isinstance(e, OrderFilled) and e.market == VERMONT]
    assert (bought.ts, bought.agent, bought.price) == (1730592000, "vt", 0.9885)
    [paid] = [e for e in events if isinstance(e, PositionSettled) and e.market == VERMONT]
    assert (paid.ts, paid.agent, paid.won) == (VERMONT_SETTLED, "vt", True)
    assert paid.payout == pytest.approx(100 / 0.9885) == pytest.approx(101.16338)
