"""The deterministic replay loop: tape + cohort settings + strategies -> events in the store.

One straight line: walk the merged timeline with per-market as-of cursors; at a resolution
settle, at a mark record prices, at a decision build each agent's view, call its strategy under
the frozen clock and hand its orders to the broker. Every event, whoever makes it (this loop,
the broker, settlement), is recorded on the live state (``ledger.live.LiveCohort``: applied and
queued in one call), and after each step the loop saves the queue to the cohort's stream
(``ledger.stream.StreamWriter``: batched appends, resume by comparing the stored prefix,
snapshots at intervals), so the log and the state never disagree.

Stepping: ``CohortRunner.steps`` is the same loop as a generator that pauses after each step of
the timeline (``arena step --tape`` drives it); ``run`` drains it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import numpy as np
from freezegun import freeze_time

from arena.boundary import oslimits
from arena.boundary.agents import Agent, InProcess
from arena.boundary.past import PastFeed, frozen
from arena.boundary.sandbox import Clock, RunInterrupted, Sandbox
from arena.boundary.views import Views, priced_positions
from arena.run.cohort import CohortConfig, iso_minute, start_text, week_of
from arena.run.execution import DEFAULT as DEFAULT_EXECUTION
from arena.run.execution import (
    agent_latencies,
    best_bids,
    book_mids,
    fee_table,
    fees_for,
    liquidation_marks,
    venue,
)
from arena.run.pace import DecisionSeen, Pace, Watcher, failures
from arena.run.plan import DECISION, LISTING, MARK, RESOLUTION, STOP, CohortPlan, plan_cohort
from arena.run.settings import RunSettings
from arena.run.transcript import Transcript
from ledger.errors import LedgerError
from ledger.events import (
    EVENT_TYPES,
    CohortClosed,
    CohortOpened,
    DecisionMade,
    DecisionsStopped,
    Marked,
    MarketListed,
    ModelCalled,
    decode,
)
from ledger.live import LiveCohort
from ledger.projection import CohortState
from ledger.rules import Broker, rules_for, settle, void
from ledger.store import EventStore
from ledger.stream import EventSink, StreamWriter
from replays.asof import AsOf, UniverseWalk
from replays.books import Books
from replays.tape import Tape
from strategies.api import (
    TRANSCRIPT_FIELDS,
    Context,
    Decision,
    MarketMeta,
    ResolvedMarket,
    RunStopped,
    Strategy,
    Trace,
)
from strategies.llm.resume import answering
from strategies.loader import build_strategy

T = TypeVar("T")
_TRACE_FIELDS = tuple(f.name for f in dataclasses.fields(Trace) if f.name not in TRANSCRIPT_FIELDS)
_NO_TRACE = {f: getattr(Trace(), f) for f in _TRACE_FIELDS}


@dataclass(frozen=True)
class Step:
    """Where a stepped replay is after one step (``CohortRunner.steps``)."""

    kind: str
    """``"open"`` (the cohort opened, its markets listed, its agents set up), ``"resolution"``,
    ``"mark"``, ``"listing"`` (a rolling cohort's market listed), ``"decision"`` (every agent
    decided at the instant), ``"stop"`` (decisions
    ended early) or ``"close"`` (the cohort closed and its closing snapshot is stored)."""
    ts: int
    """The step's instant (unix seconds)."""
    version: int
    """The cohort stream's version after the step: how many of its events exist so far (in
    the store once flushed; with ``flush_each_step``, at once)."""


STEP_KINDS = {
    RESOLUTION: "resolution", MARK: "mark", LISTING: "listing", DECISION: "decision", STOP: "stop",
}  # fmt: skip


