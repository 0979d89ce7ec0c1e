"""What ``arena step`` shows at one cut of the log, for one agent, as plain data: a ``Screen``.

Everything is read off ``LogTimeline.state_at(cut)`` and the events before the cut: the
markets at the prices last marked before the cut (with the history of those marks, never a
later one), the agent's latest decision with what its orders became, its portfolio valued at
the cut's prices, the standings of every agent (``ledger.leaderboard.cohort_standings``, the
function ``arena report`` uses) and the decision's model calls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import overload

from arena.run.cohort import week_of
from arena.step.frames import Portfolio, portfolio
from arena.step.timeline import LogTimeline, Stop
from ledger.events import (
    DecisionMade,
    DecisionsStopped,
    Event,
    MarketListed,
    MarketResolved,
    MarketVoided,
    ModelCalled,
    OrderFilled,
    OrderRejected,
    PositionRefunded,
    PositionSettled,
)
from ledger.leaderboard import AgentStanding, cohort_standings
from ledger.usage import ModelUsage

SPARK = "▁▂▃▄▅▆▇█"
SPARK_POINTS = 10


def sparkline(prices: list[float]) -> str:
    """Prices in [0, 1] as bars on that absolute scale (a probability's height means the same
    in every row), one character per mark."""
    top = len(SPARK) - 1
    return "".join(SPARK[min(top, max(0, round(p * top)))] for p in prices)


def is_binary(outcomes: Sequence[str]) -> bool:
    """A YES/NO market, shown as its YES price; any other shows each outcome by name."""
    return len(outcomes) == 2 and outcomes[0].lower() == "yes"


@dataclass(frozen=True)
class MarketRow:
    """One unresolved market as marked last before the cut."""

    market: str
    question: str
    outcomes: list[str]
    prices: list[float]
    # per outcome: its price minus its price at the agent's previous decision, and its last
    # marks up to the cut as a sparkline
    changes: list[float | None]
    sparks: list[str]
    held: str

    @property
    def is_binary(self) -> bool:
        return is_binary(self.outcomes)

    @property
    def change(self) -> float | None:
        """The first outcome's (a binary market's YES) change."""
        return self.changes[0] if self.changes else None

    @property
    def spark(self) -> str:
        return self.sparks[0] if self.sparks else ""


class MarketRows(Sequence[MarketRow]):
    """The unresolved, marked markets at a cut, biggest volume first, each row made when first
    read: a screen shows a few dozen of a universe of hundreds, and making all of them (their
    histories, changes, holdings) was most of a redraw. What a row needs is copied out of the
    cut's state when the view is built, so a row read later is still the cut's."""

    def __init__(
        self,
        timeline: LogTimeline,
        ids: list[str],
        listed: dict[str, MarketListed],
        marks: dict[str, list[float]],
        held: dict[str, list[str]],
        cut: int,
        previous: int | None,
    ) -> None:
        self.ids = ids
        self.listed = listed
        self.priced = len(marks)  # resolved ones too: none yet is a replay before its first mark
        self._timeline, self._marks, self._held = timeline, marks, held
        self._cut, self._previous = cut, previous
        self._made: dict[int, MarketRow] = {}

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, k: int) -> MarketRow: ...
    @overload
    def __getitem__(self, k: slice) -> list[MarketRow]: ...
    def __getitem__(self, k: int | slice) -> MarketRow | list[MarketRow]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        k = range(len(self.ids))[k]  # negative indices, and IndexError past the end
        row = self._made.get(k)
        if row is None:
            row = self._made[k] = self._row(self.ids[k])
        return row

    def __iter__(self) -> Iterator[MarketRow]:
        return (self[k] for k in range(len(self)))

    def question(self, k: int) -> str:
        """Row ``k``'s question, without making the row (for searching every row)."""
        return self.listed[self.ids[k]].question

    @cached_property
    def common_start(self) -> str:
        """The words most of the questions begin with (``common_start``), which a narrow
        markets panel leaves out."""
        return common_start([self.listed[m].question for m in self.ids])

    def outcome_lines(self, k: int) -> range:
        """The outcomes row ``k`` shows a line each for (none for a binary market), without
        making the row."""
        outcomes = self.listed[self.ids[k]].outcomes
        return range(0 if is_binary(outcomes) else len(outcomes))

    def _row(self, market: str) -> MarketRow:
        history = self._timeline.marks[market]
        seen = history.upto(self._cut)
        recent = history.prices[max(0, seen - SPARK_POINTS) : seen]
        then = history.upto(self._previous) if self._previous is not None else 0
        before = history.prices[then - 1] if then and recent else None
        prices = list(self._marks[market])
        listed = self.listed[market]
        return MarketRow(
            market=market,
            question=listed.question,
            outcomes=list(listed.outcomes),
            prices=prices,
            changes=[
                recent[-1][k] - before[k] if before is not None else None
                for k in range(len(prices))
            ],
            sparks=[sparkline([p[k] for p in recent]) for k in range(len(prices))],
            held=", ".join(self._held.get(market, [])),
        )


