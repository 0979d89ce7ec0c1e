"""Cohorts on worker processes report each decision to the driver's watcher as it is made (the
progress display's per-decision lines and decisions bar), and report nothing, at no cost, when
nobody watches; the log is the same bytes either way."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from arena.bench.pty_terminal import PtyTerminal, TerminalError
from arena.engines.base import TapeSource
from arena.engines.driver import replay_cohorts
from arena.run.pace import Batched, DecisionSeen
from arena.run.settings import RunOptions
from ledger.store import EventStore
from tests.arena.engines.test_local_interrupts import (
    BOUND,
    alive,
    command,
    descendants,
    in_session,
    wait_for,
)
from tests.arena.test_progress import plain
from tests.conftest import hand_config

AGENTS = {"fav": "favourite", "coin": "random?bets=2"}


def digest(db: Path) -> str:
    with EventStore.open(db, readonly=True) as store:
        return store.digest()


def seen(week: int) -> DecisionSeen:
    return DecisionSeen("c", "a", week, 0.0, 0, ())


def test_a_worker_sends_decisions_in_batches_at_most_every_interval_and_the_rest_at_the_end() -> (
    None
):
    """At t = 0.00, 0.05, 0.30, 0.35, 0.40, 0.70 with 0.2 s between sends: the third decision
    goes with the two before it (0.30 s since the start), the sixth with the two before it
    (0.40 s since the send at 0.30), nothing is left for ``flush``; a seventh at 0.75 is."""
    now = [0.0]
    sent: list[list[int]] = []
    batched = Batched(lambda batch: sent.append([s.week for s in batch]), 0.2, lambda: now[0])
    for t, week in ((0.0, 1), (0.05, 2), (0.30, 3), (0.35, 4), (0.40, 5), (0.70, 6)):
        now[0] = t
        batched(seen(week))
    assert sent == [[1, 2, 3], [4, 5, 6]]
    batched.flush()
    assert sent == [[1, 2, 3], [4, 5, 6]]  # nothing kept, nothing sent
    now[0] = 0.75
    batched(seen(7))
    batched.flush()
    assert sent == [[1, 2, 3], [4, 5, 6], [7]]


def test_every_decision_of_every_cohort_on_local_workers_reaches_the_watcher(
    tmp_path: Path, hand_tape_file: Path
) -> None:
    """Two cohorts on two workers: each decides at three Sundays with two agents, so the
    watcher hears 2 x 3 x 2 = 12 decisions, each cohort's in its own order (as a run in this
    process reports them), and the log is the one an unwatched run writes, whose driver
    reads nothing from its workers (no reading thread)."""
    source = TapeSource.load(hand_tape_file)
    configs = [hand_config(AGENTS), hand_config(AGENTS, seed=1)]
    heard: list[DecisionSeen] = []
    watched: set[str] = set()
    replay_cohorts(source, configs, tmp_path / "watched.db", RunOptions(jobs=2),
                   on_done=threads(watched), on_decision=heard.append)  # fmt: skip
    assert len(heard) == 12
    here: list[DecisionSeen] = []
    replay_cohorts(source, configs[:1], tmp_path / "here.db", RunOptions(jobs=1),
                   on_decision=here.append)  # fmt: skip
    first = here[0].cohort
    assert [(s.agent, s.week) for s in here] == [
        ("fav", 1), ("coin", 1), ("fav", 2), ("coin", 2), ("fav", 3), ("coin", 3),
    ]  # fmt: skip
    assert [(s.agent, s.week) for s in heard if s.cohort == first] == [
        (s.agent, s.week) for s in here
    ]
    assert len({s.cohort for s in heard}) == 2
    unwatched: set[str] = set()
    replay_cohorts(source, configs, tmp_path / "unwatched.db", RunOptions(jobs=2),
                   on_done=threads(unwatched))  # fmt: skip
    assert digest(tmp_path / "watched.db") == digest(tmp_path / "unwatched.db")
    assert "arena-decisions" in watched and "arena-decisions" not in unwatched


def threads(names: set[str]) -> Callable[[object], None]:
    """An ``on_done`` that adds the names of this process's threads to ``names``."""

    def running(_: object) -> None:
        names.update(thread.name for thread in threading.enumerate())

    return running


