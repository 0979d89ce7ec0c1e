"""The strategy plugin API: what a strategy sees, what it returns, and the class it subclasses.

A strategy is a small class::

    from strategies.api import Bet, Decision, Strategy, View

    class Cheap(Strategy):
        \"\"\"Buy $50 of YES in anything priced under 20%.\"\"\"

        def decide(self, view: View) -> Decision:
            bets = [Bet(market=m, side="YES", amount=50) for m in view.markets.ids_where(
                view.markets.yes < 0.2)]
            return Decision(bets=bets, reasoning="cheap YES")

Look-ahead is impossible by construction, as in backtesting.py: the view's arrays are the
prices *at* the decision instant, and ``history`` returns copies that end there, read from
memory that holds no later point (``arena.boundary.past``). There is no handle on the tape itself,
and ``datetime.now()`` inside ``decide`` is the simulated instant.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import pydantic

from ledger.events import BetIntent, ModelCall, SellIntent
from ledger.projection import side_index
from ledger.rules import RuleSet

Bet = BetIntent
"""A bet: ``Bet(market=ID, side="YES"|"NO"|outcome, amount=dollars, belief=P(side wins))``."""

Sell = SellIntent
"""A sell: ``Sell(percentage=1..100, position_id=ID)`` or ``Sell(percentage, market=, side=)``."""


class StrategyError(Exception):
    """A strategy cannot be built or loaded: a bad spec, unknown settings, a missing file."""


class RunStopped(StrategyError):
    """A problem a decision must not paper over with a HOLD: the run stops with this one-line
    error (a replay asking a question its cassette holds no answer to, say). The runner adds
    which agent, cohort and week it was."""


class LookAheadError(RuntimeError):
    """A strategy asked for data after the decision instant."""


@dataclass(frozen=True, slots=True)
class Trace:
    """How a model-backed decision was reached, kept in the log beside the decision itself.

    Its fields are ``DecisionMade``'s own, by name, so the runner copies them across whole;
    except ``calls`` and ``prompts``, the transcript: every attempt at asking a model, which the
    runner logs as one ``ModelCalled`` each after the decision, and the system prompts those
    calls name by digest (``PromptStored``, once per cohort).

    ``error`` notes a problem the strategy recovered from (e.g. an unparseable answer that
    became HOLD); API keys never belong here.
    """

    prompt: str | None = None
    raw_response: str | None = None
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    latency_ms: float | None = None
    retries: int = 0
    error: str | None = None
    calls: tuple[ModelCall, ...] = ()
    prompts: dict[str, str] = field(default_factory=dict)


TRANSCRIPT_FIELDS = ("calls", "prompts")
"""The fields of a ``Trace`` that are logged as events of their own, not in ``DecisionMade``."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What a strategy wants to do now: sells (executed first), bets, and why."""

    bets: Sequence[BetIntent] = ()
    sells: Sequence[SellIntent] = ()
    reasoning: str = ""
    trace: Trace | None = None

    @classmethod
    def hold(cls, reasoning: str = "") -> Decision:
        return cls(reasoning=reasoning)

    @property
    def action(self) -> str:
        if self.bets and self.sells:
            return "MIXED"
        if self.bets:
            return "BET"
        if self.sells:
            return "SELL"
        return "HOLD"


@dataclass(frozen=True, slots=True)
class PositionView:
    """An open position with its side-correct current price (a NO position shows 1 − YES)."""

    id: str
    market: str
    side: str
    shares: float
    cost: float
    price: float

    @property
    def avg_entry(self) -> float:
        return self.cost / self.shares if self.shares else 0.0

    @property
    def value(self) -> float:
        return self.shares * self.price

    @property
    def pnl(self) -> float:
        return self.value - self.cost


@dataclass(frozen=True, slots=True)
class MarketMeta:
    """The static facts of a market that are knowable at the cohort start.

    ``end_ts`` is the *scheduled* end (Polymarket's ``endDate``), known from the market's
    creation; when it actually closed or resolved is not knowable beforehand and is not here.
    ``volume`` is the volume as of the start where the tape knows it, else NaN (never the
    final total; ``MarketsView.volume`` has it as of each decision instant)."""

    id: str
    question: str
    outcomes: tuple[str, ...]
    category: str | None
    volume: float
    end_ts: int | None
    is_binary: bool


