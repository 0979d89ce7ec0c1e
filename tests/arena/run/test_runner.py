"""The deterministic replay loop: determinism, resume, knowable-only views, errors, universe.

Most tests run on the hand tape of ``conftest.py`` (its table of points is in the module
docstring there), so every price, instant and balance below can be checked with a pencil.
"""

from __future__ import annotations

import json
import signal
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.run.cohort import CohortConfig
from arena.run.plan import select_universe
from arena.run.runner import CohortRun, CohortRunner
from arena.run.settings import RunOptions, RunSettings
from ledger.errors import LedgerError
from ledger.events import (
    AnyEvent,
    CohortClosed,
    CohortOpened,
    DecisionMade,
    DecisionsStopped,
    Marked,
    MarketListed,
    MarketResolved,
    OrderFilled,
    OrderRejected,
    PositionSettled,
)
from ledger.projection import Ledger
from ledger.store import EventStore
from replays.tape import Tape
from strategies.api import Bet, Context, Decision, Sell, Strategy, View
from strategies.builtin.hold import Hold
from tests.conftest import DAY, START, WEEK, hand_config

E = TypeVar("E")

# -- helpers -------------------------------------------------------------------------------------


def run_into(
    db: Path,
    tape: Tape,
    config: CohortConfig,
    strategies: dict[str, Strategy] | None = None,
    **options: Any,
) -> CohortRun:
    """Replay ``config`` into ``db``; ``options`` are ``RunOptions``' fields."""
    settings = RunSettings(cohort=config, options=RunOptions(**options))
    with EventStore.open(db) as store:
        return CohortRunner(tape, settings, strategies=strategies).run(store)


def stored(db: Path) -> list[AnyEvent]:
    with EventStore.open(db, readonly=True) as store:
        return list(store.read())


def digest(db: Path) -> str:
    with EventStore.open(db, readonly=True) as store:
        return store.digest()


def of_type(events: list[AnyEvent], kind: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, kind)]


def decisions_of(events: list[AnyEvent], agent: str) -> list[DecisionMade]:
    return [e for e in of_type(events, DecisionMade) if e.agent == agent]


def first_line(error: str | None) -> str:
    assert error is not None
    return error.splitlines()[0]


def synthetic_config(**overrides: Any) -> CohortConfig:
    values: dict[str, Any] = {
        "start": START,
        "agents": {"rnd": "random?bets=3", "fav": "favourite"},
        "universe": 6,
        "seed": 11,
    }
    return CohortConfig(**(values | overrides))


class Recorder(Strategy):
    """Holds, and remembers what each call could see; subclasses decide differently."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict[str, Any]] = []

    def decide(self, view: View) -> Decision:
        times, _ = view.markets.history("a")
        self.seen.append(
            {
                "ts": view.ts,
                "now": datetime.now(UTC),
                "time": time.time(),
                "a": float(view.markets.yes[view.markets.index("a")]),
                "b": view.markets.prices("b"),
                "history_a": [int(t) - START for t in times],
                "open": view.markets.open.tolist(),
                "cash": view.cash,
                "shares": view.shares.copy(),
            }
        )
        return Decision.hold()


# -- determinism ---------------------------------------------------------------------------------


def test_same_config_twice_gives_the_same_log(tmp_path: Path, synthetic_tape: Tape) -> None:
    config = synthetic_config()
    one = run_into(tmp_path / "one.db", synthetic_tape, config)
    two = run_into(tmp_path / "two.db", synthetic_tape, config)
    assert one.events == two.events > 50
    assert digest(tmp_path / "one.db") == digest(tmp_path / "two.db")
    # the seeded random choices are part of what repeats: both agents traded
    assert {e.agent for e in of_type(stored(tmp_path / "one.db"), OrderFilled)} == {"rnd", "fav"}


def test_a_seeded_agent_draws_the_same_whoever_joins_the_cohort(
    tmp_path: Path, synthetic_tape: Tape
) -> None:
    """The generator is seeded from the cohort seed and the agent's name, not its place: an
    agent added before ``rnd`` once changed every one of its bets."""
    alone = synthetic_config(agents={"rnd": "random?bets=3"})
    joined = synthetic_config(agents={"a": "hold", "b": "favourite", "rnd": "random?bets=3"})
    run_into(tmp_path / "alone.db", synthetic_tape, alone)
    run_into(tmp_path / "joined.db", synthetic_tape, joined)

    def fills(db: Path) -> list[tuple[str, str, float]]:
        return [(f.market, f.side, f.amount) for f in of_type(stored(db), OrderFilled)
                if f.agent == "rnd"]  # fmt: skip

    assert fills(tmp_path / "alone.db") == fills(tmp_path / "joined.db") != []


# -- resume --------------------------------------------------------------------------------------


@pytest.fixture
def crash_on_third_append(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Small batches, and an append that dies (writing nothing) after two batches went in."""
    monkeypatch.setattr("ledger.stream.FLUSH_EVERY", 10)
    real_append = EventStore.append
    sizes: list[int] = []

    def append(self: EventStore, stream: str, events: Any, expected_version: Any = None) -> int:
        if len(sizes) == 2:
            raise RuntimeError("simulated crash")
        sizes.append(len(events))
        return real_append(self, stream, events, expected_version)

    monkeypatch.setattr(EventStore, "append", append)
    return sizes


