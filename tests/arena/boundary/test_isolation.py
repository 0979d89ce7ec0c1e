"""``--isolate``: each agent in a worker process of its own.

The same log as in-process for honest agents; a worker that hangs, crashes or lies becomes a
recorded HOLD, and the honest agent beside it is unchanged. In its worker a plugin finds no
tape, no broker and no other agent, however it searches.
"""

from __future__ import annotations

import ctypes
import gc
import json
import time
from pathlib import Path

import pytest

from ledger.events import AnyEvent, DecisionMade, OrderFilled
from strategies.api import Decision, Strategy, View
from strategies.loader import build_strategy
from tests.arena.boundary.test_boundary import T0, of_agent, replay
from tests.conftest import Arena


def test_isolated_agents_log_the_same_events_as_in_process() -> None:
    agents = {"rnd": build_strategy("random"), "lin": build_strategy("linear?B=1000")}
    here = replay(agents)
    apart = replay({"rnd": build_strategy("random"), "lin": build_strategy("linear?B=1000")},
                   isolate=True, timeout=30.0)  # fmt: skip
    assert here == apart
    assert any(isinstance(e, OrderFilled) and e.agent == "rnd" for e in here)


def test_the_cli_flag_gives_the_same_digest(
    arena: Arena, tmp_path: Path, hand_tape_file: Path
) -> None:
    def digest(*extra: str) -> str:
        db = tmp_path / f"run{len(extra)}.db"
        args = ["--tape", str(hand_tape_file), "--start", "2024-01-07", "--agent", "f=favourite",
                "--agent", "r=random", "--db", str(db), "--json", *extra]  # fmt: skip
        result = arena("replay", *args)
        assert result.exit_code == 0, result.output
        return str(json.loads(result.output)["digest"])

    assert digest("--isolate") == digest()


@pytest.fixture(scope="module")
def favourite_alone() -> list[AnyEvent]:
    return of_agent(replay({}), "fav")


class Hangs(Strategy):
    """Hangs at its first decision only: after the restart it decides again."""

    def decide(self, view: View) -> Decision:
        if view.ts == T0:
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


def test_a_hung_worker_is_stopped_restarted_and_recorded(favourite_alone: list[AnyEvent]) -> None:
    events = replay({"bad": Hangs()}, isolate=True, timeout=1.0)
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
