"""The deterministic replay loop: tape + cohort settings + strategies -> events in the store.

One straight line: precompute the as-of price of every universe market at every instant
(arrays), then walk the merged timeline; at a resolution settle, at a mark record prices, at a
decision build each agent's view, call its strategy under the frozen clock and hand its orders
to the broker. Every event is applied to the live state as it is made and written to the store
in batches, so the log and the state never disagree.

Resuming: the loop is deterministic, so a cohort whose stream is already partly in the store is
simply run again; events the store already holds are compared with the regenerated ones (they
must be identical, or the run stops with the version where they diverge) and only the rest are
appended. An interrupted replay therefore ends with the same log as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from freezegun import freeze_time

from arena.cohort import (
    DECISION,
    MARK,
    RESOLUTION,
    CohortConfig,
    build_timeline,
    choose_universe,
    empty_start_detail,
    iso_minute,
    no_decision_detail,
    week_of,
)
from arena.transcript import Transcript
from ledger.errors import LedgerError
from ledger.events import (
    BetIntent,
    CohortClosed,
    CohortOpened,
    DecisionMade,
    DecisionsStopped,
    Event,
    Marked,
    MarketListed,
    OrderFilled,
    PositionRefunded,
    PositionSettled,
    SellIntent,
)
from ledger.projection import CohortState
from ledger.rules import Broker, rules_for, settle, void
from ledger.snapshot import FORMAT, encode_state
from replays.asof import AsOf, UniverseWalk
from replays.tape import Tape
from strategies.api import (
    TRANSCRIPT_FIELDS,
    Context,
    Decision,
    MarketMeta,
    MarketsView,
    PositionView,
    ResolvedMarket,
    RunStopped,
    Strategy,
    StrategyError,
    Trace,
    View,
)
from strategies.loader import build_strategy

if TYPE_CHECKING:
    from ledger.store import EventStore

FLUSH_EVERY = 50_000
SNAPSHOT_EVERY = 200_000
"""A long cohort stores a snapshot of its state at the first flush after this many events
since its last one, so a read of a cohort still running folds at most about this many."""
_TRACE_FIELDS = tuple(f.name for f in dataclasses.fields(Trace) if f.name not in TRANSCRIPT_FIELDS)
_NO_TRACE = {f: getattr(Trace(), f) for f in _TRACE_FIELDS}


class _Clock:
    """freezegun's frozen clock, moved by whole seconds.

    ``tick`` with a timedelta only adds it; ``move_to`` would parse and convert a datetime on
    every decision, which was half of the per-decision cost of the plugin boundary.
    """

    def __init__(self, frozen: Any, ts: int) -> None:
        self._frozen = frozen
        self._ts = ts

    def move_to(self, ts: int) -> None:
        if ts != self._ts:
            self._frozen.tick(timedelta(seconds=ts - self._ts))
            self._ts = ts


class DecisionTimeout(Exception):
    """A strategy ran past its per-decision time limit."""


@dataclass
class CohortRun:
    """The outcome of replaying one cohort."""

    cohort: str
    state: CohortState
    events: int
    appended: int


class _Writer:
    """Buffers a cohort's events and appends them in batches, checking any already stored."""

    def __init__(self, store: EventStore | None, stream: str, state: CohortState) -> None:
        self.store = store
        self.stream = stream
        self.state = state  # every event added has been applied to it; see snapshot()
        self.stored: list[Event] = list(store.read(stream=stream)) if store else []
        self.version = 0
        self.pending: list[Event] = []
        self.appended = 0
        self.snapshot_at = 0

    def add(self, events: list[Event]) -> None:
        for event in events:
            self.version += 1
            if self.version <= len(self.stored):
                if self.stored[self.version - 1] != event:
                    raise LedgerError(
                        f"cohort {self.stream}: the stored log diverges from this replay at "
                        f"version {self.version}; replay into a fresh database"
                    )
                continue
            self.pending.append(event)
        if len(self.pending) >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        if self.store is not None and self.pending:
            start = self.version - len(self.pending)
            self.store.append(self.stream, self.pending, expected_version=start)
            self.appended += len(self.pending)
            if self.version - self.snapshot_at >= SNAPSHOT_EVERY:
                self.snapshot(closing=False)
        self.pending = []

    def snapshot(self, *, closing: bool) -> None:
        """Store the state's image at the current version (a rerun finds it already there).
        Called right after a flush, when the store holds every event up to ``version``; every
        caller applies events to the state before adding them here, so the state is exactly
        the fold of the stream up to ``version``, which ``arena verify`` checks."""
        # a sink that keeps only events (a test's, or a replay into memory) keeps no snapshots
        add_snapshot = getattr(self.store, "add_snapshot", None)
        if add_snapshot is not None:
            add_snapshot(
                self.stream, self.version, encode_state(self.state), fmt=FORMAT, closing=closing
            )
            self.snapshot_at = self.version


