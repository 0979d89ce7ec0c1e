"""Cohorts on worker processes report each decision to the driver's watcher as it is made (the
progress display's per-decision lines and decisions bar), and report nothing, at no cost, when
nobody watches; the log is the same bytes either way."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
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
from arena.engines.local import Decisions
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
    return DecisionSeen("c", "2024-01-07", "a", week, 0.0, 0, ())


class Timers:
    """``Batched``'s ``later`` by hand: each timer armed (its delay, its call), and which were
    cancelled; a test fires one by calling it."""

    def __init__(self) -> None:
        self.armed: list[tuple[float, Callable[[], None]]] = []
        self.cancelled: list[int] = []

    def __call__(self, seconds: float, call: Callable[[], None]) -> Callable[[], None]:
        n = len(self.armed)
        self.armed.append((seconds, call))
        return lambda: self.cancelled.append(n)


def test_a_worker_sends_decisions_in_batches_at_most_every_interval_and_the_rest_at_the_end() -> (
    None
):
    """At t = 0.00, 0.05, 0.30, 0.35, 0.40, 0.70 with 0.2 s between sends: the third decision
    goes with the two before it (0.30 s since the start), the sixth with the two before it
    (0.40 s since the send at 0.30), nothing is left for ``flush``; a seventh at 0.75 is. The
    first decision kept after a send arms a timer for the rest of the interval (0.2 s at 0.00,
    0.15 s at 0.35, 0.15 at 0.75), and each send cancels it."""
    now = [0.0]
    sent: list[list[int]] = []
    timers = Timers()
    batched = Batched(
        lambda batch: sent.append([s.week for s in batch]), 0.2, lambda: now[0], timers
    )
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
    assert [seconds for seconds, _ in timers.armed] == pytest.approx([0.2, 0.15, 0.15])
    assert timers.cancelled == [0, 1, 2]


def test_a_kept_decision_is_sent_when_its_timer_strikes_with_no_decision_after_it() -> None:
    """A send at 0.30 (the first decision came 0.30 s after the start); one at 0.35 is kept,
    with a timer for 0.15 s. No decision follows (the next agent waits on a model for minutes):
    the timer sends it, and it is not sent again at the cohort's end."""
    now = [0.0]
    sent: list[list[int]] = []
    timers = Timers()
    batched = Batched(
        lambda batch: sent.append([s.week for s in batch]), 0.2, lambda: now[0], timers
    )
    now[0] = 0.30
    batched(seen(1))
    now[0] = 0.35
    batched(seen(2))
    assert sent == [[1]]
    ((seconds, strike),) = timers.armed
    assert seconds == pytest.approx(0.15)
    now[0] = 0.50
    strike()
    assert sent == [[1], [2]]
    batched.flush()
    assert sent == [[1], [2]]


def test_the_timer_sends_from_a_thread_that_takes_no_signal() -> None:
    """A real timer: the kept decision arrives without another one, sent from a thread where
    every signal is blocked, so the sandbox's SIGALRM and a Ctrl-C go to the run's own
    thread."""
    arrived = threading.Event()
    sent: list[tuple[list[int], set[int]]] = []

    def send(batch: list[DecisionSeen]) -> None:
        sent.append(([s.week for s in batch], signal.pthread_sigmask(signal.SIG_BLOCK, ())))
        arrived.set()

    batched = Batched(send, 0.05)
    batched(seen(1))
    assert arrived.wait(BOUND), "the timer never sent the kept decision"
    ((weeks, blocked),) = sent
    assert weeks == [1]
    assert {signal.SIGALRM, signal.SIGINT, signal.SIGTERM} <= blocked
    assert signal.SIGALRM not in signal.pthread_sigmask(signal.SIG_BLOCK, ())  # this thread's


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


STALLS = """
import os
import time
from pathlib import Path

from strategies.api import Decision, Strategy


class Stalls(Strategy):
    \"\"\"Decides at once in week 1 (its process named in FOLDER), then stalls a minute.\"\"\"

    def decide(self, view):
        Path(FOLDER, f"{os.getpid()}.worker").touch()
        if view.week > 1:
            time.sleep(60)
        return Decision.hold()
"""