def common_start(questions: Sequence[str]) -> str:
    """The longest run of whole words (with the space after it) that at least half of the
    questions, and two or more, begin with and go on after: "Will a Democrat win " of "Will a
    Democrat win Pennsylvania …", "Will a Democrat win Ohio …" and "Will Trump …". Empty when
    none is shared so widely."""
    words = [q.split(" ") for q in questions]
    need = max(2, (len(words) + 1) // 2)
    start: list[str] = []
    while True:
        n = len(start)
        following = Counter(w[n] for w in words if w[:n] == start and any(w[n + 1 :]))
        if not following:
            break
        word, count = min(following.items(), key=lambda item: (-item[1], item[0]))
        if count < need:
            break
        start.append(word)
    return " ".join(start) + " " if start else ""


@dataclass
class Screen:
    """The screen's content at ``cut``: header, markets, decision, portfolio, standings, calls
    (``build_view`` makes it; the panels of ``arena.step.panels`` draw it)."""

    cut: int
    total: int
    agent: str
    cohort: str
    ts: int
    week: int
    rules: str
    tape: str
    stop: Stop | None
    markets: MarketRows
    decision: DecisionMade | None
    orders: list[OrderFilled | OrderRejected]
    since: list[Event]  # settlements and resolutions between the decision and the cut
    portfolio: Portfolio
    standings: list[AgentStanding]
    calls: list[ModelCalled] = field(default_factory=list)
    usage: ModelUsage = field(default_factory=ModelUsage)
    prompts: dict[str, str] = field(default_factory=dict)


NOTHING_YET = Portfolio(cash=0.0, positions_value=0.0, total_value=0.0, brier=None,
                        brier_paid=None, n_resolved=0, positions=())  # fmt: skip
_OWN = (OrderFilled, OrderRejected, PositionSettled, PositionRefunded)
_ANYONES = (MarketResolved, MarketVoided, DecisionsStopped)
SINCE_SCAN = 20_000
"""How far back from the cut ``since`` looks for what followed the decision: a redraw must not
read a whole log when an agent's last decision is a million events back."""


def build_view(
    timeline: LogTimeline, cut: int, agent: str, standings: list[AgentStanding] | None = None
) -> Screen:
    """The view of ``agent`` at ``cut`` (0 shows the cohort before anything happened);
    ``standings``, when given, are those of another agent's view at the same cut (they are
    every agent's, so switching agents need not rank them again)."""
    state = timeline.state_at(cut)
    events = timeline.events
    at = timeline.last_decision(agent, cut)
    decision = events[at] if at is not None else None
    assert decision is None or isinstance(decision, DecisionMade)
    previous = timeline.last_decision(agent, at) if at is not None else None
    orders: list[OrderFilled | OrderRejected] = []
    calls: list[ModelCalled] = []
    since: list[Event] = []
    if at is not None:
        end = min(cut, timeline.decision_end[at])
        for e in events[at + 1 : end]:
            if isinstance(e, ModelCalled):
                calls.append(e)
            elif isinstance(e, OrderFilled | OrderRejected):
                orders.append(e)
        for e in events[max(end, cut - SINCE_SCAN) : cut]:
            if (isinstance(e, _OWN) and e.agent == agent) or isinstance(e, _ANYONES):
                since.append(e)
    usage = ModelUsage()
    for c in calls:
        usage.add(c)
    book = state.books.get(agent)
    held: dict[str, list[str]] = {}
    if book is not None:
        for p in book.positions.values():
            held.setdefault(p.market, []).append(f"{p.shares:,.0f} {p.side}")
    ids = [m for m in timeline.by_volume if m in state.marks and m not in state.resolutions]
    rows = MarketRows(
        timeline, ids, dict(state.markets), dict(state.marks), held, cut, previous
    )  # fmt: skip
    opened = state.opened
    last = events[cut - 1] if cut else None
    ts = last.ts if last is not None else (opened.start if opened else 0)
    return Screen(
        cut=cut,
        total=len(events),
        agent=agent,
        cohort=timeline.cohort,
        ts=ts,
        # the instant's week, whoever is in view: the agent's last decision may be a week
        # behind (it decides after the agent whose decision this cut follows)
        week=week_of(opened.start, ts) if opened else 0,
        rules=opened.rules if opened else "",
        tape=opened.tape if opened else "",
        stop=timeline.stop_at(cut),
        markets=rows,
        decision=decision,
        orders=orders,
        since=since,
        # before the cohort's opening is folded (cut 0: back from the first stop) no agent
        # has an account yet: nothing held, nothing valued
        portfolio=portfolio(state, agent) if agent in state.books else NOTHING_YET,
        standings=standings
        if standings is not None
        else cohort_standings(state)
        if state.books
        else [],
        calls=calls,
        usage=usage,
        prompts=timeline.prompts,
    )
