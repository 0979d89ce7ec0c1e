"""The plugin boundary: no look-ahead by construction, nothing shared a plugin can write, and no
plugin that can stop the run or change another agent's results.

Hostile plugins run beside the built-in ``favourite`` agent on a synthetic tape; its events must
be the same as in a run without them (the cohort id and the agent list aside).
"""

from __future__ import annotations

import contextlib
import gc
import json
import mmap
import os
import signal
import subprocess
import sys
import time
import types
from collections import deque
from datetime import UTC, date, datetime, timedelta, tzinfo
from datetime import time as dt_time
from pathlib import Path
from typing import Any

import freezegun
import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.boundary.checks import MAX_ORDERS, MAX_TEXT, MAX_TRACE_TEXT, checked
from arena.boundary.past import _FEEDS, PastFeed
from arena.boundary.sandbox import CLOCK_CHANGED, error_text
from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from arena.run.settings import RunOptions, RunSettings
from ledger.events import (
    ENCODER,
    AnyEvent,
    BetIntent,
    CohortClosed,
    CohortOpened,
    DecisionMade,
    ModelCall,
    OrderFilled,
)
from ledger.stream import MemorySink
from replays.asof import UniverseWalk
from replays.markets import MarketInfo, Resolution
from replays.synthetic import random_walk_tape
from replays.tape import Tape
from strategies.api import Bet, Context, Decision, Sell, Strategy, Trace, View
from tests.conftest import Arena
from tests.replays.test_asof import covered_tapes

DAY = 86_400
T0 = 1_704_067_200  # Monday 2024-01-01


# -- a tape whose every price says when it was recorded ------------------------------------------


def telltale_tape() -> Tape:
    """Four binary markets, one point a day each for 30 days, priced 0.0101, 0.0102, ... in the
    order the points happen: a price seen tells its instant, and NO (above 0.7) cannot be
    mistaken for a YES. Any time or price of a point after an instant is the future there."""
    markets, series, resolutions = [], {}, []
    for m in range(4):
        mid = f"m{m}"
        markets.append(MarketInfo(id=mid, question=f"{mid}?", outcomes=("Yes", "No"), volume=m))
        times = np.array([T0 + d * DAY + m * 60 for d in range(30)], dtype=np.int64)
        prices = np.array([0.0101 + (d * 4 + m) * 0.0001 for d in range(30)])
        series[mid] = (times, prices)
        resolutions.append(Resolution(market=mid, ts=T0 + 40 * DAY, winner="Yes"))
    return Tape.from_series(markets, series, resolutions, source="telltale")


def telltale_config(agent: str, cadence: str) -> CohortConfig:
    return CohortConfig(
        start=datetime.fromtimestamp(T0 + 2 * DAY, UTC),
        agents={agent: "hold"},
        universe=4,
        decision_cadence=cadence,
        mark_cadence="weekly",
    )


def future_of(tape: Tape, ts: int) -> tuple[set[int], set[float]]:
    times, prices = set(), set()
    for m in range(len(tape.markets)):
        later = tape.times(m) > ts
        times |= {int(t) for t in tape.times(m)[later]}
        prices |= {float(p) for p in tape.yes(m)[later]}
        prices |= {1.0 - float(p) for p in tape.yes(m)[later]}
    return times, prices