History = Callable[[int, int, int | None], tuple[np.ndarray, np.ndarray]]
"""(market index, instant, since) -> (times, outcome prices) of the points at or after
``since`` (every point when None) up to and including the instant."""

Prices = Callable[[int], tuple[float, ...] | None]
"""market index -> all outcome prices at the decision instant, or None before any point."""


class MarketsView:
    """The universe at one instant, array-backed: nothing per market is built until asked.

    ``yes[i]`` is the YES price of binary market ``ids[i]`` (of its first outcome otherwise),
    NaN when the market has no price yet (or the tape's recording no longer covers it);
    ``open[i]`` says whether it can be traded now; ``volume[i]`` is its volume as of now where
    the tape knows it, else NaN.
    """

    __slots__ = (
        "_history", "_index", "_meta", "_prices", "binary", "ids", "open", "ts", "volume", "yes",
    )  # fmt: skip

    def __init__(
        self,
        *,
        ts: int,
        ids: tuple[str, ...],
        index: dict[str, int],
        meta: Sequence[MarketMeta],
        yes: np.ndarray,
        open_mask: np.ndarray,
        volume: np.ndarray,
        binary: np.ndarray,
        prices: Prices,
        history: History,
    ) -> None:
        self.ts = ts
        self.ids = ids
        self._index = index
        self._meta = meta
        self.yes = yes
        self.open = open_mask
        self.volume = volume
        self.binary = binary
        self._prices = prices
        self._history = history

    def __len__(self) -> int:
        return len(self.ids)

    def index(self, market: str) -> int:
        try:
            return self._index[market]
        except KeyError:
            raise KeyError(f"market {market!r} is not in the universe") from None

    def meta(self, market: str) -> MarketMeta:
        return self._meta[self.index(market)]

    def meta_at(self, i: int) -> MarketMeta:
        """The metadata of ``ids[i]``, for code that walks the universe by index."""
        return self._meta[i]

    def prices(self, market: str) -> tuple[float, ...] | None:
        """Every outcome's price now, in outcome order."""
        return self._prices(self.index(market))

    def ids_where(self, mask: np.ndarray) -> list[str]:
        """The ids of the markets selected by a boolean mask over the universe."""
        return [self.ids[i] for i in np.flatnonzero(mask)]

    def history(
        self, market: str, until: int | None = None, *, since: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Price points of ``market`` up to the decision instant (or an earlier ``until``), and
        only those at or after ``since`` if given: a strategy that looks back over a window
        should say so, since only the points it gets are copied (a whole history at every
        decision costs the square of the decisions over a run)."""
        t = self.ts if until is None else until
        if t > self.ts:
            raise LookAheadError(
                f"history of {market} until {t} asked for at {self.ts}: that is the future"
            )
        return self._history(self.index(market), t, since)


@dataclass
class View:
    """Everything knowable by one agent at one decision instant, read-only.

    ``shares[i, k]`` is how many shares of outcome ``k`` of market ``markets.ids[i]`` the agent
    holds (column 0 is YES and column 1 NO for a binary market): the array form of
    ``positions`` for strategies that look at the whole universe at once.
    """

    ts: int
    week: int
    cash: float
    rules: RuleSet
    """The cohort's rule set, whole: the one the broker judges this decision's orders by."""
    markets: MarketsView
    shares: np.ndarray
    _positions: Callable[[], tuple[PositionView, ...]] = field(repr=False)

    @property
    def time(self) -> datetime:
        return datetime.fromtimestamp(self.ts, UTC)

    @property
    def min_bet(self) -> float:
        return self.rules.min_bet

    @property
    def max_fraction(self) -> float:
        return self.rules.max_fraction

    @property
    def cap_per_decision(self) -> bool:
        """True under rules v2: a decision's bets share one 25% allowance instead of each bet
        being capped against the cash the previous one left (v1)."""
        return self.rules.cap == "per_decision"

    @property
    def max_bet(self) -> float:
        return self.max_fraction * self.cash

    @cached_property
    def positions(self) -> tuple[PositionView, ...]:
        return self._positions()

    def budget(self) -> Budget:
        """What the broker will accept from this decision's bets, one bet after another."""
        return Budget(self.cash, self.rules)

    def position(self, market: str, side: str) -> PositionView | None:
        """The open position on ``side`` of ``market`` (sides spelled as the broker takes them)."""
        found = side_index(self.markets.meta(market).outcomes, side)
        if found is None:
            return None
        return next((p for p in self.positions if p.market == market and p.side == found[0]), None)


class Budget:
    """Sizes successive bets of one decision so the broker accepts them (methodology §1.7).

    It asks the rule set the broker asks (:meth:`ledger.rules.RuleSet.allowance`): under v1
    each bet may be at most ``max_fraction`` of the cash left after the bets before it; under
    v2 all bets together share ``max_fraction`` of the starting cash. Sizing with this instead
    of ``view.max_bet`` avoids rejections from the second bet on.
    """

    def __init__(self, cash: float, rules: RuleSet) -> None:
        self.cash = cash
        self.rules = rules
        self.spent = 0.0

    def room(self) -> float:
        """The largest next bet, in whole cents."""
        return math.floor(max(self.rules.allowance(self.cash, self.spent), 0.0) * 100) / 100

    def take(self, wanted: float) -> float:
        """``wanted`` cut to the room left, or 0.0 if that is below the minimum bet; what is
        returned counts as spent."""
        amount = min(wanted, self.room())
        if amount < self.rules.min_bet:
            return 0.0
        self.spent += amount
        return amount


@dataclass(frozen=True, slots=True)
class ResolvedMarket:
    """A market that resolved before the cohort started, for strategies that learn.

    ``history`` is its price path up to its resolution, ``(times, prices)`` with one column
    per outcome in outcome order, read-only; ``volume_history`` its volume points ``(t,
    volume)`` as the tape recorded them (each known from its instant on). Both end before the
    cohort starts, so learning from them cannot see the cohort's future."""

    meta: MarketMeta
    winner: str | None
    resolved_ts: int
    last_price: tuple[float, ...] | None
    history: tuple[np.ndarray, np.ndarray] | None = None
    volume_history: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True, slots=True)