def test_a_watcher_that_fails_stops_no_worker_and_its_error_ends_the_run(
    tmp_path: Path, hand_tape_file: Path
) -> None:
    """The driver keeps reading what the workers send after its watcher raised (a worker
    never waits on a full pipe), every cohort reaches the log, and the error is raised then."""
    source = TapeSource.load(hand_tape_file)
    configs = [hand_config(AGENTS, seed=s) for s in range(3)]
    told: list[DecisionSeen] = []

    def fails(seen: DecisionSeen) -> None:
        told.append(seen)
        raise RuntimeError("the terminal went away")

    db = tmp_path / "run.db"
    with pytest.raises(RuntimeError, match="the terminal went away"):
        replay_cohorts(source, configs, db, RunOptions(jobs=2), on_decision=fails)
    assert len(told) == 1
    with EventStore.open(db, readonly=True) as store:
        assert len(store.streams()) == 3


def test_every_decision_of_every_cohort_on_ray_reaches_the_watcher(
    tmp_path: Path, hand_tape_file: Path, ray_cluster: None
) -> None:
    """As on local workers: 12 decisions of two cohorts, through a Ray queue, and the log of
    a run nobody watched."""
    source = TapeSource.load(hand_tape_file)
    configs = [hand_config(AGENTS), hand_config(AGENTS, seed=1)]
    heard: list[DecisionSeen] = []
    replay_cohorts(source, configs, tmp_path / "ray.db", RunOptions(engine="ray"),
                   on_decision=heard.append)  # fmt: skip
    assert len(heard) == 12
    assert sorted((s.cohort, s.week, s.agent) for s in heard) == sorted(
        (cohort, week, agent)
        for cohort in {s.cohort for s in heard}
        for week in (1, 2, 3)
        for agent in AGENTS
    )
    assert len({s.cohort for s in heard}) == 2
    replay_cohorts(source, configs, tmp_path / "local.db", RunOptions(jobs=2))
    assert digest(tmp_path / "ray.db") == digest(tmp_path / "local.db")


@pytest.mark.slow  # replays as processes on a pseudo-terminal, interrupted and resumed
def test_ctrl_c_on_a_watched_run_ends_it_at_once_and_it_resumes(tmp_path: Path) -> None:
    """``test_local_interrupts``' Ctrl-C with cohorts running, on a terminal: once the workers'
    decisions are shown, so that they are sending them to the driver's reading thread as the
    Ctrl-C comes."""
    reference = subprocess.run(command(tmp_path / "fresh.db"), capture_output=True, text=True,
                               timeout=BOUND, check=True)  # fmt: skip
    db = tmp_path / "run.db"
    watched = [arg for arg in command(db) if arg != "--json"]
    with PtyTerminal(watched, size=(160, 50)) as screen:
        process = screen.process
        deadline = time.perf_counter() + BOUND
        while b"decisions" not in screen.output:  # the workers' first decisions shown
            screen._read(deadline)
        below = descendants(process.pid)
        os.killpg(process.pid, signal.SIGINT)
        deadline = time.perf_counter() + BOUND
        with contextlib.suppress(TerminalError):
            while time.perf_counter() < deadline:
                screen._read(deadline)
        assert process.wait(BOUND) == 130
    shown = "\n".join(plain(screen.output.decode(errors="replace")))
    assert "Traceback" not in shown, shown
    wait_for(lambda: not any(alive(p) for p in below), "the workers' end")
    wait_for(lambda: not in_session(process.pid), "the end of every process of the run")
    resumed = subprocess.run(command(db), capture_output=True, text=True, timeout=BOUND)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["digest"] == json.loads(reference.stdout)["digest"]
