"""The replay one step at a time (``CohortRunner.steps``): the same log as ``run``, each step
committed before it is yielded when asked, and a stepped replay left early resumes."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

from arena.run.runner import CohortRun, CohortRunner, Step
from ledger.events import CohortClosed, DecisionMade, Marked, MarketResolved
from ledger.store import EventStore
from replays.tape import Tape
from tests.conftest import DAY, START, WEEK, hand_config

AGENTS = {"fav": "favourite", "hold": "hold"}


def test_steps_walk_the_timeline_and_return_the_run(tmp_path: Path, hand_tape: Tape) -> None:
    runner = CohortRunner(hand_tape, hand_config(AGENTS))
    with EventStore.open(tmp_path / "stepped.db") as store:
        steps, run = walk(runner.steps(store))
        events = list(store.read())
    assert steps[0].kind == "open" and steps[-1].kind == "close"
    assert steps[-1].version == run.events == len(events)
    # one step per instant and kind of the timeline, in its order
    kinds = {0: "resolution", 1: "mark", 2: "listing", 3: "decision", 4: "stop"}
    middle = [(kinds[kind], ts) for ts, kind, _ in runner.schedule.steps]
    assert [(s.kind, s.ts) for s in steps[1:-1]] == middle
    # each step's version counts the events up to its last one
    for step in steps[1:]:
        made = events[: step.version]
        if step.kind == "decision":
            assert [e.agent for e in made if isinstance(e, DecisionMade) and e.ts == step.ts][
                -len(AGENTS) :
            ] == list(AGENTS)
        elif step.kind == "mark":
            assert isinstance(made[-1], Marked) and made[-1].ts == step.ts
        elif step.kind == "resolution":
            assert any(isinstance(e, MarketResolved) and e.ts == step.ts for e in made)
    assert isinstance(events[-1], CohortClosed) and steps[-1].ts == events[-1].ts
    assert [s.version for s in steps] == sorted(s.version for s in steps)


def walk(stepping: Generator[Step, None, CohortRun]) -> tuple[list[Step], CohortRun]:
    """Every step, and the run the generator returns at its end."""
    steps = []
    while True:
        try:
            steps.append(next(stepping))
        except StopIteration as done:
            return steps, done.value


def test_stepped_and_whole_replays_log_the_same_bytes(tmp_path: Path, hand_tape: Tape) -> None:
    with EventStore.open(tmp_path / "whole.db") as store:
        whole = CohortRunner(hand_tape, hand_config(AGENTS)).run(store)
        expected = store.digest()
    with EventStore.open(tmp_path / "stepped.db") as store:
        _, stepped = walk(
            CohortRunner(hand_tape, hand_config(AGENTS)).steps(store, flush_each_step=True)
        )
        assert store.digest() == expected
    assert stepped.state.snapshot() == whole.state.snapshot() and stepped.events == whole.events


def test_each_step_is_committed_before_it_is_yielded(tmp_path: Path, hand_tape: Tape) -> None:
    db = tmp_path / "live.db"
    seen: list[tuple[int, int]] = []
    with EventStore.open(db) as store:
        for step in CohortRunner(hand_tape, hand_config(AGENTS)).steps(store, flush_each_step=True):
            # another connection, as a reader process would open it, sees the step's events
            with EventStore.open(db, readonly=True) as reader:
                seen.append((step.version, reader.stream_version(next(iter(reader.streams())))))
    assert [stored for _, stored in seen] == [version for version, _ in seen]
    assert seen[0][0] > 0


def test_a_stepped_replay_left_early_resumes_to_the_same_log(
    tmp_path: Path, hand_tape: Tape
) -> None:
    with EventStore.open(tmp_path / "whole.db") as store:
        CohortRunner(hand_tape, hand_config(AGENTS)).run(store)
        expected = store.digest()
    db = tmp_path / "left.db"
    with EventStore.open(db) as store:
        stepping = CohortRunner(hand_tape, hand_config(AGENTS)).steps(store, flush_each_step=True)
        for step in stepping:
            if step.kind == "decision" and step.ts >= START + WEEK:
                break
        stepping.close()  # the clock and sandbox are let go, the agents closed
        left_at = store.stream_version(store.streams()[0])
        assert left_at == step.version
        resumed = CohortRunner(hand_tape, hand_config(AGENTS)).run(store)
        assert resumed.appended == resumed.events - left_at
        assert store.digest() == expected


def test_the_clock_is_frozen_only_while_the_replay_runs(hand_tape: Tape) -> None:
    import time

    stepping = CohortRunner(hand_tape, hand_config(AGENTS)).steps()
    first = next(stepping)
    assert first.kind == "open" and time.time() == START  # held across the yield
    stepping.close()
    assert time.time() > START + 365 * DAY  # the real clock again