def _numbers_in(buffer: Any) -> tuple[np.ndarray, np.ndarray]:
    raw = bytes(buffer)[: len(bytes(buffer)) // 8 * 8]
    return np.frombuffer(raw, dtype=np.int64), np.frombuffer(raw, dtype=np.float64)


SKIP = (types.ModuleType, type, str, int, float, bool, complex, type(None))
VALUES = (date, dt_time, timedelta, tzinfo, time.struct_time)
"""Immutable values: walked once per value, not once per object. Each call of a method of the
clock's (frozen) datetimes makes a new object of a value already walked; counted by identity
they filled the walk's 50,000 places at every decision (two and a half minutes of CPU, and
the walk cut short), where the distinct objects a view reaches number about 2,400."""
WALK_LIMIT = 50_000


class Explorer(Strategy):
    """Walks every object it can reach from its view, calls every callable it finds with
    far-future arguments, and records every number it saw (raw buffers and maps included).

    Not followed: functions' ``__globals__``, modules and classes (from there every object of
    the process is reachable, as through ``gc``; that is what ``--isolate`` is for)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, set[int], set[float]]] = []
        self.walked: list[int] = []

    def decide(self, view: View) -> Decision:
        ints: set[int] = set()
        floats: set[float] = set()
        self._walk(view, ints, floats, len(view.markets))
        self.seen.append((view.ts, ints, floats))
        return Decision.hold()

    def _walk(self, root: object, ints: set[int], floats: set[float], n: int) -> None:
        queue: deque[object] = deque([root])
        visited: set[object] = set()
        while queue and len(visited) < WALK_LIMIT:
            obj = queue.popleft()
            key = (type(obj), repr(obj)) if isinstance(obj, VALUES) else id(obj)
            if key in visited or isinstance(obj, SKIP):
                if isinstance(obj, int | float) and not isinstance(obj, bool):
                    (ints if isinstance(obj, int) else floats).add(obj)  # type: ignore[arg-type]
                continue
            visited.add(key)
            queue.extend(self._neighbours(obj, ints, floats, n))
        self.walked.append(len(visited))

    def _neighbours(self, obj: object, ints: set[int], floats: set[float], n: int) -> list[Any]:
        found: list[Any] = []
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind in "iu":
                ints.update(int(x) for x in obj.ravel())
            elif obj.dtype.kind == "f":
                floats.update(float(x) for x in obj.ravel())
            return [obj.base]
        if isinstance(obj, memoryview):
            return [obj.obj, bytes(obj)]
        if isinstance(obj, bytes | bytearray | mmap.mmap):
            as_int, as_float = _numbers_in(obj[:] if isinstance(obj, mmap.mmap) else obj)
            ints.update(int(x) for x in as_int)
            floats.update(float(x) for x in as_float)
            return []
        if isinstance(obj, dict):
            return [*obj.keys(), *obj.values()]
        if isinstance(obj, list | tuple | set | frozenset | deque):
            found += list(obj)
        if isinstance(obj, types.FunctionType):
            found += [c.cell_contents for c in obj.__closure__ or ()]
            found += [*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()]
        if isinstance(obj, types.MethodType | types.BuiltinMethodType):
            found.append(getattr(obj, "__self__", None))
        if callable(obj) and not isinstance(obj, type):
            found += self._call(obj, n)
        for klass in type(obj).__mro__:
            for name in getattr(klass, "__slots__", ()):
                found.append(getattr(obj, name, None))
        found += list(getattr(obj, "__dict__", {}).values())
        for name in dir(obj):
            if name.startswith("__"):
                continue
            with contextlib.suppress(Exception):
                found.append(getattr(obj, name))
        return found

    @staticmethod
    def _call(fn: Any, n: int) -> list[Any]:
        results = []
        far = 2**62
        keys = [*range(n), *(f"m{i}" for i in range(n))]
        for args in [(), *((k,) for k in keys), *((k, far) for k in keys)]:
            with contextlib.suppress(Exception):
                results.append(fn(*args))
        return results


def test_nothing_reachable_from_a_view_postdates_its_instant() -> None:
    tape = telltale_tape()
    explorer = Explorer()
    config = telltale_config("x", "daily")
    CohortRunner(tape, config, strategies={"x": explorer}).run(None)
    assert len(explorer.seen) >= 20
    assert max(explorer.walked) < WALK_LIMIT  # every walk ran out of objects, none was cut short
    for ts, ints, floats in explorer.seen:
        future_times, future_prices = future_of(tape, ts)
        assert not (ints & future_times), ts
        assert not (floats & future_prices), ts
        # ... while the walk does find the present: the walker is not blind
        now = max(t for t in ints if t <= ts and t in {int(x) for x in tape.times(0)})
        assert ts - now < DAY


def test_history_asked_for_the_far_future_ends_at_the_instant() -> None:
    tape = telltale_tape()
    shown: list[tuple[int, int]] = []

    class Peek(Strategy):
        def decide(self, view: View) -> Decision:
            times, values = view.markets._history(view.markets.index("m0"), 2**62, None)
            shown.append((view.ts, int(times[-1])))
            assert values.shape == (times.size, 2)
            return Decision.hold()

    config = telltale_config("p", "daily")
    CohortRunner(tape, config, strategies={"p": Peek()}).run(None)
    # m0's points fall at T0 + d days, so at each daily decision the last one is that instant
    assert shown and all(last == ts for ts, last in shown if ts < T0 + 30 * DAY)


@given(case=covered_tapes(), first_read=st.integers(0, 12), back=st.integers(0, 40 * DAY))
@settings(max_examples=150, deadline=None)
def test_past_shows_exactly_the_points_up_to_each_instant(
    case: tuple[Tape, list[int], np.ndarray], first_read: int, back: int
) -> None:
    """For any tape and increasing instants, history is the tape's series cut at the instant
    however late the shared ``Past`` is first built, and with a ``since`` bound exactly its
    points from that instant on; before the first read there is no ``Past`` at all, its memory
    never holds a point after the instant, and the handle answers nothing once the run is
    over."""
    tape, chosen, instants = case
    feed, walk = PastFeed(tape, chosen), UniverseWalk(tape, chosen)
    with feed.shown() as history:
        for step, ts in enumerate(instants.tolist()):
            feed.advance(walk.at(ts))
            if step < first_read:
                assert not feed.built
                continue
            for j, m in enumerate(chosen):
                got_t, got_v = history(j, ts, None)
                want_t, want_v = tape.history(m, ts)
                np.testing.assert_array_equal(got_t, want_t)
                np.testing.assert_array_equal(got_v, want_v)
                got_t, got_v = history(j, ts, ts - back)
                recent = want_t >= ts - back
                np.testing.assert_array_equal(got_t, want_t[recent])
                np.testing.assert_array_equal(got_v, want_v[recent])
            assert feed.built
            past, times, prices = feed.past(), [], []
            for j, m in enumerate(chosen):  # the memory: points up to ts, zeros after them
                n = int((tape.times(m) <= ts).sum())
                assert past.visible[j] == n
                stored = tape.yes(m) if tape.markets[m].is_binary else tape.values(m).ravel()
                shown = stored[: n * past.widths[j]]
                times.append(np.concatenate([tape.times(m)[:n], np.zeros(tape.times(m).size - n)]))
                prices.append(np.concatenate([shown, np.zeros(stored.size - shown.size)]))
            np.testing.assert_array_equal(past.times, np.concatenate(times))
            np.testing.assert_array_equal(past.prices, np.concatenate(prices))
    with pytest.raises(LookupError, match="replay has ended"):
        history(0, int(instants[-1]), None)


def test_a_replay_whose_plugins_read_no_history_builds_no_past(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shared ``Past`` (a second copy of the series by the end) exists only once a plugin
    asks for a history: reading prices, positions and the arrays builds none."""

    def refuse(*args: Any) -> None:
        raise AssertionError("a Past was built though no plugin read a history")

    monkeypatch.setattr("arena.boundary.past.PastWriter", refuse)
    seen: list[tuple[float, ...] | None] = []

    class Quoter(Strategy):
        def decide(self, view: View) -> Decision:
            seen.append(view.markets.prices(view.markets.ids[0]))
            assert isinstance(view.positions, tuple)
            return Decision.hold()

    events = replay({"q": Quoter()})
    assert not [e for e in events if isinstance(e, DecisionMade) and e.error]
    assert [e for e in events if isinstance(e, OrderFilled)]  # fav traded on the same prices
    assert len(seen) > 5 and all(quote is not None for quote in seen)
    asked = [e for e in replay({"h": Historian()}) if isinstance(e, DecisionMade)]
    asked = [e for e in asked if e.agent == "h"]
    assert asked and all("no plugin read a history" in (e.error or "") for e in asked)


class Historian(Strategy):
    def decide(self, view: View) -> Decision:
        view.markets.history(view.markets.ids[0])
        return Decision.hold()


# -- nothing shared can be written ---------------------------------------------------------------


def test_handed_out_arrays_cannot_be_made_writable() -> None:
    tape = telltale_tape()
    outcomes: list[str] = []

    class Reflag(Strategy):
        def decide(self, view: View) -> Decision:
            arrays = (view.markets.yes, view.markets.open, view.markets.volume,
                      view.markets.binary, view.shares)  # fmt: skip
            for array in arrays:
                with pytest.raises(ValueError, match="WRITEABLE"):
                    array.setflags(write=True)
            view.markets.history("m0")  # builds the shared Past
            past = _FEEDS[view.markets._history.__self__.key].past()  # type: ignore[attr-defined]
            for array in (past.times, past.prices, past.visible):
                with pytest.raises(ValueError, match="WRITEABLE"):
                    array.setflags(write=True)
            _times, values = view.markets.history("m0")
            values[:] = 0.99  # a copy of its own: writing it changes nothing else
            outcomes.append("refused")
            return Decision.hold()

    config = telltale_config("r", "weekly")
    CohortRunner(tape, config, strategies={"r": Reflag()}).run(None)
    assert outcomes == ["refused"] * 4  # every weekly decision: T0 + 2, 9, 16 and 23 days


# -- hostile plugins beside an honest agent ------------------------------------------------------


def honest_tape() -> Tape:
    return random_walk_tape(6, 60, seed=3, step_seconds=3_600 * 6)


def replay(
    agents: dict[str, Strategy], timeout: float = 0.0, isolate: bool = False
) -> list[AnyEvent]:
    """Run ``fav=favourite`` beside ``agents``, in memory."""
    tape = honest_tape()
    specs = {"fav": "favourite", **{name: "hold" for name in agents}}
    config = CohortConfig(
        start=datetime.fromtimestamp(tape.span()[0], UTC),
        agents=specs,
        universe=6,
        decision_cadence="daily",
        mark_cadence="daily",
    )
    from strategies.loader import build_strategy

    built = {"fav": build_strategy("favourite"), **agents}
    options = RunOptions(decision_timeout=timeout, isolate=isolate)
    run = CohortRunner(tape, RunSettings(cohort=config, options=options), strategies=built)
    sink = MemorySink()
    run.run(sink)
    return sink.read(run.cohort)


def of_agent(events: list[AnyEvent], agent: str) -> list[AnyEvent]:
    """The agent's events and everything shared (marks, resolutions), cohort id left out."""
    kept: list[AnyEvent] = []
    for e in events:
        if getattr(e, "agent", agent) != agent or isinstance(e, CohortOpened | CohortClosed):
            continue
        kept.append(msgspec.structs.replace(e, cohort=""))
    return kept


@pytest.fixture(scope="module")
def alone() -> list[AnyEvent]:
    events = of_agent(replay({}), "fav")
    assert any(isinstance(e, OrderFilled) for e in events)  # the honest agent does trade
    return events


class Exits(Strategy):
    def decide(self, view: View) -> Decision:
        sys.exit(3)


class HardExit(Strategy):
    def decide(self, view: View) -> Decision:
        os._exit(0)


class Interrupts(Strategy):
    def decide(self, view: View) -> Decision:
        raise KeyboardInterrupt


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


class RaisesUnprintable(Strategy):
    def decide(self, view: View) -> Decision:
        raise Unprintable()


class Huge(Strategy):
    def decide(self, view: View) -> Decision:
        return Decision(bets=[Bet(market=view.markets.ids[0], side="YES", amount=1e308)])


class Overconfident(Strategy):
    def decide(self, view: View) -> Decision:
        return Decision(bets=[Bet(market=view.markets.ids[0], side="YES", amount=60, belief=7.5)])


class BadSetup(Strategy):
    def setup(self, context: Context) -> None:
        raise RuntimeError("no model")

    def decide(self, view: View) -> Decision:
        raise AssertionError("an agent that sat out is never asked")


class IgnoresAlarm(Strategy):
    def decide(self, view: View) -> Decision:
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        return Decision.hold()


class Forks(Strategy):
    def decide(self, view: View) -> Decision:
        os.fork()
        return Decision.hold()


class SendsCtrlC(Strategy):
    def decide(self, view: View) -> Decision:
        os.kill(os.getpid(), signal.SIGINT)
        return Decision.hold()


class Rewrites(Strategy):
    """The attack of the issue: re-flag the prices writable and crash them to 0.02."""

    def decide(self, view: View) -> Decision:
        try:
            view.markets.yes.setflags(write=True)
            view.markets.yes[:] = 0.02
        except ValueError:
            pass
        for obj in gc.get_referrers(view.markets.yes):  # and every array like it it can find
            if isinstance(obj, np.ndarray) and obj.flags.writeable:
                obj[...] = 0
        return Decision.hold()


class LeavesAClockRunning(Strategy):
    """Starts its own frozen clock and never stops it, as a careless library might."""

    def decide(self, view: View) -> Decision:
        freezegun.freeze_time("2030-01-01").start()
        return Decision.hold("froze 2030")


class ClearsTheClock(Strategy):
    """Throws away the run's frozen clock, so that later agents would read the wall clock."""

    def decide(self, view: View) -> Decision:
        freezegun.api.freeze_factories.clear()
        return Decision.hold()


class ReadsTheClock(Strategy):
    def decide(self, view: View) -> Decision:
        return Decision.hold(f"{datetime.now().isoformat()} {time.time() - view.ts:.0f}")


NOT_P = "not a probability in [0, 1]"
MAY_NOT = "a strategy may not call"
HOSTILE: dict[str, tuple[type[Strategy], str]] = {
    "sys.exit": (Exits, "SystemExit: 3"),
    "os._exit": (HardExit, "SandboxError: a strategy may not call os._exit during a replay"),
    "KeyboardInterrupt": (Interrupts, "KeyboardInterrupt: "),
    "unprintable": (
        RaisesUnprintable,
        "Unprintable: (its message could not be shown: its __str__ raised)",
    ),
    "1e308": (Huge, "ValueError: bet on syn-00001: amount 1e+308 is beyond 1e+12"),
    "belief 7.5": (Overconfident, f"ValueError: bet on syn-00001: belief 7.5 is {NOT_P}"),
    "SIG_IGN": (IgnoresAlarm, f"SandboxError: {MAY_NOT} signal.signal during a replay"),
    "fork": (Forks, f"SandboxError: {MAY_NOT} os.fork during a replay"),
    "freeze_time left running": (LeavesAClockRunning, CLOCK_CHANGED),
    "run's clock cleared": (ClearsTheClock, CLOCK_CHANGED),
    "Ctrl-C to itself": (SendsCtrlC, "SandboxError: a strategy may not signal the replay's own "
                                     "process"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_plugin_is_a_recorded_hold_and_changes_nothing_else(
    case: str, alone: list[AnyEvent]
) -> None:
    kind, error = HOSTILE[case]
    events = replay({"bad": kind()}, timeout=5.0)
    made = [e for e in events if isinstance(e, DecisionMade) and e.agent == "bad"]
    assert made and all(d.action == "HOLD" for d in made)
    assert {d.error.splitlines()[0] for d in made if d.error} == {error}
    assert not [e for e in events if getattr(e, "agent", None) == "bad" and e not in made]
    assert of_agent(events, "fav") == alone


class StrayBytes(Strategy):
    """Text made from bytes as ``os.fsdecode`` makes it: a lone surrogate for a stray byte."""

    def decide(self, view: View) -> Decision:
        m = view.markets.ids[0]
        bets = [Bet(market=m + "\udcff", side="YES", amount=10.0),
                Bet(market=m, side="Y\udcffES", amount=10.0)]  # fmt: skip
        return Decision(
            bets=bets, sells=[Sell(percentage=50.0, market="\udcff")], reasoning="\udcff"
        )


class StrayBytesRaised(Strategy):
    def decide(self, view: View) -> Decision:
        raise ValueError("byte \udcff")


def test_text_utf8_cannot_encode_is_logged_with_a_mark_in_its_place() -> None:
    """A lone surrogate in a plugin's reasoning, error or market id crashed the run at the
    log's next flush (UnicodeEncodeError, a traceback and none of the cohort written)."""
    events = replay({"bytes": StrayBytes(), "raises": StrayBytesRaised()})
    for e in events:
        ENCODER.encode(e)
    made = {e.agent: e for e in events if isinstance(e, DecisionMade) and e.week == 1}
    assert made["bytes"].reasoning == "?"
    assert [(b.market[-1], b.side) for b in made["bytes"].bets] == [("?", "YES"), ("1", "Y?ES")]
    assert [s.market for s in made["bytes"].sells] == ["?"]
    assert str(made["raises"].error).splitlines()[0] == "ValueError: byte ?"


@pytest.mark.parametrize("kind", [LeavesAClockRunning, ClearsTheClock])
def test_a_clock_a_plugin_leaves_changed_reaches_no_other_agent(kind: type[Strategy]) -> None:
    """Agent ``bad`` decides first: without the sandbox putting freezegun's clocks back, the
    reader after it read 2030 (or the wall clock) at every decision."""
    events = replay({"bad": kind(), "reader": ReadsTheClock()})
    read = [e.reasoning for e in events if isinstance(e, DecisionMade) and e.agent == "reader"]
    made = [e.ts for e in events if isinstance(e, DecisionMade) and e.agent == "reader"]
    assert read and read == [
        f"{datetime.fromtimestamp(ts, UTC):%Y-%m-%dT%H:%M:%S} 0" for ts in made
    ]


class ReadsClockGettime(Strategy):
    def decide(self, view: View) -> Decision:
        wall = time.clock_gettime(time.CLOCK_REALTIME) - view.ts
        wall_ns = time.clock_gettime_ns(time.CLOCK_REALTIME) // 10**9 - view.ts
        cpu = time.clock_gettime(time.CLOCK_PROCESS_CPUTIME_ID)
        return Decision.hold(f"{wall:.0f} {wall_ns} {cpu > 0}")


def test_clock_gettime_reads_the_simulated_instant_in_and_out_of_process() -> None:
    """freezegun patches time.time and datetime, not clock_gettime: it read 2026 at every
    simulated instant; the CPU clocks stay real."""
    for isolate in (False, True):
        events = replay({"reader": ReadsClockGettime()}, isolate=isolate)
        read = {e.reasoning for e in events if isinstance(e, DecisionMade) and e.agent == "reader"}
        assert read == {"0 0 True"}, isolate


class ReadsTheClockThroughNumpy(Strategy):
    """Reads every clock freezegun replaces straight from ``decide`` and from code numpy calls
    back, where numpy's frames are the nearest: freezegun gives the real time to a call with an
    ignored package among its nearest frames, and numpy is left out of its scan."""

    def decide(self, view: View) -> Decision:
        def clocks(_: object = None) -> str:
            wall = time.clock_gettime(time.CLOCK_REALTIME)
            read = (time.time(), time.monotonic(), time.perf_counter(), time.time_ns() / 1e9,
                    datetime.now(UTC).timestamp(), wall)  # fmt: skip
            return " ".join(f"{c - view.ts:.0f}" for c in read)

        direct = clocks()
        vectorized = np.vectorize(clocks, otypes=[object])(np.zeros(1))[0]
        along = np.apply_along_axis(lambda row: np.array([clocks()], object), 0, np.zeros(1))[0]
        today = date.today() == datetime.fromtimestamp(view.ts, UTC).date()
        return Decision.hold(f"{direct}|{vectorized}|{along}|{today}")


def test_a_plugin_reads_only_the_frozen_clock_directly_and_through_numpy() -> None:
    """numpy skipped by freezegun's scan (``SCAN_SKIPS``) still hands plugin code it calls the
    frozen clock, in process and in a worker. (``numpy.datetime64("now")`` reads the real
    clock in C, which freezegun never reaches, with or without the scan.)"""
    zeros = " ".join(["0"] * 6)
    for isolate in (False, True):
        events = replay({"reader": ReadsTheClockThroughNumpy()}, isolate=isolate)
        read = {e.reasoning for e in events if isinstance(e, DecisionMade) and e.agent == "reader"}
        assert read == {f"{zeros}|{zeros}|{zeros}|True"}, isolate


def test_the_frozen_clock_does_not_import_numpy_to_scan_it() -> None:
    """freezegun's first ``start()`` read numpy's lazy attributes, importing about 100 of its
    submodules (0.11–0.14 CPU-s in every process that replays)."""
    script = (
        "import sys\n"
        "from tests.arena.boundary.test_boundary import replay\n"
        "from strategies.api import Decision, Strategy\n"
        "class Hold(Strategy):\n"
        "    def decide(self, view): return Decision.hold()\n"
        "replay({'h': Hold()})\n"
        "print(sorted(m for m in ('numpy.f2py', 'numpy.testing', 'numpy.distutils', "
        "'numpy.ctypeslib') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parents[3])  # fmt: skip
    assert out.stdout.strip() == "[]"


def test_a_plugin_rewriting_prices_changes_nothing_else(alone: list[AnyEvent]) -> None:
    events = replay({"bad": Rewrites()})
    assert of_agent(events, "fav") == alone


def test_a_failed_setup_sits_the_agent_out_once(alone: list[AnyEvent]) -> None:
    events = replay({"bad": BadSetup()})
    made = [e for e in events if isinstance(e, DecisionMade) and e.agent == "bad"]
    assert len(made) == 1
    assert made[0].error is not None
    assert made[0].error.splitlines()[0] == (
        "sat out the cohort: setup failed: RuntimeError: no model"
    )
    assert of_agent(events, "fav") == alone


class SleepsAfterIgnoring(Strategy):
    """Tries to switch the time limit off, then runs past it."""

    def decide(self, view: View) -> Decision:
        with contextlib.suppress(Exception):
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
        time.sleep(1.0)
        return Decision.hold("slept")


class SlowThenSlower(Strategy):
    """Takes most of its time limit at each decision, and three times it at its fourth."""

    def __init__(self) -> None:
        self.n = 0

    def decide(self, view: View) -> Decision:
        self.n += 1
        time.sleep(0.6 if self.n == 4 else 0.12)
        return Decision.hold(f"took {self.n}")


def test_each_decision_has_its_whole_time_limit_though_the_timer_is_armed_once() -> None:
    """The timer stays armed after a call; it goes off during the second decision (armed at
    the first) and is armed again for the rest of that decision's time, so no decision under
    its limit is cut and the slow one is."""
    events = replay({"slow": SlowThenSlower()}, timeout=0.2)
    made = [e for e in events if isinstance(e, DecisionMade) and e.agent == "slow"][:6]
    errors = [(e.error or "").splitlines()[0] if e.error else None for e in made]
    assert errors == [None, None, None, "DecisionTimeout: decision took longer than 0.2 s",
                      None, None]  # fmt: skip
    assert [e.reasoning for e in made] == ["took 1", "took 2", "took 3", "", "took 5", "took 6"]


def test_the_time_limit_cannot_be_switched_off(alone: list[AnyEvent]) -> None:
    events = replay({"bad": SleepsAfterIgnoring()}, timeout=0.05)
    made = [e for e in events if isinstance(e, DecisionMade) and e.agent == "bad"]
    assert made[0].error is not None
    assert made[0].error.splitlines()[0] == "DecisionTimeout: decision took longer than 0.05 s"
    assert of_agent(events, "fav") == alone


# -- what a plugin returns -----------------------------------------------------------------------


def test_oversized_answers_are_cut_with_a_note() -> None:
    many = [Bet(market="m0", side="YES", amount=50)] * (MAX_ORDERS + 5)
    decision, note = checked(Decision(bets=many, reasoning="x" * (MAX_TEXT + 1)))
    assert len(decision.bets) == MAX_ORDERS
    assert len(decision.reasoning) == MAX_TEXT
    assert note == (
        f"bets: {MAX_ORDERS + 5:,} given, the first {MAX_ORDERS:,} kept (at most "
        f"{MAX_ORDERS:,} orders per decision); reasoning cut to {MAX_TEXT:,} of "
        f"{MAX_TEXT + 1:,} characters"
    )
    sells = [Sell(percentage=50, market="m0", side="YES")] * MAX_ORDERS
    decision, note = checked(Decision(bets=[Bet(market="m0", side="YES", amount=50)], sells=sells))
    assert (len(decision.sells), len(decision.bets)) == (MAX_ORDERS, 0)
    assert note is not None and note.startswith("bets: 1 given, the first 0 kept")


def test_a_huge_reasoning_is_logged_cut_with_the_note() -> None:
    class Talker(Strategy):
        def decide(self, view: View) -> Decision:
            return Decision(reasoning="z" * 5_000_000, trace=Trace(error="parse failed"))

    events = replay({"t": Talker()})
    made = [e for e in events if isinstance(e, DecisionMade) and e.agent == "t"]
    assert all(len(d.reasoning) == MAX_TEXT for d in made)
    assert {d.error for d in made} == {
        f"parse failed; reasoning cut to {MAX_TEXT:,} of 5,000,000 characters"
    }


@pytest.mark.parametrize(
    ("trace", "why"),
    [
        (Trace(tokens_in="12"), "TypeError: trace.tokens_in must be a whole number"),  # type: ignore[arg-type]
        (Trace(cost=float("nan")), "TypeError: trace.cost must be a finite number or None"),
        (Trace(prompt=b"x"), "TypeError: trace.prompt must be a string or None"),  # type: ignore[arg-type]
    ],
)
def test_a_trace_of_the_wrong_types_is_refused(trace: Trace, why: str) -> None:
    with pytest.raises((TypeError, ValueError)) as caught:
        checked(Decision(trace=trace))
    assert error_text(caught.value).splitlines()[0] == why


def test_an_endless_generator_of_bets_cannot_hang_the_check() -> None:
    def forever() -> Any:
        while True:
            yield Bet(market="m0", side="YES", amount=50)

    decision, note = checked(Decision(bets=forever()))
    assert len(decision.bets) == MAX_ORDERS
    assert note is not None and note.startswith("bets: more given")


# -- a real Ctrl-C ---------------------------------------------------------------------------

ARENA = Path(sys.executable).parent / "arena"
SLOW_PLUGIN = """
import os, pathlib, time
from strategies.api import Decision, Strategy


class Slow(Strategy):
    def decide(self, view):
        mark = pathlib.Path(os.environ["ARENA_TEST_MARK"])
        mark.touch()
        for _ in range(3_000):  # until the test has pressed Ctrl-C (a minute at most)
            if mark.with_name("go").exists():
                break
            time.sleep(0.02)
        return Decision.hold()
"""


@pytest.mark.slow  # two replays as processes, one stopped by a real SIGINT
def test_a_real_ctrl_c_stops_the_run_cleanly_and_the_log_resumes(
    tmp_path: Path, hand_tape_file: Path
) -> None:
    plugin = tmp_path / "slow.py"
    plugin.write_text(SLOW_PLUGIN)
    mark = tmp_path / "deciding"
    env = {**os.environ, "ARENA_TEST_MARK": str(mark)}

    def command(db: Path) -> list[str]:
        return [str(ARENA), "replay", "--tape", str(hand_tape_file), "--start", "2024-01-07",
                "--agent", f"s={plugin}:Slow", "--agent", "f=favourite", "--db", str(db),
                "--json"]  # fmt: skip

    interrupted = tmp_path / "interrupted.db"
    process = subprocess.Popen(command(interrupted), env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)  # while the first decision waits: never after the run
    _, err = process.communicate(timeout=120)
    (tmp_path / "go").touch()  # the runs below decide at once
    assert process.returncode == 130
    assert err.strip() == (
        f"interrupted: {interrupted} holds the run up to the decision Ctrl-C cut short, kept as "
        "a HOLD if it asked a model (a run never interrupted may have traded there); the same "
        "command resumes it"
    )
    resumed = subprocess.run(command(interrupted), env=env, capture_output=True, text=True,
                             timeout=120, check=True)  # fmt: skip
    fresh = subprocess.run(command(tmp_path / "fresh.db"), env=env, capture_output=True,
                           text=True, timeout=120, check=True)  # fmt: skip
    assert json.loads(resumed.stdout)["digest"] == json.loads(fresh.stdout)["digest"]


# -- a log written before beliefs were checked -------------------------------------------------


class TwoBeliefs(Strategy):
    """Two bets at its first decision, then nothing."""

    def decide(self, view: View) -> Decision:
        if view.week > 1:
            return Decision.hold()
        return Decision(
            bets=[
                Bet(market="a", side="YES", amount=60, belief=7.5),
                Bet(market="b", side="NO", amount=60, belief=0.7),
            ]
        )


def test_a_log_with_a_belief_outside_0_1_still_reports(
    arena: Arena, tmp_path: Path, hand_tape: Tape, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before beliefs were checked, ``belief=7.5`` reached the log; its reports still work,
    scoring the one real probability and saying that one was left out."""

    from ledger.store import EventStore
    from tests.conftest import hand_config

    monkeypatch.setattr(
        "arena.boundary.checks._bet",
        lambda b: BetIntent(market=b.market, side=b.side, amount=b.amount, belief=b.belief),
    )
    db = tmp_path / "old.db"
    with EventStore.open(db) as store:
        config = hand_config({"o": "hold"})
        CohortRunner(hand_tape, config, strategies={"o": TwoBeliefs()}).run(store)
    result = arena("report", db, "--json")
    assert result.exit_code == 0, result.output
    (beliefs,) = json.loads(result.output)["cohorts"][0]["beliefs"].values()
    # b's NO at 0.7 won (b resolved No): one scored belief, Brier (0.7 - 1)² = 0.09
    assert (beliefs["n"], beliefs["left_out"]) == (1, 1)
    assert beliefs["brier"] == pytest.approx(0.09)
    assert arena("report", db).exit_code == 0


def test_model_calls_are_cut_per_text_and_per_decision() -> None:
    """Twenty calls of 2 MB answers wrote 40 MB per decision: each text is cut to MAX_TEXT
    and the calls past MAX_TRACE_TEXT characters in all are dropped, both noted."""
    big = ModelCall(model="m", question="q", request="r", answer="A" * 2_000_000,
                    messages=[{"role": "user", "content": "u" * (MAX_TEXT + 1)}])  # fmt: skip
    decision, note = checked(Decision(trace=Trace(calls=(big,) * 20)))
    assert decision.trace is not None
    # each call keeps 3 + 100,000 + 4 + 100,000 characters: nine fit in 2,000,000
    fit = MAX_TRACE_TEXT // (3 + MAX_TEXT + len("role") + len("user") + len("content") + MAX_TEXT)
    assert len(decision.trace.calls) == fit == 9
    assert {len(c.answer or "") for c in decision.trace.calls} == {MAX_TEXT}
    assert {len(c.messages[0]["content"]) for c in decision.trace.calls} == {MAX_TEXT}
    assert note == (
        f"trace.calls: 11 dropped past {MAX_TRACE_TEXT:,} characters of model text; "
        f"trace.calls: 20 texts cut to {MAX_TEXT:,} characters"
    )
    with pytest.raises(ValueError, match=r"trace\.prompts: over 2,000,000 characters"):
        checked(Decision(trace=Trace(prompts={str(i): "p" * MAX_TEXT for i in range(21)})))


def test_a_model_call_of_the_wrong_types_is_refused_before_it_reaches_the_log() -> None:
    """msgspec builds a struct without checking its fields; the log would decode it back only
    to fail, so the boundary checks it as the log will read it."""
    call = ModelCall(model=7, question="q", request="r")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^trace.calls: Expected `str`, got `int` - at `\$.model`"):
        checked(Decision(trace=Trace(calls=(call,))))
    fine = ModelCall(model="m", question="q", request="r", messages=[{"role": "user"}])
    decision, note = checked(Decision(trace=Trace(calls=(fine,), prompts={"d": "system"})))
    assert decision.trace == Trace(calls=(fine,), prompts={"d": "system"}) and note is None


def test_a_model_call_with_numbers_no_log_can_hold_is_kept_without_them() -> None:
    """A token count of 2**80 and an infinite cost cannot be encoded: the call is kept with
    those numbers left out and a note, rather than the whole trace refused (which lost every
    call of the decision)."""
    call = ModelCall(model="m", question="q", request="r", status=200, answer="{}",
                     tokens_in=2**80, tokens_out=12, cost=float("inf"), latency_ms=5.0)  # fmt: skip
    decision, note = checked(Decision(trace=Trace(calls=(call,))))
    assert decision.trace is not None
    [kept] = decision.trace.calls
    assert (kept.tokens_in, kept.tokens_out, kept.cost, kept.answer) == (None, 12, None, "{}")
    assert note == "trace.calls: cost, tokens_in out of range, left out"
    msgspec.json.decode(msgspec.json.encode(kept), type=ModelCall)


def test_markets_resolved_before_the_start_show_nothing_recorded_after_it() -> None:
    """A market resolved before the start whose recording goes on after it: its price path
    ends at its resolution, its volume points and its volume at the start, however late they
    were taken (the final 900 was reported a day after the start)."""
    start = 1_704_585_600  # Sunday 2024-01-07
    day = 86_400
    markets = [
        MarketInfo(id="old", question="old?", outcomes=("Yes", "No"), volume=900,
                   volume_history=((start - 5 * day, 100.0), (start, 400.0),
                                   (start + day, 900.0))),
        MarketInfo(id="live", question="live?", outcomes=("Yes", "No"), volume=50),
    ]  # fmt: skip
    series = {
        "old": (np.array([start - 6 * day, start - 3 * day]), np.array([0.4, 0.9])),
        "live": (np.array([start - day, start + day]), np.array([0.5, 0.6])),
    }
    resolutions = [
        Resolution(market="old", ts=start - 2 * day, winner="Yes"),
        Resolution(market="live", ts=start + 9 * day, winner="No"),
    ]
    tape = Tape.from_series(markets, series, resolutions, source="test")
    seen: list[Context] = []

    class Keeps(Strategy):
        def setup(self, context: Context) -> None:
            seen.append(context)

        def decide(self, view: View) -> Decision:
            return Decision.hold()

    config = CohortConfig(start=start, agents={"k": "hold"}, universe=1, decision_cadence="weekly")
    CohortRunner(tape, config, strategies={"k": Keeps()}).run(None)
    [old] = seen[0].resolved_before
    assert old.meta.id == "old"
    assert old.volume_history == ((start - 5 * day, 100.0), (start, 400.0))
    assert old.meta.volume == 400.0
    assert old.history is not None
    assert list(old.history[0]) == [start - 6 * day, start - 3 * day]


class BlocksTheAlarm(Strategy):
    """Blocks SIGALRM on the main thread and returns at once."""

    def decide(self, view: View) -> Decision:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        return Decision.hold("blocked")


def test_a_plugin_s_blocked_signals_do_not_outlive_its_call() -> None:
    """A plugin that blocks SIGALRM leaves it blocked for neither the run nor the processes the
    run starts afterwards (a child inherits the mask: its time limit would never strike while
    it waits in a system call, as the model-waiting tests found after such a plugin ran)."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    replay({"b": BlocksTheAlarm()}, timeout=30.0)
    assert signal.SIGALRM not in signal.pthread_sigmask(signal.SIG_BLOCK, ())
    assert signal.pthread_sigmask(signal.SIG_BLOCK, ()) == before