def _drain(steps: Generator[Step, None, T]) -> T:
    """Run a generator to its end and return its return value."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            value: T = done.value
            return value


@dataclass
class CohortRun:
    """The outcome of replaying one cohort."""

    cohort: str
    state: CohortState
    events: int
    appended: int


class CohortRunner:
    """Replays one cohort of a tape with its agents into a store (or only in memory).

    ``settings`` is the cohort and how to run it (``arena.run.settings.RunSettings``); a bare
    ``CohortConfig`` runs with the default ``RunOptions``. ``options.isolate`` runs each
    agent's code in its own worker process (``arena.boundary.isolated``) instead of in this one
    (``arena.boundary.agents.InProcess``); honest agents log the same bytes. ``strategies`` replaces
    the agents' specs with ready objects (benchmarks and tests: such a cohort is not
    reproducible from its log alone). ``plan`` is the cohort's plan where the caller made it
    already (the driver plans every cohort of a run before any starts); else it is made here."""

    def __init__(
        self,
        tape: Tape,
        settings: RunSettings | CohortConfig,
        *,
        plan: CohortPlan | None = None,
        strategies: dict[str, Strategy] | None = None,
        books: Books | None = None,
    ) -> None:
        if isinstance(settings, CohortConfig):
            settings = RunSettings(cohort=settings)
        config = settings.cohort
        self.tape = tape
        self.config = config
        self.rules = rules_for(config.rules)
        self.cohort = config.cohort_id(tape.hash)
        self.start_label = start_text(config.start_ts)
        # under --isolate a plugin is imported and built in its worker only, never here
        self.strategies: dict[str, Strategy | str] = (
            dict(strategies)
            if strategies
            else {
                name: spec if settings.options.isolate else build_strategy(spec)
                for name, spec in config.agents.items()
            }
        )
        self.confinement = oslimits.plan()  # what --isolate's workers are held to, logged
        self.decision_timeout = settings.options.decision_timeout
        self.commit_every = settings.options.commit_every
        self.watch: Watcher | None = None
        """Told of each decision as it is made (the progress display); never logged."""
        self.stop_signal: int | None = None
        """A signal that cuts the run as a Ctrl-C does (``Sandbox.stop``): an engine's worker's,
        how its driver passes on a Ctrl-C the worker itself ignores."""
        self.isolate = settings.options.isolate
        self.stored_calls: list[tuple[str, ModelCalled]] = []
        """The model calls of the stored prefix a run resumes (each isolated agent's go to its
        worker, which serves them again as ``answering`` does here)."""
        if (books.hash if books is not None else None) != config.books:
            given = books.hash[:12] if books is not None else "none"
            raise LedgerError(
                f"cohort {self.cohort} meets the books {str(config.books)[:12]}, given {given}"
            )
        self.books = books
        plan = plan or plan_cohort(tape, config)
        self.universe = list(plan.universe)
        self.universe_by = plan.universe_by
        self.schedule = plan.schedule
        self.plan = plan
        self.listed_ts = frozen(np.array(plan.listed or [config.start_ts] * len(plan.universe),
                                         dtype=np.int64))  # fmt: skip
        """When each universe market lists: the start, or later in a rolling cohort."""
        self.ids = tuple(tape.markets[m].id for m in self.universe)
        self.index = {mid: j for j, mid in enumerate(self.ids)}
        self.meta = tuple(self._meta(m) for m in self.universe)
        self._paths: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._prepare_prices()

    def _meta(self, m: int, resolved: bool = False) -> MarketMeta:
        """What an agent may know of market ``m`` at the start: its scheduled end, never when
        it actually closed; its volume as of the start where the tape records volume points,
        else NaN, or the final volume for a market that had already resolved by then (with no
        points to say otherwise, final is what it was)."""
        info = self.tape.markets[m]
        volume = self.tape.volume_as_of(m, self.config.start_ts)
        return MarketMeta(
            id=info.id,
            question=info.question,
            outcomes=tuple(info.outcomes),
            category=info.category,
            volume=info.volume if resolved and math.isnan(volume) else volume,
            end_ts=info.end_ts,
            is_binary=info.is_binary,
        )

    def _prepare_prices(self) -> None:
        """Per-market cursors that walk the universe's as-of prices forward with the timeline:
        memory per market, however many instants (``replays.asof``)."""
        self._walk = UniverseWalk(self.tape, self.universe)
        self.yes_column = frozen(
            np.array([self.tape.markets[m].yes_column for m in self.universe], dtype=np.int64)
        )

    def _past(self) -> PastFeed:
        """The universe's series, for the boundary to reveal to agents as time passes."""
        return PastFeed(self.tape, self.universe)

    def _prices(self, now: AsOf, j: int) -> tuple[float, ...] | None:
        i = int(now.position[j])
        return None if i < 0 else self.tape.point(self.universe[j], i)

    # -- the loop ----------------------------------------------------------------------------

    def run(self, store: EventSink | None = None) -> CohortRun:
        """Replay the whole cohort into ``store`` (or only in memory), appending in batches."""
        return _drain(self._replay(store, flush_each_step=False))

    def steps(
        self, store: EventSink | None = None, *, flush_each_step: bool = False
    ) -> Generator[Step, None, CohortRun]:
        """The replay one step at a time: a ``Step`` after the cohort opens, after each
        resolution, mark, decision instant and stop of the timeline, and after it closes; the
        generator's return value (``StopIteration.value``) is the ``CohortRun``.

        With ``flush_each_step`` every event of a step is committed to the store before its
        ``Step`` is yielded, so another process reading the store sees the log up to
        ``Step.version``; without it events are appended in batches, as ``run`` does.

        Meant to be consumed in a process of its own (``arena step --tape`` does): between
        yields the generator keeps the frozen clock (freezegun patches ``time`` and
        ``datetime`` process-wide) and the plugin sandbox (signal handlers, guarded exits)
        in force for the whole process. Closing the generator early (``close()``, or
        dropping it) leaves them and the agents' workers as a finished run does; events of
        the steps already yielded are in the store when ``flush_each_step`` was given."""
        return self._replay(store, flush_each_step=flush_each_step)

    def _replay(
        self, sink: EventSink | None, *, flush_each_step: bool
    ) -> Generator[Step, None, CohortRun]:
        """The loop, committing as the run goes (``Pace``); the model answers of a stored
        prefix served again, not asked (``strategies.llm.resume``). A Ctrl-C commits what
        was recorded, the decision it cut short with its calls included, and stops the run,
        which the same command resumes."""
        self.stored_calls = _stored_calls(sink, self.cohort)  # isolated workers get theirs
        with answering(self.stored_calls):
            return (yield from self._walk_schedule(sink, flush_each_step=flush_each_step))

    def _walk_schedule(
        self, sink: EventSink | None, *, flush_each_step: bool
    ) -> Generator[Step, None, CohortRun]:
        state = LiveCohort(self.cohort)
        writer = StreamWriter(sink, state)
        # a stepped replay commits at each step, never inside one
        self.pace = Pace(writer, math.inf if flush_each_step else self.commit_every)
        c = self.config
        shared = c.liquidity == "shared"
        at = venue(self.tape, c.execution, c.fees, self.books, c.latency_ms, shared,
                   think=c.latency == "llm", per_agent=c.latency_by_agent)  # fmt: skip
        broker = Broker(state, self.rules, at)
        self.transcript = Transcript(self.cohort)

        def saved(kind: str, ts: int) -> Step:
            """The step's events, drained from the state to the stream (committed now with
            ``flush_each_step``, else in the next batch)."""
            writer.save()
            if flush_each_step:
                writer.flush()
            else:
                self.pace.tick()
            return Step(kind, ts, writer.version)

        start = self.config.start_ts
        state.record(self._opened())
        for j in range(self.plan.listed_by(start)):
            state.record(self._listed(j))
        settled: set[int] = set()
        past = self._past()
        sandbox = Sandbox(self.decision_timeout, self.stop_signal)
        with (
            freeze_time(datetime.fromtimestamp(start, UTC)) as frozen_time,
            sandbox.guarded(),
            past.shown() as history,
            self._agents(sandbox, past) as agents,
        ):
            views = Views(self.ids, self.meta, past.layout, history, self.strategies, self.rules)
            views.listed = self.plan.listed_by(start)
            clock = Clock(frozen_time, start)
            try:
                deciding = self._setup(state, agents, start)
                yield saved("open", start)
                for ts, kind, payload in self.schedule.steps:
                    if kind == RESOLUTION:
                        self._resolve(state, payload, ts)
                        settled.add(payload)
                    elif kind == MARK:
                        state.record(self._mark(self._walk.at(ts), ts, settled, state))
                    elif kind == LISTING:
                        state.record(self._listed(payload))
                        views.listed = payload + 1
                    elif kind == DECISION:
                        now = self._walk.at(ts)
                        past.advance(now)
                        clock.move_to(ts)
                        self._decide(state, broker, views, deciding, now, ts)
                    else:
                        state.record(self._stopped(ts))
                    yield saved(STEP_KINDS[kind], ts)
            except RunInterrupted:
                writer.commit()  # what was recorded is a prefix of the whole run's log
                raise
        closed = CohortClosed(
            cohort=self.cohort,
            ts=self.schedule.end,
            reason=self._close_reason(len(self.universe) - len(settled)),
            state_digest=state.digest(),
        )
        state.record(closed)
        writer.close()
        yield Step("close", closed.ts, writer.version)
        return CohortRun(self.cohort, state, writer.version, writer.appended)

    @contextmanager
    def _agents(self, sandbox: Sandbox, past: PastFeed) -> Iterator[dict[str, Agent]]:
        """Each agent's code, in this process or each in a worker of its own."""
        if not self.isolate:
            built = self.strategies  # in process, every agent was built in __init__
            yield {name: InProcess(s, sandbox) for name, s in built.items()}  # type: ignore[arg-type]
            return
        from arena.boundary.isolated import Isolated

        agents: dict[str, Agent] = {}
        try:
            for name, plugin in self.strategies.items():
                facts = (self.ids, self.meta, self.rules)
                seconds = self.decision_timeout
                stored = [row for row in self.stored_calls if row[1].agent == name]
                agents[name] = Isolated(plugin, past, facts, seconds, self.confinement, stored)
            yield agents
        finally:
            for agent in agents.values():
                agent.close()

    def _stopped(self, ts: int) -> DecisionsStopped:
        stop = self.schedule.stop
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
        stop = self.schedule.stop
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
            universe=list(self.ids[: self.plan.listed_by(c.start_ts)]),
            tape=self.tape.hash,
            decision_cadence=c.decision_cadence,
            mark_cadence=c.mark_cadence,
            seed=c.seed,
            settings={
                "universe_size": c.universe,
                "min_bet": self.rules.min_bet,
                "universe_by": self.universe_by,
                **({"listing": c.listing} if c.listing != "start" else {}),
                **self._execution_settings(),
                **({"isolation": self.confinement.summary()} if self.isolate else {}),
            },
        )

    def _execution_settings(self) -> dict[str, str | int]:
        """The execution model and fees, recorded where they are not Forecaster Arena's rule
        (an ``fa`` cohort's opening is the bytes it always was)."""
        c = self.config
        if c.execution == DEFAULT_EXECUTION and c.fees is None and c.books is None:
            return {}
        chosen: dict[str, str | int] = {"execution": c.execution}
        chosen["fees"] = fees_for(c.execution, c.fees)
        chosen |= fee_table(c.fees)  # a user's table, whole
        if c.books is not None:
            chosen |= {"books": c.books, "latency_ms": c.latency_ms, "liquidity": c.liquidity,
                       "marks_at": c.marks_at}  # fmt: skip
            if c.latency is not None:
                chosen["latency"] = c.latency
            chosen |= agent_latencies(c.latency_by_agent)  # --latency FILE, as JSON text
        return chosen

    def _listed(self, j: int) -> MarketListed:
        info = self.tape.markets[self.universe[j]]
        return MarketListed(
            cohort=self.cohort,
            ts=int(self.listed_ts[j]),
            market=info.id,
            question=info.question,
            outcomes=list(info.outcomes),
            category=info.category,
            volume=info.volume,
            open_ts=info.open_ts,
            close_ts=int(self.schedule.close[j]) if info.close_ts is not None else None,
        )

    def _setup(self, state: CohortState, agents: dict[str, Agent], start: int) -> dict[str, Agent]:
        """Give each strategy its own generator, seeded from the cohort seed and its name; the
        agents that set up, by name.

        An agent whose setup fails sits the cohort out: one HOLD at the start records why,
        and the others run as if it were not there."""
        deciding = {}
        for name, agent in agents.items():
            # the name alone, never the agent's place in the cohort: adding an agent before
            # another must not change the other's draws
            seed = np.random.SeedSequence([self.config.seed, *name.encode()])
            context = Context(
                cohort=self.cohort,
                start=start,
                rules=self.config.rules,
                cash=self.config.cash,
                min_bet=self.rules.min_bet,
                max_fraction=self.rules.max_fraction,
                rng=np.random.default_rng(seed),
                universe=tuple(
                    dataclasses.replace(m) for m in self.meta[: self.plan.listed_by(start)]
                ),
                resolved_before=self._resolved_before(start),
            )
            error = self._stop_on(name, start, agent.setup, context)
            if error is None:
                deciding[name] = agent
                continue
            reason = f"sat out the cohort: setup failed: {error}"
            week = week_of(start, start)
            state.record(DecisionMade(cohort=self.cohort, ts=start, agent=name, week=week,
                                      action="HOLD", error=reason))  # fmt: skip
        return deciding

    def _resolved_before(self, start: int) -> tuple[ResolvedMarket, ...]:
        """The markets resolved before the start, built afresh for each agent: a plugin that
        rewrites what it was given changes nothing another agent sees. A recording may hold
        volume points taken after the start (volume goes on being reported after resolution);
        those are cut, like every other series an agent sees."""
        return tuple(
            ResolvedMarket(
                meta=self._meta(m, resolved=True),
                winner=r.winner,
                resolved_ts=r.ts,
                last_price=self.tape.price_at(info.id, r.ts),
                history=self._path(m, r.ts),
                volume_history=tuple(p for p in info.volume_history if p[0] <= start),
            )
            for m, info in enumerate(self.tape.markets)
            if (r := self.tape.resolutions.get(info.id)) is not None and r.ts < start
        )

    def _path(self, m: int, resolved_ts: int) -> tuple[np.ndarray, np.ndarray]:
        """Market ``m``'s price points up to its resolution, read-only: made once per cohort
        and shared by every agent, since none can write through them."""
        found = self._paths.get(m)
        if found is None:
            times, values = self.tape.history(m, resolved_ts)
            found = self._paths[m] = (frozen(np.asarray(times)), frozen(np.asarray(values)))
        return found

    def _stop_on(self, name: str, ts: int, ask: Callable[[Any], T], arg: Any) -> T:
        """``ask(arg)``; a ``RunStopped`` from the agent's code stops the run, naming it."""
        try:
            return ask(arg)
        except RunStopped as exc:
            week = week_of(self.config.start_ts, ts)
            raise RunStopped(f"agent {name}, cohort {self.cohort}, week {week}: {exc}") from None

    def _resolve(self, state: CohortState, j: int, ts: int) -> None:
        resolution = self.tape.resolutions[self.ids[j]]
        if resolution.winner is None:
            void(state, self.ids[j], ts)
        else:
            settle(state, self.ids[j], ts, resolution.winner)

    def _mark(self, now: AsOf, ts: int, settled: set[int], state: CohortState) -> Marked:
        """Every unsettled market's outcome prices at ``ts``: the tape's, or with ``marks_at``
        ``mid`` the midpoint of each outcome's book then, ``bid`` its best bid (0 where nobody
        bids: a position no one would buy is worth nothing sold now); ``liquidation`` adds what
        each agent's holding fetches down the bids (``arena.run.execution.liquidation_marks``)."""
        markets, prices = [], []
        at_bid = self.config.marks_at != "price"
        for j in range(self.plan.listed_by(ts)):  # the listed markets are the universe's first
            if j in settled:
                continue
            quote = self._prices(now, j)
            if quote is not None:
                markets.append(self.ids[j])
                if self.config.marks_at == "mid" and self.books is not None:
                    prices.append(book_mids(self.tape, self.books, self.ids[j], ts * 1000))
                else:
                    prices.append(self._bids(j, ts) if at_bid else list(quote))
        held = None
        if self.config.marks_at == "liquidation" and self.books is not None:
            held = liquidation_marks(self.tape, self.books, state.books,
                                     dict(zip(markets, prices, strict=True)), ts * 1000,
                                     self.config.liquidity == "shared")  # fmt: skip
        return Marked(cohort=self.cohort, ts=ts, markets=markets, prices=prices, held=held)

    def _bids(self, j: int, ts: int) -> list[float]:
        """The best bid of each outcome of universe market ``j`` at ``ts``, from the books."""
        assert self.books is not None, "marks at the bid need books (checked by the config)"
        return best_bids(self.tape, self.books, self.ids[j], ts * 1000)

    def _decide(
        self,
        state: LiveCohort,
        broker: Broker,
        views: Views,
        agents: dict[str, Agent],
        now: AsOf,
        ts: int,
    ) -> None:
        open_mask = (ts < self.schedule.close) & ~np.isnan(now.yes)  # NaN: uncovered
        if self.listed_ts.size and ts < self.listed_ts[-1]:  # listed in order
            open_mask &= self.listed_ts <= ts  # a rolling cohort's markets trade once listed
        views.move_to(ts, now.yes, open_mask, now.volume, now.rows)

        def quote(market: str) -> tuple[float, ...] | None:
            j = self.index.get(market)
            if j is None or j >= views.listed:  # not in the universe, or not listed yet
                return None
            return views.quotes.at(j)  # the prices the agents saw

        week = week_of(self.config.start_ts, ts)
        for name, agent in agents.items():
            book = state.books[name]
            positions = functools.partial(
                priced_positions,
                state.holdings(name),  # type: ignore[arg-type]  # iterated: built when read
                views.yes,
                views.binary,
                self.yes_column,
                views.quotes.at,
            )
            view = views.view(name, week, book.cash, state.shares(name), positions)
            began = self.pace.clock()
            try:
                decision, error = self._stop_on(name, ts, agent.decide, view)
            except RunInterrupted as exc:
                cut = exc.recorded
                if cut is not None and cut[0].trace is not None and cut[0].trace.calls:
                    self._record(state, ts, name, week, *cut)  # its calls are paid for
                raise
            self._record(state, ts, name, week, decision, error)
            del view, positions  # unless the plugin kept them, its fills build no records
            if decision.bets or decision.sells:
                if broker.venue is not None:  # --latency llm: the think time as recorded
                    broker.venue.decided(decision.trace.latency_ms if decision.trace else None)
                broker.execute(name, ts, decision.bets, decision.sells, quote)
            calls = decision.trace.calls if decision.trace else ()
            if self.watch is not None:
                seconds = self.pace.clock() - began
                seen = DecisionSeen(self.cohort, self.start_label, name, week, seconds,
                                    len(calls), failures(calls, error))  # fmt: skip
                self.watch(seen)
            self.pace.tick(asked=bool(calls))

    def _record(
        self,
        state: LiveCohort,
        ts: int,
        name: str,
        week: int,
        decision: Decision,
        error: str | None,
    ) -> None:
        """An agent's decision as the log holds it, its model calls after it."""
        # the model's bookkeeping, field for field (Trace mirrors DecisionMade's fields)
        t = decision.trace
        trace = {f: getattr(t, f) for f in _TRACE_FIELDS} if t else _NO_TRACE
        if error:
            trace = {**trace, "error": error}
        state.record(
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
            )
        )
        for event in self.transcript.events(ts, name, week, t):
            state.record(event)


def _stored_calls(sink: EventSink | None, stream: str) -> list[tuple[str, ModelCalled]]:
    """The model calls the sink already holds of ``stream`` (a killed run's committed prefix),
    in log order; from a log, the stream's rows of that type alone, nothing else decoded."""
    if sink is None:
        return []
    if isinstance(sink, EventStore):
        others = [name for name in EVENT_TYPES if name != "ModelCalled"]
        rows = sink.versioned_payloads(stream, skip=others)
        return [(stream, e) for _, p in rows if isinstance(e := decode(p), ModelCalled)]
    return [(stream, e) for e in sink.read(stream) if isinstance(e, ModelCalled)]