def test_a_watcher_that_fails_ends_a_run_on_local_workers_at_once(
    tmp_path: Path, hand_tape_file: Path
) -> None:
    """As a run in the driver's own process and a Ray run do: the watcher raises on the first
    decision it is told (a week-1 decision, sent by the worker's timer as the agent stalls in
    week 2), and the run ends with its error, the workers killed, no cohort in the log (a
    prefix the same command resumes), rather than once every stalled cohort is done."""
    plugin = tmp_path / "stalls.py"
    plugin.write_text(f"FOLDER = {str(tmp_path)!r}\n" + STALLS)
    source = TapeSource.load(hand_tape_file)
    configs = [hand_config({"s": f"{plugin}:Stalls"}, seed=s) for s in range(3)]
    told: list[DecisionSeen] = []

    def fails(seen: DecisionSeen) -> None:
        told.append(seen)
        raise RuntimeError("the terminal went away")

    db = tmp_path / "run.db"
    with pytest.raises(RuntimeError, match="the terminal went away"):
        replay_cohorts(source, configs, db, RunOptions(jobs=2), on_decision=fails)
    assert len(told) == 1
    workers = [int(p.stem) for p in tmp_path.glob("*.worker")]
    assert workers
    wait_for(lambda: not any(alive(pid) for pid in workers), "the workers' end")
    with EventStore.open(db, readonly=True) as store:
        assert store.streams() == []


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


SPAWNER = """
import os

from strategies.api import Decision, Strategy


class Spawner(Strategy):
    \"\"\"Starts a helper in the background at its first decision (as a plugin might start a
    local model server), its pid written to FOLDER: ``os.system`` is C's fork and exec, which
    keeps every descriptor the worker lets its children inherit.\"\"\"

    started = False

    def decide(self, view):
        if not Spawner.started:
            Spawner.started = True
            os.system(f"sleep 120 & echo $! > {FOLDER}/$$.pid")
        return Decision.hold()
"""


def sleeping(pid: int) -> bool:
    """``pid`` is a live ``sleep`` (not a number the kernel gave another process since)."""
    try:
        return alive(pid) and Path(f"/proc/{pid}/comm").read_text().strip() == "sleep"
    except OSError:
        return False


def test_a_watched_run_returns_while_a_plugins_background_child_lives(
    tmp_path: Path, hand_tape_file: Path
) -> None:
    """Whether the run returns does not depend on whether a terminal watches it: a plugin's
    background ``sleep`` (two minutes) is still running when the watched run has returned, with
    every decision told (two cohorts, three Sundays, one agent) and the log of an unwatched
    run. It used to keep the decisions pipe open, and the run waited for it to end."""
    plugin = tmp_path / "spawner.py"
    plugin.write_text(f"FOLDER = {str(tmp_path)!r}\n" + SPAWNER)
    source = TapeSource.load(hand_tape_file)
    agents = {"s": f"{plugin}:Spawner"}
    configs = [hand_config(agents), hand_config(agents, seed=1)]
    heard: list[DecisionSeen] = []
    try:
        replay_cohorts(source, configs, tmp_path / "watched.db", RunOptions(jobs=2),
                       on_decision=heard.append)  # fmt: skip
        sleepers = [int(p.read_text()) for p in tmp_path.glob("*.pid")]
        assert sleepers and all(sleeping(pid) for pid in sleepers)
        assert len(heard) == 6
    finally:
        for found in tmp_path.glob("*.pid"):
            if sleeping(pid := int(found.read_text())):
                os.kill(pid, signal.SIGKILL)
    replay_cohorts(source, configs, tmp_path / "unwatched.db", RunOptions(jobs=2))
    assert digest(tmp_path / "watched.db") == digest(tmp_path / "unwatched.db")


def test_the_driver_stops_reading_at_its_own_end_though_another_process_holds_the_pipe() -> None:
    """Once every cohort is back, the reading thread tells what the pipe holds and stops at the
    driver's last message, though a process still holds the pipe's writing end (a child that
    got it however it did), so ``close`` returns and the holder lives on."""
    heard: list[DecisionSeen] = []
    decisions = Decisions(multiprocessing.get_context("spawn"), heard.append)
    holder = subprocess.Popen(["sleep", "600"], pass_fds=[decisions.sender.writer.fileno()])
    try:
        decisions.sender([seen(1), seen(2)])
        decisions.sender([seen(3)])
        closing = threading.Thread(target=decisions.close, args=(True,), daemon=True)
        closing.start()
        closing.join(BOUND)
        assert not closing.is_alive(), "close waited for the pipe's end"
        assert holder.poll() is None
        assert [s.week for s in heard] == [1, 2, 3]
    finally:
        holder.kill()
        holder.wait()


def test_the_driver_reads_past_messages_that_are_not_batches_of_decisions() -> None:
    """Bytes that do not unpickle, and a pickle of something else, are dropped: the thread
    reads on (a dead reader left the workers blocked on a full pipe, the lock held), and tells
    the decisions around them in order."""
    heard: list[DecisionSeen] = []
    decisions = Decisions(multiprocessing.get_context("spawn"), heard.append)
    writer = decisions.sender.writer
    writer.send_bytes(b"not a pickle")
    decisions.sender([seen(1)])
    writer.send(42)
    writer.send([seen(2), "not a decision"])
    decisions.sender([seen(2), seen(3)])
    decisions.close(True)
    assert [s.week for s in heard] == [1, 2, 3]