def test_interrupted_replay_resumes_to_the_same_log(
    tmp_path: Path,
    synthetic_tape: Tape,
    crash_on_third_append: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = synthetic_config()
    crashed = tmp_path / "crashed.db"
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_into(crashed, synthetic_tape, config)
    committed = sum(crash_on_third_append)
    assert crash_on_third_append[0] >= 10 and len(stored(crashed)) == committed
    monkeypatch.undo()  # the real append, and batches of the default size again

    whole = run_into(tmp_path / "whole.db", synthetic_tape, config)
    resumed = run_into(crashed, synthetic_tape, config)
    assert resumed.appended == whole.events - committed
    assert digest(crashed) == digest(tmp_path / "whole.db")
    with EventStore.open(crashed, readonly=True) as store:
        rows = list(store.read_with_seq())
    assert [version for _, _, version, _ in rows] == list(range(1, whole.events + 1))
    assert [seq for seq, _, _, _ in rows] == list(range(1, whole.events + 1))
    assert resumed.state.snapshot() == whole.state.snapshot()


def test_rerunning_a_finished_cohort_appends_nothing(tmp_path: Path, synthetic_tape: Tape) -> None:
    db = tmp_path / "run.db"
    first = run_into(db, synthetic_tape, synthetic_config())
    before = digest(db)
    again = run_into(db, synthetic_tape, synthetic_config())
    assert (first.appended, again.appended, again.events) == (first.events, 0, first.events)
    assert digest(db) == before and len(stored(db)) == first.events


class Buyer(Strategy):
    """Buys $100 of YES in market a at every decision (an int amount, as users write it)."""

    def decide(self, view: View) -> Decision:
        return Decision(bets=[Bet(market="a", side="YES", amount=100)], reasoning="buy a")


def test_a_log_that_diverges_from_the_replay_is_refused(tmp_path: Path, hand_tape: Tape) -> None:
    db = tmp_path / "run.db"
    config = hand_config({"x": "hold"})
    run_into(db, hand_tape, config)
    before = digest(db)
    # same cohort id (same config and tape), different strategy code: the first decision differs.
    # Versions: 1 CohortOpened, 2-4 MarketListed, 5 the mark at START, 6 the first decision.
    with pytest.raises(LedgerError, match="diverges from this replay at version 6"):
        run_into(db, hand_tape, config, strategies={"x": Buyer()})
    assert digest(db) == before


# -- only what is knowable -----------------------------------------------------------------------


class Peeker(Strategy):
    def decide(self, view: View) -> Decision:
        view.markets.history("a", until=view.ts + 1)
        return Decision(bets=[Bet(market="a", side="YES", amount=100)])


def test_looking_ahead_is_a_recorded_error_and_the_cohort_goes_on(
    tmp_path: Path, hand_tape: Tape
) -> None:
    db = tmp_path / "run.db"
    config = hand_config({"peek": "hold", "hold": "hold"})
    run_into(db, hand_tape, config, strategies={"peek": Peeker(), "hold": Hold()})
    events = stored(db)
    peeks = decisions_of(events, "peek")
    assert [d.ts - START for d in peeks] == [0, WEEK, 2 * WEEK]
    for d in peeks:
        assert (d.action, d.bets) == ("HOLD", [])
        assert first_line(d.error) == (
            f"LookAheadError: history of a until {d.ts + 1} asked for at {d.ts}: that is the future"
        )
    assert all(d.error is None for d in decisions_of(events, "hold"))
    assert not of_type(events, OrderFilled)
    assert isinstance(events[-1], CohortClosed)


def test_decide_sees_the_simulated_instant_and_nothing_later(
    tmp_path: Path, hand_tape: Tape
) -> None:
    probe = Recorder()
    run_into(
        tmp_path / "run.db",
        hand_tape,
        hand_config({"p": "hold"}, decision_cadence="daily"),
        strategies={"p": probe},
    )
    # daily decisions from START while anything can trade: trading ends at +20d+1s -> days 0..20
    assert [s["ts"] - START for s in probe.seen] == [k * DAY for k in range(21)]
    for s in probe.seen:
        assert s["now"] == datetime.fromtimestamp(s["ts"], UTC)  # freezegun: simulated now
        assert s["time"] == s["ts"]
        assert max(s["history_a"]) <= s["ts"] - START
    by_day = {(s["ts"] - START) // DAY: s for s in probe.seen}
    # a's points at -1d 0.4, 0 0.5, +3d 0.6, +7d 0.75, +10d 0.9: the latest at or before t
    assert [by_day[d]["a"] for d in (0, 2, 3, 6, 7, 9, 10, 20)] == [
        0.5,
        0.5,
        0.6,
        0.6,
        0.75,
        0.75,
        0.9,
        0.9,
    ]
    # b's points at -2d 0.2, +1d 0.3, +20d 0.1; NO is 1 - YES
    assert [by_day[d]["b"][0] for d in (0, 1, 19, 20)] == [0.2, 0.3, 0.3, 0.1]
    assert by_day[0]["b"] == (0.2, 1 - 0.2)
    assert by_day[3]["history_a"] == [-DAY, 0, 3 * DAY]
    assert by_day[2]["history_a"] == [-DAY, 0]


# -- strategies that fail ------------------------------------------------------------------------


class Flaky(Strategy):
    """Raises, returns junk, returns a NaN bet, then makes one good bet, then holds."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def decide(self, view: View) -> Any:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("boom")
        if self.calls == 2:
            return {"bets": []}
        if self.calls == 3:
            return Decision(bets=[Bet(market="a", side="YES", amount=float("nan"))])
        if self.calls == 4:
            return Decision(bets=[Bet(market="a", side="YES", amount=60.0)], reasoning="ok")
        return Decision.hold()


def test_failing_decisions_become_recorded_holds(tmp_path: Path, hand_tape: Tape) -> None:
    db = tmp_path / "run.db"
    run_into(
        db,
        hand_tape,
        hand_config({"f": "hold"}, decision_cadence="daily"),
        strategies={"f": Flaky()},
    )
    events = stored(db)
    made = decisions_of(events, "f")
    assert len(made) == 21  # every daily decision still happens
    assert [first_line(d.error) for d in made[:2]] == [
        "RuntimeError: boom",
        "TypeError: decide() returned dict, not a Decision",
    ]
    # the traceback is in the log, naming files without the directories they sit in here
    assert 'File "test_runner.py", line' in made[0].error and "raise RuntimeError" in made[0].error
    assert str(Path(__file__).parent) not in made[0].error
    assert first_line(made[2].error).startswith("TypeError: bet ")
    assert "needs a finite amount" in first_line(made[2].error)
    assert all((d.action, d.bets) == ("HOLD", []) for d in made[:3])
    assert (made[3].action, made[3].error, made[3].ts) == ("BET", None, START + 3 * DAY)
    assert all(d.error is None and d.action == "HOLD" for d in made[4:])
    # the good bet at +3d fills at a's price then, 0.6: 60 / 0.6 = 100 shares
    [fill] = of_type(events, OrderFilled)
    assert (fill.ts, fill.price, fill.amount) == (START + 3 * DAY, 0.6, 60.0)
    assert fill.shares == pytest.approx(100.0)


class Sleepy(Strategy):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def decide(self, view: View) -> Decision:
        self.calls += 1
        if self.calls == 1:
            time.sleep(5)  # far past the limit: the alarm cuts it short
        return Decision.hold("awake")


def test_a_decision_past_the_timeout_is_interrupted(tmp_path: Path, hand_tape: Tape) -> None:
    db = tmp_path / "run.db"
    run_into(
        db, hand_tape, hand_config({"z": "hold"}), strategies={"z": Sleepy()}, decision_timeout=0.05
    )
    made = decisions_of(stored(db), "z")
    assert first_line(made[0].error) == "DecisionTimeout: decision took longer than 0.05 s"
    assert made[0].action == "HOLD"
    assert [(d.error, d.reasoning) for d in made[1:]] == [(None, "awake"), (None, "awake")]


def test_without_an_interval_timer_the_run_goes_on_without_a_limit(
    tmp_path: Path, hand_tape: Tape, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows has no SIGALRM/setitimer: a time limit must not stop the run there."""
    monkeypatch.delattr(signal, "setitimer")
    db = tmp_path / "run.db"
    run_into(
        db, hand_tape, hand_config({"z": "hold"}), strategies={"z": Hold()}, decision_timeout=0.05
    )
    made = decisions_of(stored(db), "z")
    assert made and all((d.error, d.action) == (None, "HOLD") for d in made)


class Numpyish(Strategy):
    """Computes with numpy, as strategies do: numpy scalars in its bet and its sell."""

    def decide(self, view: View) -> Decision:
        if view.ts == START:
            price = view.markets.yes[view.markets.index("a")]  # numpy.float64 0.5
            market = np.array(view.markets.ids)[0]  # numpy.str_ "a"
            bet = Bet(market=market, side="YES", amount=price * 120, belief=price)
            return Decision(bets=[bet])
        if view.ts == START + WEEK:
            half = np.int64(50)
            return Decision(sells=[Sell(percentage=half, market="a", side="YES")])  # type: ignore[arg-type]
        return Decision.hold()


def test_numpy_scalars_in_a_decision_are_logged_as_plain_numbers(
    tmp_path: Path, hand_tape: Tape
) -> None:
    db = tmp_path / "run.db"
    run_into(db, hand_tape, hand_config({"n": "hold"}), strategies={"n": Numpyish()})
    events = stored(db)
    assert all(d.error is None for d in of_type(events, DecisionMade))
    buy, sell = of_type(events, OrderFilled)
    # $60 (0.5 x 120) at 0.5 -> 120 shares; half sold at 0.75 -> 60 shares for $45
    assert (buy.market, buy.amount, buy.shares, buy.belief) == ("a", 60.0, 120.0, 0.5)
    assert (sell.shares, sell.amount, sell.realized) == (60.0, 45.0, 15.0)


class Vandal(Strategy):
    """Tries to rewrite the prices it is shown (to buy a at 0.01), then bets."""

    def decide(self, view: View) -> Decision:
        view.markets.yes[view.markets.index("a")] = 0.01
        return Decision(bets=[Bet(market="a", side="YES", amount=100.0)])


class Writer(Strategy):
    def decide(self, view: View) -> Decision:
        for array in (view.markets.open, view.markets.volume, view.shares):
            with pytest.raises(ValueError, match="read-only"):
                array[0] = 0
        return Decision.hold("could not write")


def test_a_strategy_cannot_rewrite_what_it_is_shown(tmp_path: Path, hand_tape: Tape) -> None:
    db = tmp_path / "run.db"
    probe = Recorder()
    config = hand_config({"v": "hold", "w": "hold", "p": "hold"})
    run_into(db, hand_tape, config, strategies={"v": Vandal(), "w": Writer(), "p": probe})
    events = stored(db)
    assert "assignment destination is read-only" in first_line(decisions_of(events, "v")[0].error)
    assert [d.reasoning for d in decisions_of(events, "w")] == ["could not write"] * 3
    assert probe.seen[0]["a"] == 0.5  # deciding after the vandal at the same instant
    assert not of_type(events, OrderFilled)


class EarlyBird(Strategy):
    def setup(self, context: Context) -> None:
        super().setup(context)
        self.set_up_at = datetime.now(UTC)

    def decide(self, view: View) -> Decision:
        return Decision.hold()


class BrokenSetup(Strategy):
    def setup(self, context: Context) -> None:
        raise OSError("model file missing")


def test_setup_runs_at_the_start_and_a_failed_setup_sits_the_agent_out(
    tmp_path: Path, hand_tape: Tape
) -> None:
    bird = EarlyBird()
    run_into(tmp_path / "one.db", hand_tape, hand_config({"e": "hold"}), strategies={"e": bird})
    assert bird.set_up_at == datetime.fromtimestamp(START, UTC)
    run_into(
        tmp_path / "two.db",
        hand_tape,
        hand_config({"b": "hold", "e": "hold"}),
        strategies={"b": BrokenSetup(), "e": EarlyBird()},
    )
    events = stored(tmp_path / "two.db")
    (sat_out,) = decisions_of(events, "b")  # recorded once, at the start, and never again
    assert (sat_out.ts, sat_out.action) == (START, "HOLD")
    assert first_line(sat_out.error) == (
        "sat out the cohort: setup failed: OSError: model file missing"
    )
    assert len(decisions_of(events, "e")) == 3


# -- universe and timeline -----------------------------------------------------------------------


def test_universe_is_top_volume_among_markets_open_with_a_price(hand_tape: Tape) -> None:
    # late opens after START, closed closed before it, gone resolved before it and unpriced has
    # no point yet; of the rest a (500) > b (300) > tie-w = tie-x (100, broken by id)
    chosen = select_universe(hand_tape, START, 10)
    assert [hand_tape.markets[m].id for m in chosen] == ["a", "b", "tie-w", "tie-x"]
    top3 = select_universe(hand_tape, START, 3)
    assert [hand_tape.markets[m].id for m in top3] == ["a", "b", "tie-w"]


def test_an_all_hold_cohort_decides_weekly_until_the_last_resolution(
    tmp_path: Path, hand_tape: Tape
) -> None:
    db = tmp_path / "run.db"
    run = run_into(db, hand_tape, hand_config({"h": "hold", "h2": "hold"}))
    events = stored(db)
    opened = events[0]
    assert isinstance(opened, CohortOpened) and opened.universe == ["a", "b", "tie-w"]
    assert [e.market for e in of_type(events, MarketListed)] == ["a", "b", "tie-w"]
    # decisions at +0, +7d, +14d (b is open until +21d, the tape's last point is at +20d)
    assert [d.ts - START for d in decisions_of(events, "h")] == [0, WEEK, 2 * WEEK]
    assert len(of_type(events, DecisionMade)) == 6  # 3 instants x 2 agents
    assert [(e.ts - START, e.market, e.winner) for e in of_type(events, MarketResolved)] == [
        (WEEK, "tie-w", "Yes"),
        (2 * WEEK, "a", "Yes"),
        (3 * WEEK, "b", "No"),
    ]
    # weekly marks at 0, 7d, 14d, 21d; a market is no longer marked once it has resolved
    marks = [(e.ts - START, e.markets) for e in of_type(events, Marked)]
    assert marks == [
        (0, ["a", "b", "tie-w"]),
        (WEEK, ["a", "b"]),
        (2 * WEEK, ["b"]),
        (3 * WEEK, []),
    ]
    assert of_type(events, Marked)[0].prices == [[0.5, 0.5], [0.2, 1 - 0.2], [0.5, 0.5]]
    closed = events[-1]
    assert isinstance(closed, CohortClosed)
    # b trades until +21d but the tape (no coverage recorded: its last point) ends at +20d:
    # said once, when it happens, and again in the close
    [stopped] = of_type(events, DecisionsStopped)
    assert (stopped.ts, stopped.markets) == (START + 20 * DAY + 1, ["b"])
    assert stopped.reason == (
        "the tape's recording ends at 2024-01-27 00:00 UTC with 1 market(s) still open (b): "
        "no price is known after it, so no decision is made"
    )
    assert (closed.ts, closed.reason) == (
        START + 3 * WEEK,
        "every market settled; no decision after 2024-01-27 00:00 UTC, where the tape's "
        "recording ends with 1 market(s) still open",
    )
    # 1 opened + 3 listed + 4 marks + 6 decisions + 1 stop + 3 resolutions + 1 closed
    assert len(events) == run.events == 19


class Timing(Strategy):
    """Bets on tie-w at 0 and again at +7d (when it resolves), then on a at +14d (ditto)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[float, list[bool], float]] = []

    def decide(self, view: View) -> Decision:
        tie_w = view.markets.index("tie-w")
        self.seen.append((view.cash, view.markets.open.tolist(), float(view.shares[tie_w, 0])))
        market = "a" if view.ts == START + 2 * WEEK else "tie-w"
        return Decision(bets=[Bet(market=market, side="YES", amount=100.0)])


def test_a_market_resolving_at_a_decision_instant_settles_first(
    tmp_path: Path, hand_tape: Tape
) -> None:
    db = tmp_path / "run.db"
    timing = Timing()
    run_into(db, hand_tape, hand_config({"t": "hold"}), strategies={"t": timing})
    events = stored(db)
    # $100 of tie-w YES at 0.5 = 200 shares; it resolves Yes at +7d, before the decision there,
    # so that decision already sees the payout: 10,000 - 100 + 200 = 10,100, and no shares
    assert timing.seen == [
        (10_000.0, [True, True, True], 0.0),
        (10_100.0, [True, True, False], 0.0),
        (10_100.0, [False, True, False], 0.0),
    ]
    [settled] = of_type(events, PositionSettled)
    assert (settled.ts, settled.payout, settled.won) == (START + WEEK, 200.0, True)
    rejected = of_type(events, OrderRejected)
    assert [(r.ts - START, r.reason) for r in rejected] == [
        (WEEK, "market tie-w is already resolved"),
        (2 * WEEK, "market a is already resolved"),
    ]


# -- the scripted agent --------------------------------------------------------------------------


def test_scripted_bet_then_half_sell_then_resolution(tmp_path: Path, hand_tape: Tape) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [
                {
                    "action": "BET",
                    "reasoning": "a looks cheap",
                    "bets": [
                        {"market_id": "a", "side": "YES", "amount": 1000, "probability": 0.7},
                        {"market_id": "b", "side": "YES", "amount": 40},
                    ],
                },
                {"action": "SELL", "sells": [{"market_id": "a", "side": "YES", "percentage": 50}]},
            ]
        )
    )
    db = tmp_path / "run.db"
    run = run_into(db, hand_tape, hand_config({"s": f"scripted:{script}?checked=false"}))
    events = stored(db)
    buy, sell = of_type(events, OrderFilled)
    # +0: $1,000 of a YES at 0.5 -> 2,000 shares; confidence 1,000 / (0.25 x 10,000) = 0.4
    assert (buy.ts, buy.order_id, buy.price, buy.shares, buy.amount, buy.cash_before) == (
        START,
        "o1",
        0.5,
        2_000.0,
        1_000.0,
        10_000.0,
    )
    assert (buy.confidence, buy.belief) == (0.4, 0.7)
    # the $40 bet on b is under the $50 minimum
    [rejected] = of_type(events, OrderRejected)
    assert (rejected.order_id, rejected.reason) == ("o2", "bet $40.00 is below the $50.00 minimum")
    # +7d: sell 50% at 0.75 -> 1,000 shares for $750; cost basis 500, realized 250; cash 9,750
    assert (sell.ts, sell.order_id, sell.price, sell.shares, sell.amount) == (
        START + WEEK,
        "o3",
        0.75,
        1_000.0,
        750.0,
    )
    assert (sell.cost_basis, sell.realized, sell.cash_before) == (500.0, 250.0, 9_000.0)
    # +14d: a resolves Yes; 1,000 shares pay $1,000 on a cost of 500 -> realized 500
    [settled] = of_type(events, PositionSettled)
    assert (settled.ts, settled.shares, settled.payout, settled.cost, settled.realized) == (
        START + 2 * WEEK,
        1_000.0,
        1_000.0,
        500.0,
        500.0,
    )
    assert [d.action for d in decisions_of(events, "s")] == ["BET", "SELL", "HOLD"]
    book = run.state.books["s"]
    # cash 10,000 - 1,000 + 750 + 1,000 = 10,750; realized 250 + 500 = 750
    assert (book.cash, book.realized, book.positions) == (10_750.0, 750.0, {})
    [row] = book.brier_rows
    assert (row.confidence, row.won) == (0.4, 1)
    assert row.brier == pytest.approx(0.36)  # (0.4 - 1)^2


# -- live state equals the log -------------------------------------------------------------------


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), rules=st.sampled_from(["v1", "v2"]))
def test_live_state_equals_the_state_rebuilt_from_the_log(
    synthetic_tape: Tape, seed: int, rules: str
) -> None:
    config = synthetic_config(
        seed=seed, rules=rules, agents={"rnd": "random?bets=3"}, decision_cadence="2d"
    )
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "run.db"
        run = run_into(db, synthetic_tape, config)
        rebuilt = Ledger().apply_all(stored(db))
    assert rebuilt.snapshot() == {run.cohort: run.state.snapshot()}
    assert run.state.books["rnd"].n_bets > 0
    assert np.isfinite(run.state.books["rnd"].cash)
