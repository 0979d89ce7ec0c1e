"""Property tests of the fold: random trading histories keep the accounting identities, and a
state rebuilt from the (encoded and decoded) log equals the live one exactly.

The histories run as a replay runs them: every event recorded on a ``LiveCohort`` (by the test,
the broker or settlement) and collected from it after each step, so the log under test is
exactly what the state recorded."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.events import (
    BetIntent,
    CohortOpened,
    DecisionMade,
    Event,
    Marked,
    MarketListed,
    SellIntent,
    decode,
    encode,
)
from ledger.live import LiveCohort
from ledger.projection import CohortState, Ledger
from ledger.rebuild import rebuild
from ledger.rules import Broker, rules_for, settle, void
from ledger.store import EventStore

CASH = 10_000.0
AGENTS = ["ann", "ben"]
MARKETS: dict[str, list[str]] = {
    "a": ["Yes", "No"],
    "b": ["No", "Yes"],
    "m": ["Trump", "Harris", "Other"],
    "c": ["Yes", "No"],
}
CLOSE_TS = 15  # market "c" closes part-way through a history
SIDES: dict[str, list[str]] = {
    "a": ["YES", "no", "Yes", "MAYBE"],
    "b": ["yes", "NO"],
    "m": ["Trump", "Harris", "Other", "trump"],
    "c": ["YES", "NO"],
}

price = st.one_of(st.floats(0.01, 0.99), st.sampled_from([0.0, 1.0, 0.5]))
amount = st.one_of(st.floats(50.0, 1_200.0), st.sampled_from([49.99, 50.0, 2_500.0, 4_000.0]))
percentage = st.one_of(st.floats(1.0, 100.0), st.sampled_from([0.5, 1.0, 100.0, 101.0]))
market = st.sampled_from(sorted(MARKETS))


@st.composite
def bet_intent(draw: st.DrawFn) -> BetIntent:
    m = draw(market)
    return BetIntent(market=m, side=draw(st.sampled_from(SIDES[m])), amount=draw(amount))


@st.composite
def sell_intent(draw: st.DrawFn) -> SellIntent:
    m = draw(market)
    return SellIntent(market=m, side=draw(st.sampled_from(SIDES[m])), percentage=draw(percentage))


decide = st.tuples(
    st.just("decide"),
    st.sampled_from(AGENTS),
    st.lists(bet_intent(), min_size=1, max_size=2),
    st.lists(sell_intent(), max_size=1),
    st.booleans(),
)
sell_held = st.tuples(st.just("sell_held"), st.sampled_from(AGENTS), st.integers(0, 3), percentage)
reprice = st.tuples(st.just("price"), market, st.lists(price, min_size=3, max_size=3))
mark = st.tuples(st.just("mark"))
resolve = st.tuples(st.just("resolve"), market, st.integers(0, 2), st.booleans())
cancel = st.tuples(st.just("void"), market)
# (weight, operation): mostly trading, so most histories fill, add to and sell positions before
# their markets end (``st.one_of`` would not honour repeated branches as weights)
WEIGHTED = [(40, decide), (25, sell_held), (10, reprice), (10, mark), (8, resolve), (7, cancel)]


@st.composite
def operation(draw: st.DrawFn) -> tuple[object, ...]:
    roll = draw(st.integers(0, sum(w for w, _ in WEIGHTED) - 1))
    for weight, op in WEIGHTED:
        if roll < weight:
            return draw(op)
        roll -= weight
    raise AssertionError("unreachable")


@dataclass
class Run:
    """A live cohort driven by random operations; ``events`` is what it recorded, collected
    after each step."""

    rules: str
    state: LiveCohort = field(default_factory=lambda: LiveCohort("c"))
    events: list[Event] = field(default_factory=list)
    prices: dict[str, list[float]] = field(default_factory=dict)
    ts: int = 0

    def __post_init__(self) -> None:
        self.record(
            CohortOpened(
                cohort="c",
                ts=0,
                start=0,
                rules=self.rules,
                cash=CASH,
                agents=AGENTS,
                decision_cadence="weekly",
                mark_cadence="daily",
            )
        )
        for name, outcomes in MARKETS.items():
            self.record(
                MarketListed(
                    cohort="c",
                    ts=0,
                    market=name,
                    question=name,
                    outcomes=outcomes,
                    close_ts=CLOSE_TS if name == "c" else None,
                    volume=0.0,
                )
            )
            self.reprice(name, [1.0 / len(outcomes)] * 3)
        self.events += self.state.collect()

    def record(self, event: Event) -> None:
        self.state.record(event)

    def quote(self, name: str) -> Sequence[float] | None:
        return self.prices[name]

    def reprice(self, name: str, draws: list[float]) -> None:
        """Binary markets derive NO as 1 - YES, as tapes do; multi prices are independent."""
        if len(MARKETS[name]) == 2:
            yes = draws[0]
            self.prices[name] = [yes, 1.0 - yes] if MARKETS[name][0] == "Yes" else [1.0 - yes, yes]
        else:
            self.prices[name] = draws[:3]

    def step(self, op: tuple[object, ...]) -> None:
        self.ts += 1
        self.act(op)
        self.events += self.state.collect()

    def act(self, op: tuple[object, ...]) -> None:
        kind = op[0]
        if kind == "decide":
            _, agent, bets, sells, failed = op
            assert isinstance(agent, str) and isinstance(bets, list) and isinstance(sells, list)
            self.record(
                DecisionMade(
                    cohort="c",
                    ts=self.ts,
                    agent=agent,
                    week=self.ts,
                    action="MIXED" if bets and sells else "BET" if bets else "SELL",
                    bets=bets,
                    sells=sells,
                    error="strategy raised" if failed else None,
                )
            )
            broker = Broker(self.state, rules_for(self.rules))
            broker.execute(agent, self.ts, bets, sells, self.quote)
        elif kind == "sell_held":
            # a sell by position id of something actually held, so sells fill often
            _, agent, index, pct = op
            assert isinstance(agent, str) and isinstance(index, int) and isinstance(pct, float)
            held = sorted(p.id for p in self.state.books[agent].positions.values())
            if held:
                intent = SellIntent(position_id=held[index % len(held)], percentage=pct)
                self.step(("decide", agent, [], [intent], False))
        elif kind == "price":
            _, name, draws = op
            assert isinstance(name, str) and isinstance(draws, list)
            self.reprice(name, draws)
        elif kind == "mark":
            names = sorted(self.prices)
            self.record(
                Marked(
                    cohort="c", ts=self.ts, markets=names, prices=[self.prices[n] for n in names]
                )
            )
        elif kind == "resolve":
            _, name, index, shout = op
            assert isinstance(name, str) and isinstance(index, int)
            if name not in self.state.resolutions:
                outcomes = MARKETS[name]
                winner = outcomes[index % len(outcomes)]
                settle(self.state, name, self.ts, winner.upper() if shout else winner)
        elif kind == "void":
            _, name = op
            assert isinstance(name, str)
            if name not in self.state.resolutions:
                void(self.state, name, self.ts)

    def settle_everything(self) -> None:
        for name in sorted(MARKETS):
            if name not in self.state.resolutions:
                self.ts += 1
                settle(self.state, name, self.ts, MARKETS[name][0])
        self.events += self.state.collect()


def assert_identities(state: CohortState) -> None:
    for book in state.books.values():
        open_cost = math.fsum(p.cost for p in book.positions.values())
        # every buy moves money from cash to cost basis; every sell, settlement and refund moves
        # cost basis back to cash plus its realized profit, so this never changes
        assert math.isclose(book.cash + open_cost - book.realized, CASH, abs_tol=1e-9)
        assert book.cash >= 0.0
        for position in book.positions.values():
            assert position.shares > 0.0 and position.cost > 0.0


history = st.lists(operation(), min_size=4, max_size=40)
rules = st.sampled_from(["v1", "v2"])


@settings(max_examples=150, deadline=None)
@given(rules=rules, ops=history)
def test_accounting_identities_hold_after_every_step(
    rules: str, ops: list[tuple[object, ...]]
) -> None:
    run = Run(rules)
    for op in ops:
        run.step(op)
        assert_identities(run.state)
    run.settle_everything()
    assert_identities(run.state)
    for book in run.state.books.values():
        # with every market settled nothing is open: all the P/L is realized and in cash
        assert book.positions == {}
        assert math.isclose(book.cash, CASH + book.realized, abs_tol=1e-9)


@settings(max_examples=150, deadline=None)
@given(rules=rules, ops=history, finish=st.booleans())
def test_a_rebuilt_log_equals_the_live_state(
    rules: str, ops: list[tuple[object, ...]], finish: bool
) -> None:
    run = Run(rules)
    for op in ops:
        run.step(op)
    if finish:
        run.settle_everything()
    stored = [encode(event) for event in run.events]
    decoded = [decode(payload) for payload in stored]
    assert decoded == run.events
    assert [encode(event) for event in decoded] == stored
    assert Ledger().apply_all(decoded).snapshot() == {"c": run.state.snapshot()}


@settings(max_examples=60, deadline=None)
@given(rules=rules, ops=history, finish=st.booleans(), batch=st.sampled_from([1, 5, 1_000]))
def test_the_fast_rebuild_from_a_store_equals_the_live_state(
    rules: str, ops: list[tuple[object, ...]], finish: bool, batch: int
) -> None:
    """The rebuild leaves orders placed unread, folds pages read ahead on a thread, and still
    gives exactly the live state, in any rules, with any page size."""
    run = Run(rules)
    for op in ops:
        run.step(op)
    if finish:
        run.settle_everything()
    with tempfile.TemporaryDirectory() as tmp, EventStore.open(Path(tmp) / "log.db") as store:
        store.append("c", run.events)
        rebuilt = rebuild(store, batch=batch)
    assert rebuilt.snapshot() == {"c": run.state.snapshot()}


@settings(max_examples=100, deadline=None)
@given(rules=rules, ops=history, finish=st.booleans())
def test_the_collected_events_fold_into_the_same_live_state(
    rules: str, ops: list[tuple[object, ...]], finish: bool
) -> None:
    """What a live cohort recorded and handed over, folded from scratch, is that cohort again:
    the books, and the shares arrays and position records its views read, which agree with
    the books. Nothing recorded stays behind in the queue."""
    run = Run(rules)
    for op in ops:
        run.step(op)
    if finish:
        run.settle_everything()
    assert run.state.pending == []
    again = LiveCohort("c")
    for event in run.events:
        again.apply(event)
    assert again.snapshot() == run.state.snapshot()
    for agent, book in run.state.books.items():
        shares = run.state.shares(agent)
        assert np.array_equal(again.shares(agent), shares)
        assert again.positions_held(agent) == run.state.positions_held(agent)
        held = [(r[0], r[4], r[5]) for r in run.state.positions_held(agent)]
        assert held == [(p.id, p.shares, p.cost) for p in book.positions.values()]
        expected = np.zeros_like(shares)
        for p in book.positions.values():
            expected[run.state.index[p.market], p.outcome] = p.shares
        assert np.array_equal(shares, expected)


@settings(max_examples=100, deadline=None)
@given(rules=rules, ops=history, kept=st.lists(st.booleans(), min_size=1, max_size=60))
def test_holdings_handed_out_keep_the_positions_of_their_time(
    rules: str, ops: list[tuple[object, ...]], kept: list[bool]
) -> None:
    """Holdings are built when first read, yet whenever they are read (at once, after later
    fills and settlements, or never while a fill changes the book) they are the records of
    the moment they were handed out, in the book's order: what a view read eagerly showed."""
    run = Run(rules)
    held = []  # (what was handed out, the records it had to show)
    for k, op in enumerate(ops):
        for agent in AGENTS:
            holdings = run.state.holdings(agent)
            if kept[k % len(kept)]:
                book, index = run.state.books[agent], run.state.index
                then = tuple((p.id, p.market, p.side, p.outcome, p.shares, p.cost, p.last_price,
                              index[p.market]) for p in book.positions.values())  # fmt: skip
                held.append((holdings, then))
            del holdings  # dropped unread: the book changes under no view
        run.step(op)
    for holdings, then in held:
        assert tuple(holdings) == then
    for agent, book in run.state.books.items():
        now = [(r[0], r[4], r[5]) for r in run.state.positions_held(agent)]
        assert now == [(p.id, p.shares, p.cost) for p in book.positions.values()]


def test_histories_do_reach_fills_sells_and_settlements() -> None:
    """Guards the generators above: a history that never fills proves nothing."""
    run = Run("v1")
    run.step(("decide", "ann", [BetIntent(market="a", side="YES", amount=500.0)], [], False))
    run.step(("decide", "ann", [], [SellIntent(market="a", side="YES", percentage=50.0)], False))
    run.step(("void", "a"))
    book = run.state.books["ann"]
    # 500 at 0.5 = 1000 shares; half sold at 0.5 = 250 back; the remaining 250 refunded
    assert (book.n_bets, book.n_sells, book.cash, book.realized) == (1, 1, CASH, 0.0)
    assert_identities(run.state)