class _Deadline:
    """Interrupts a decision that runs past the time limit, with SIGALRM (main thread only).

    Where there is no interval timer (Windows) or the run is not on the main thread, decisions
    are not interrupted: the run goes on without a limit rather than failing.

    The handler is installed once for the whole run (``armed``); each decision only starts
    and stops the timer, which keeps the per-decision cost of the limit to two system calls.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.active = (
            seconds > 0
            and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
        )

    @contextmanager
    def armed(self) -> Iterator[None]:
        if not self.active:
            yield
            return

        def expire(signum: int, frame: Any) -> None:
            raise DecisionTimeout(f"decision took longer than {self.seconds:g} s")

        previous = signal.signal(signal.SIGALRM, expire)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    def start(self) -> None:
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def stop(self) -> None:
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.setflags(write=False)
    return view


def _error_text(exc: BaseException) -> str:
    """First line: the error; then the traceback, so the log explains what went wrong.

    Frames name files without their directories: where the code happens to be installed must
    not change the bytes of the log (the same inputs give the same log on any machine)."""
    report = traceback.TracebackException.from_exception(exc)
    pending = [report]
    while pending:
        link = pending.pop()
        for frame in link.stack:
            frame.filename = os.path.basename(frame.filename)
        pending += [e for e in (link.__cause__, link.__context__) if e is not None]
    return f"{type(exc).__name__}: {exc}\n{''.join(report.format())}"


def _number(x: object) -> float | None:
    """``x`` as a builtin float if it is a finite real number (numpy scalars included)."""
    if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Real):
        return None
    value = float(x)
    return value if math.isfinite(value) else None


def _text(x: object) -> str | None:
    return None if x is None else str(x)


def _checked(decision: object) -> Decision:
    """The decision in builtin types, ready for the broker and the log; else a TypeError saying
    why. Strategies naturally compute with numpy, but the log's encoder takes only builtins: a
    ``numpy.float64`` amount must be converted here, not crash the run at the next flush."""
    if not isinstance(decision, Decision):
        raise TypeError(f"decide() returned {type(decision).__name__}, not a Decision")
    bets = []
    for bet in decision.bets:
        if not isinstance(bet, BetIntent):
            raise TypeError(f"bets must be Bet, not {type(bet).__name__}")
        if not (isinstance(bet.market, str) and isinstance(bet.side, str)):
            raise TypeError(f"bet {bet!r} needs a market id and a side as strings")
        amount, belief = _number(bet.amount), _number(bet.belief)
        if amount is None or (bet.belief is not None and belief is None):
            raise TypeError(f"bet {bet!r} needs a finite amount (and belief, if given)")
        bets.append(
            BetIntent(market=str(bet.market), side=str(bet.side), amount=amount, belief=belief)
        )
    sells = []
    for sell in decision.sells:
        if not isinstance(sell, SellIntent):
            raise TypeError(f"sells must be Sell, not {type(sell).__name__}")
        percentage = _number(sell.percentage)
        if percentage is None:
            raise TypeError(f"sell {sell!r} needs a finite percentage")
        keys = (sell.position_id, sell.market, sell.side)
        if not all(k is None or isinstance(k, str) for k in keys):
            raise TypeError(f"sell {sell!r} needs its position id, market and side as strings")
        sells.append(
            SellIntent(
                percentage=percentage,
                position_id=_text(sell.position_id),
                market=_text(sell.market),
                side=_text(sell.side),
            )
        )
    if not isinstance(decision.reasoning, str):
        raise TypeError("reasoning must be a string")
    if decision.trace is not None and not isinstance(decision.trace, Trace):
        raise TypeError("trace must be a strategies.api.Trace")
    return Decision(bets=bets, sells=sells, reasoning=str(decision.reasoning), trace=decision.trace)


class CohortRunner:
    """Replays one cohort of a tape with its agents into a store (or only in memory)."""

    def __init__(
        self,
        tape: Tape,
        config: CohortConfig,
        *,
        strategies: dict[str, Strategy] | None = None,
        decision_timeout: float = 0.0,
    ) -> None:
        self.tape = tape
        self.config = config
        self.rules = rules_for(config.rules)
        self.cohort = config.cohort_id(tape.hash)
        self.strategies = strategies or {
            name: build_strategy(spec) for name, spec in config.agents.items()
        }
        self.decision_timeout = decision_timeout
        self.universe, self.universe_by = choose_universe(tape, config.start_ts, config.universe)
        if not self.universe:
            raise LedgerError(empty_start_detail(tape, config.start_ts))
        self.timeline = build_timeline(tape, self.universe, config)
        if not self.timeline.decisions:
            raise LedgerError(no_decision_detail(tape, self.timeline, config.start_ts))
        self.ids = tuple(tape.markets[m].id for m in self.universe)
        self.index = {mid: j for j, mid in enumerate(self.ids)}
        self.meta = tuple(self._meta(m) for m in self.universe)
        width = max(len(meta.outcomes) for meta in self.meta)
        self.holdings = {name: np.zeros((len(self.ids), width)) for name in self.strategies}
        # read-only views of the same memory: strategies see every update, and cannot write
        self.shown_holdings = {name: _read_only(h) for name, h in self.holdings.items()}
        self._prepare_prices()

    def _meta(self, m: int, resolved: bool = False) -> MarketMeta:
        """What an agent may know of market ``m`` at the start: its scheduled end, never when
        it actually closed; its volume as of the start (final only for a market that had
        already resolved by then, when final is what it was), else NaN."""
        info = self.tape.markets[m]
        start = self.config.start_ts
        return MarketMeta(
            id=info.id,
            question=info.question,
            outcomes=tuple(info.outcomes),
            category=info.category,
            volume=info.volume if resolved else self.tape.volume_as_of(m, start),
            end_ts=info.end_ts,
            is_binary=info.is_binary,
        )

    def _prepare_prices(self) -> None:
        """Per-market cursors that walk the universe's as-of prices forward with the timeline:
        memory per market, however many instants (``replays.asof``)."""
        self._walk = UniverseWalk(self.tape, self.universe)
        # strategies get views of these arrays: read-only, or one could rewrite them
        self.binary = _read_only(np.array([meta.is_binary for meta in self.meta], dtype=bool))

    def _prices(self, now: AsOf, j: int) -> tuple[float, ...] | None:
        i = int(now.position[j])
        return None if i < 0 else self.tape.point(self.universe[j], i)

    # -- the loop ----------------------------------------------------------------------------

    def run(self, store: EventStore | None = None) -> CohortRun:
        state = CohortState(self.cohort)
        writer = _Writer(store, self.cohort, state)
        broker = Broker(state, self.rules)
        self.transcript = Transcript(self.cohort)

        def emit(events: list[Event]) -> None:
            for event in events:
                state.apply(event)
            writer.add(events)

        start = self.config.start_ts
        emit([self._opened()])
        emit([self._listed(j) for j in range(len(self.universe))])
        settled: set[int] = set()
        deadline = _Deadline(self.decision_timeout)
        with freeze_time(datetime.fromtimestamp(start, UTC)) as frozen, deadline.armed():
            clock = _Clock(frozen, start)
            self._setup(start)
            for ts, kind, payload in self.timeline.steps:
                if kind == RESOLUTION:
                    events = self._resolve(state, payload, ts)
                    self._sync_holdings(state, events)
                    writer.add(events)
                    settled.add(payload)
                elif kind == MARK:
                    emit([self._mark(self._walk.at(ts), ts, settled)])
                elif kind == DECISION:
                    now = self._walk.at(ts)
                    self._decide(state, broker, writer, emit, now, ts, clock, deadline)
                else:
                    emit([self._stopped(ts)])
        closed = CohortClosed(
            cohort=self.cohort,
            ts=self.timeline.end,
            reason=self._close_reason(len(self.universe) - len(settled)),
            state_digest=state.digest(),
        )
        emit([closed])
        writer.flush()
        writer.snapshot(closing=True)
        return CohortRun(self.cohort, state, writer.version, writer.appended)

    def _stopped(self, ts: int) -> DecisionsStopped:
        stop = self.timeline.stop
        assert stop is not None  # the timeline has a STOP step only when it has a stop
        return DecisionsStopped(
            cohort=self.cohort, ts=ts, reason=stop.reason, markets=list(stop.markets)
        )

    def _close_reason(self, unresolved: int) -> str:
        """Why the cohort ended, including when its decisions ended early (and why)."""
        reason = (
            "every market settled"
            if not unresolved
            else f"tape ended with {unresolved} market(s) unresolved"
        )
        stop = self.timeline.stop
        if stop is not None:
            reason += (
                f"; no decision after {iso_minute(stop.covered_until)}, where the tape's "
                f"recording ends with {len(stop.markets)} market(s) still open"
            )
        return reason

    def _opened(self) -> CohortOpened:
        c = self.config
        return CohortOpened(
            cohort=self.cohort,
            ts=c.start_ts,
            start=c.start_ts,
            rules=c.rules,
            cash=c.cash,
            agents=list(c.agents),
            agent_specs=dict(c.agents),
            universe=list(self.ids),
            tape=self.tape.hash,
            decision_cadence=c.decision_cadence,
            mark_cadence=c.mark_cadence,
            seed=c.seed,
            settings={
                "universe_size": c.universe,
                "min_bet": self.rules.min_bet,
                "universe_by": self.universe_by,
            },
        )

    def _listed(self, j: int) -> MarketListed:
        info = self.tape.markets[self.universe[j]]
        return MarketListed(
            cohort=self.cohort,
            ts=self.config.start_ts,
            market=info.id,
            question=info.question,
            outcomes=list(info.outcomes),
            category=info.category,
            volume=info.volume,
            open_ts=info.open_ts,
            close_ts=int(self.timeline.close[j]) if info.close_ts is not None else None,
        )

    def _setup(self, start: int) -> None:
        """Give each strategy its own generator, seeded from the cohort seed and its name.

        A strategy that cannot set up stops the cohort with a one-line StrategyError, before
        anything is written: there is no decision to record a failure against yet."""
        before = tuple(
            ResolvedMarket(
                meta=self._meta(m, resolved=True),
                winner=r.winner,
                resolved_ts=r.ts,
                last_price=self.tape.price_at(info.id, r.ts),
            )
            for m, info in enumerate(self.tape.markets)
            if (r := self.tape.resolutions.get(info.id)) is not None and r.ts < start
        )
        for k, (name, strategy) in enumerate(self.strategies.items()):
            seed = np.random.SeedSequence([self.config.seed, k, *name.encode()])
            context = Context(
                cohort=self.cohort,
                start=start,
                rules=self.config.rules,
                cash=self.config.cash,
                min_bet=self.rules.min_bet,
                max_fraction=self.rules.max_fraction,
                rng=np.random.default_rng(seed),
                universe=self.meta,
                resolved_before=before,
            )
            try:
                strategy.setup(context)
            except Exception as exc:
                raise StrategyError(
                    f"agent {name}: setup failed: {type(exc).__name__}: {exc}"
                ) from exc

    def _resolve(self, state: CohortState, j: int, ts: int) -> list[Event]:
        resolution = self.tape.resolutions[self.ids[j]]
        if resolution.winner is None:
            return void(state, self.ids[j], ts)
        return settle(state, self.ids[j], ts, resolution.winner)

    def _mark(self, now: AsOf, ts: int, settled: set[int]) -> Marked:
        markets, prices = [], []
        for j in range(len(self.universe)):
            if j in settled:
                continue
            quote = self._prices(now, j)
            if quote is not None:
                markets.append(self.ids[j])
                prices.append(list(quote))
        return Marked(cohort=self.cohort, ts=ts, markets=markets, prices=prices)

    def _decide(
        self,
        state: CohortState,
        broker: Broker,
        writer: _Writer,
        emit: Callable[[list[Event]], None],
        now: AsOf,
        ts: int,
        clock: _Clock,
        deadline: _Deadline,
    ) -> None:
        close = self.timeline.close
        yes = now.yes
        open_mask = (ts < close) & ~np.isnan(yes)  # NaN also past a market's coverage
        open_mask.setflags(write=False)  # shared by every agent deciding at this instant
        markets = MarketsView(
            ts=ts,
            ids=self.ids,
            index=self.index,
            meta=self.meta,
            yes=yes,
            open_mask=open_mask,
            volume=now.volume,
            binary=self.binary,
            prices=lambda j: self._prices(now, j),
            history=lambda j, t: self.tape.history(self.universe[j], t),
        )

        def quote(market: str) -> tuple[float, ...] | None:
            j = self.index.get(market)
            return None if j is None else self._prices(now, j)

        week = week_of(self.config.start_ts, ts)
        clock.move_to(ts)
        for name, strategy in self.strategies.items():
            book = state.books[name]
            view = View(
                ts=ts,
                week=week,
                cash=book.cash,
                min_bet=self.rules.min_bet,
                max_fraction=self.rules.max_fraction,
                markets=markets,
                shares=self.shown_holdings[name],
                cap_per_decision=self.rules.cap == "per_decision",
                _positions=lambda book=book: tuple(  # type: ignore[misc]
                    PositionView(
                        id=p.id,
                        market=p.market,
                        side=p.side,
                        shares=p.shares,
                        cost=p.cost,
                        price=self._side_price(now, p.market, p.outcome, p.last_price),
                    )
                    for p in book.positions.values()
                ),
            )
            error = None
            try:
                deadline.start()
                try:
                    decided = strategy.decide(view)
                finally:
                    deadline.stop()
                decision = _checked(decided)
            except RunStopped as exc:
                raise RunStopped(
                    f"agent {name}, cohort {self.cohort}, week {week}: {exc}"
                ) from None
            except Exception as exc:
                decision, error = Decision.hold(), _error_text(exc)
            # the model's bookkeeping, field for field (Trace mirrors DecisionMade's fields)
            t = decision.trace
            trace = {f: getattr(t, f) for f in _TRACE_FIELDS} if t else _NO_TRACE
            if error:
                trace = {**trace, "error": error}
            emit(
                [
                    DecisionMade(
                        cohort=self.cohort,
                        ts=ts,
                        agent=name,
                        week=week,
                        action=decision.action,
                        reasoning=decision.reasoning,
                        bets=list(decision.bets),
                        sells=list(decision.sells),
                        **trace,
                    ),
                    *self.transcript.events(ts, name, week, t),
                ]
            )
            if decision.bets or decision.sells:
                events = broker.execute(name, ts, decision.bets, decision.sells, quote)
                self._sync_holdings(state, events)
                writer.add(events)

    def _sync_holdings(self, state: CohortState, events: list[Event]) -> None:
        """Keep each agent's shares array equal to its open positions after fills and payouts."""
        for e in events:
            if isinstance(e, OrderFilled | PositionSettled | PositionRefunded):
                j = self.index[e.market]
                position = state.books[e.agent].positions.get((e.market, e.side))
                outcome = state.side_of(e.market, e.side)
                if outcome is not None:
                    self.holdings[e.agent][j, outcome[1]] = position.shares if position else 0.0

    def _side_price(self, now: AsOf, market: str, outcome: int, fallback: float) -> float:
        prices = self._prices(now, self.index[market])
        if prices is None or math.isnan(prices[outcome]):
            return fallback
        return prices[outcome]