class Context:
    """What ``setup`` gets once per cohort."""

    cohort: str
    start: int
    rules: str
    cash: float
    min_bet: float
    max_fraction: float
    rng: np.random.Generator
    universe: tuple[MarketMeta, ...]
    resolved_before: tuple[ResolvedMarket, ...] = ()


class NoSettings(pydantic.BaseModel):
    """Settings of a strategy that has none."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


class Strategy:
    """Base class of every strategy. Override ``decide``; optionally ``setup`` and ``Settings``.

    ``Settings`` is a pydantic model: unknown or mistyped settings are rejected with the field
    named, before a cohort starts.
    """

    Settings: ClassVar[type[pydantic.BaseModel]] = NoSettings
    description: ClassVar[str] = ""

    def __init__(self, settings: pydantic.BaseModel | None = None, **values: Any) -> None:
        self.settings = settings if settings is not None else self.settings_for(values)(**values)
        self.rng: np.random.Generator = np.random.default_rng(0)

    @classmethod
    def settings_for(cls, values: Mapping[str, Any]) -> type[pydantic.BaseModel]:
        """The model that validates ``values``: ``Settings``, unless which settings exist
        depends on the values themselves (a trader's on its ``forecaster``)."""
        return cls.Settings

    @classmethod
    def listed_settings(cls) -> dict[str, type[pydantic.BaseModel]]:
        """Every settings model a spec of this strategy may draw on, for ``arena strategies``:
        ``""`` for its own, else what the others belong to (a forecaster's name)."""
        return {"": cls.Settings}

    def setup(self, context: Context) -> None:
        """Called once per cohort before the first decision; keeps the seeded generator."""
        self.rng = context.rng

    def decide(self, view: View) -> Decision:
        raise NotImplementedError
