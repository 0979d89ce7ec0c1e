"""``--isolate``: each agent in a worker process of its own.

The same log as in-process for honest agents; a worker that hangs, crashes or lies becomes a
recorded HOLD, and the honest agent beside it is unchanged. In its worker a plugin finds no
tape, no broker and no other agent, however it searches.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import socket
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from arena.boundary.oslimits import plan
from arena.boundary.sandbox import RunInterrupted
from arena.run.cohort import CohortConfig
from arena.run.runner import CohortRunner
from arena.run.settings import RunOptions, RunSettings
from ledger.events import AnyEvent, CohortOpened, DecisionMade, ModelCall, ModelCalled, OrderFilled
from ledger.store import EventStore
from ledger.stream import MemorySink
from strategies.api import Decision, Strategy, View
from strategies.llm.calls import current
from strategies.loader import build_strategy
from tests.arena.boundary.test_boundary import T0, honest_tape, of_agent, replay
from tests.conftest import Arena


def without_isolation(events: list[AnyEvent]) -> list[AnyEvent]:
    """The events with the opening's record of the OS sandbox taken out, which an isolated
    run's opening has and an in-process one's has not."""
    opened = events[0]
    assert isinstance(opened, CohortOpened)
    settings = {k: v for k, v in opened.settings.items() if k != "isolation"}
    return [msgspec.structs.replace(opened, settings=settings), *events[1:]]


def test_isolated_agents_log_the_same_events_as_in_process() -> None:
    agents = {"rnd": build_strategy("random"), "lin": build_strategy("linear?B=1000")}
    here = replay(agents)
    apart = replay({"rnd": build_strategy("random"), "lin": build_strategy("linear?B=1000")},
                   isolate=True, timeout=30.0)  # fmt: skip
    assert "isolation" not in here[0].settings  # type: ignore[union-attr]
    assert apart[0].settings["isolation"] == plan().summary()  # type: ignore[union-attr]
    assert without_isolation(apart) == here
    assert any(isinstance(e, OrderFilled) and e.agent == "rnd" for e in here)


def test_the_cli_flag_logs_the_same_events_and_what_it_enforced(
    arena: Arena, tmp_path: Path, hand_tape_file: Path
) -> None:
    def events(*extra: str) -> list[AnyEvent]:
        db = tmp_path / f"run{len(extra)}.db"
        args = ["--tape", str(hand_tape_file), "--start", "2024-01-07", "--agent", "f=favourite",
                "--agent", "r=random", "--db", str(db), "--json", *extra]  # fmt: skip
        result = arena("replay", *args)
        assert result.exit_code == 0, result.output
        with EventStore.open(db, readonly=True) as store:
            (stream,) = store.streams()
            return list(store.read(stream))

    assert without_isolation(events("--isolate")) == events()


@pytest.fixture(scope="module")
def favourite_alone() -> list[AnyEvent]:
    return of_agent(replay({}), "fav")


class Hangs(Strategy):
    """Hangs at its first decision only: after the limit it decides again."""

    def decide(self, view: View) -> Decision:
        if view.ts == T0:
            time.sleep(60)
        return Decision.hold("back")


class Swallows(Strategy):
    """Swallows the time limit at its first decision, for ever: only a kill stops it."""

    def decide(self, view: View) -> Decision:
        while view.ts == T0:
            with contextlib.suppress(BaseException):
                time.sleep(60)
        return Decision.hold("back")


class Crashes(Strategy):
    """Reads address 0: a segmentation fault, which no in-process defence survives."""

    def decide(self, view: View) -> Decision:
        ctypes.string_at(0)
        return Decision.hold()


class Searches(Strategy):
    """Looks through every object of its process for the tape, the runner or a broker."""

    def decide(self, view: View) -> Decision:
        names = {type(o).__name__ for o in gc.get_objects()}
        found = sorted(names & {"Tape", "CohortRunner", "Broker", "CohortState", "EventStore"})
        return Decision.hold(f"found {found}")


def decisions(events: list[AnyEvent], agent: str) -> list[DecisionMade]:
    return [e for e in events if isinstance(e, DecisionMade) and e.agent == agent]


def test_a_hung_decision_ends_at_the_limit_as_in_process(favourite_alone: list[AnyEvent]) -> None:
    events = replay({"bad": Hangs()}, isolate=True, timeout=1.0)
    made = decisions(events, "bad")
    here = decisions(replay({"bad": Hangs()}, timeout=1.0), "bad")
    assert made == here
    assert made[0].error is not None
    assert made[0].error.startswith("DecisionTimeout: decision took longer than 1 s\n")
    assert {d.reasoning for d in made[1:]} == {"back"}
    assert of_agent(events, "fav") == favourite_alone


def test_a_worker_that_swallows_the_limit_is_stopped_restarted_and_recorded(
    favourite_alone: list[AnyEvent],
) -> None:
    events = replay({"bad": Swallows()}, isolate=True, timeout=1.0)
    made = decisions(events, "bad")
    assert made[0].error == (
        "DecisionTimeout: decision took longer than 1 s (its worker was stopped and restarted)"
    )
    assert {d.reasoning for d in made[1:]} == {"back"}
    assert of_agent(events, "fav") == favourite_alone


@pytest.mark.slow  # a segfaulting worker restarted at every decision: seconds of waiting
def test_a_crashed_worker_is_a_recorded_hold(favourite_alone: list[AnyEvent]) -> None:
    events = replay({"bad": Crashes()}, isolate=True, timeout=30.0)
    made = decisions(events, "bad")
    assert made and {d.error for d in made} == {
        "WorkerDied: the agent's worker process ended (exit code -11)"
    }
    assert of_agent(events, "fav") == favourite_alone


def test_an_isolated_plugin_finds_nothing_of_the_run() -> None:
    (here,) = {d.reasoning for d in decisions(replay({"s": Searches()}), "s")}
    assert "Tape" in here  # in-process, gc reaches everything: what --isolate is for
    apart = {d.reasoning for d in decisions(replay({"s": Searches()}, isolate=True), "s")}
    assert apart == {"found []"}


class ReadsTheClock(Strategy):
    """Reads every clock freezegun replaces, straight from ``decide`` (the shallowest call, where
    a worker process's own frames are nearest): honest code computing time to a market's end."""

    def decide(self, view: View) -> Decision:
        clocks = (time.time(), time.monotonic(), time.perf_counter(), time.time_ns() / 1e9)
        return Decision.hold(" ".join(f"{c - view.ts:.0f}" for c in clocks))


def test_an_isolated_plugin_reads_the_simulated_clock_as_in_process() -> None:
    here = {d.reasoning for d in decisions(replay({"c": ReadsTheClock()}), "c")}
    apart = {d.reasoning for d in decisions(replay({"c": ReadsTheClock()}, isolate=True), "c")}
    assert here == apart == {"0 0 0 0"}


class AsksThenHangs(Strategy):
    """At its first decision asks a model twice (as a client records each attempt into the
    decision's call log), has the first answer, and hangs on the second."""

    def decide(self, view: View) -> Decision:
        if view.ts == T0:
            log = current()
            assert log is not None
            ask = log.question()
            first = ModelCall(model="m", question="decision", request="r1")
            log.finish(log.begin(ask, first), msgspec.structs.replace(first, answer="HOLD"))
            log.begin(log.question(), ModelCall(model="m", question="decision", request="r2"))
            time.sleep(60)
        return Decision.hold("back")


def test_a_timed_out_decision_keeps_its_model_calls_under_isolate_as_in_process() -> None:
    def calls(isolate: bool) -> list[tuple[str | None, str | None]]:
        events = replay({"bad": AsksThenHangs()}, isolate=isolate, timeout=1.0)
        return [(e.call.answer, e.call.error) for e in events if isinstance(e, ModelCalled)]

    timed_out = "aborted: DecisionTimeout: decision took longer than 1 s"
    assert calls(isolate=True) == calls(isolate=False) == [("HOLD", None), (None, timed_out)]


def test_a_decision_cut_short_by_ctrl_c_keeps_its_model_calls_under_isolate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker is out of the terminal's reach: the run passes its Ctrl-C on, and the
    worker sends the decision cut short with its calls, as an in-process run records it."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    asked = threading.Event()

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = server.accept()  # and never answer
            asked.set()
            conn.recv(1024)
            conn.close()

    def ctrl_c() -> None:
        if asked.wait(60):
            KILL(os.getpid(), signal.SIGINT)  # as the terminal sends it

    monkeypatch.setenv("ARENA_LLM_BASE_URL", f"http://127.0.0.1:{port}")  # the port it may reach
    threading.Thread(target=serve, daemon=True).start()
    threading.Thread(target=ctrl_c, daemon=True).start()
    tape = honest_tape()
    start = datetime.fromtimestamp(tape.span()[0], UTC)
    config = CohortConfig(start=start, agents={"asks": "hold"}, universe=6)
    options = RunOptions(decision_timeout=30.0, isolate=True)
    runner = CohortRunner(tape, RunSettings(cohort=config, options=options),
                          strategies={"asks": AsksAndWaits(port)})  # fmt: skip
    sink = MemorySink()
    try:
        with pytest.raises(RunInterrupted):
            runner.run(sink)
    finally:
        server.close()
    calls = [e.call for e in sink.read(runner.cohort) if isinstance(e, ModelCalled)]
    interrupted = "aborted: RunInterrupted: the run was interrupted (Ctrl-C)"
    assert [(c.request, c.answer, c.error) for c in calls] == [
        ("r1", "HOLD", None),
        ("r2", None, interrupted),
    ]


KILL = os.kill
"""Bound before any run: during one the sandbox refuses a signal to the run's own process."""


class AsksAndWaits(Strategy):
    """Asks a model twice: the first answer comes, the second question waits on a server
    that never answers."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.port = port

    def decide(self, view: View) -> Decision:
        log = current()
        assert log is not None
        first = ModelCall(model="m", question="decision", request="r1")
        log.finish(log.begin(log.question(), first), msgspec.structs.replace(first, answer="HOLD"))
        log.begin(log.question(), ModelCall(model="m", question="decision", request="r2"))
        with socket.create_connection(("127.0.0.1", self.port)) as conn:
            conn.recv(1)
        return Decision.hold()
