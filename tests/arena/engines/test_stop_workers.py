"""An LLM run on local workers keeps every model call it made however it ends: a Ctrl-C stops
each worker as a Ctrl-C stops a run in process (the decision it cut a HOLD with its calls, the
one in flight kept as aborted, all in the worker's journal), and a driver killed with SIGKILL
leaves every answer already given in the journals; the same command then asks the model
nothing it asked before but the questions never answered.

``arena replay --jobs 2`` runs in a child process over the two cohorts of the hand tape (three
and two weekly decisions), one ``llm`` agent asking the fake server of ``llm_server.py``, which
answers its first question and holds every later one unanswered (one a worker, so two) until
the test has stopped the child.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from arena.engines.recorded import journal_folder
from ledger.events import DecisionMade, Event, ModelCalled
from ledger.store import EventStore
from tests.arena.run.test_resume_llm import environment
from tests.llm_server import HOLD, FakeLLM, Received

WORKERS = 2
BOUND = 120.0
"""Seconds past which a run that has not ended hangs: a bound on a hang, not a speed test."""


class Gate:
    """Answers the first question (HOLD) and holds the later ones until ``released``."""

    def __init__(self) -> None:
        self.held: list[str] = []
        self.answered: list[str] = []
        self.lock = threading.Lock()
        self.released = threading.Event()

    def __call__(self, request: Received) -> str:
        with self.lock:
            hold = bool(self.answered) and not self.released.is_set()
            (self.held if hold else self.answered).append(asked([request])[0])
        if hold:
            self.released.wait(BOUND)
        return HOLD


@pytest.fixture
def server() -> Iterator[tuple[FakeLLM, Gate]]:
    gate = Gate()
    with FakeLLM(gate) as fake:
        yield fake, gate
        gate.released.set()


def command(tape: Path, db: Path) -> list[str]:
    return [
        sys.executable, "-c", "from arena.cli import main; main()", "replay", "--tape",
        str(tape), "--db", str(db), "--starts", "2024-01-07..2024-01-14", "--universe", "3",
        "--marks", "weekly", "--agent", "llm=llm:test/model", "--jobs", str(WORKERS), "--json",
    ]  # fmt: skip


def asked(received: list[Received]) -> list[str]:
    return [json.dumps(r.body["messages"], sort_keys=True) for r in received]


def journaled(db: Path) -> list[list[Event]]:
    """Each journal's events (the run's cohorts a worker kept and the log does not hold)."""
    out = []
    for journal in sorted(journal_folder(db).glob("*.db")):
        with EventStore.open(journal, readonly=True) as store:
            out.append(list(store.read()))
    return out


def calls(log: list[Event]) -> list[ModelCalled]:
    return [e for e in log if isinstance(e, ModelCalled)]


def logged(db: Path) -> list[Event]:
    with EventStore.open(db, readonly=True) as store:
        return list(store.read())


def wait_for(predicate: object, what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} did not happen"
        time.sleep(0.01)


def stopped(
    tape: Path, db: Path, fake: FakeLLM, gate: Gate, ready: object, stop: object
) -> subprocess.CompletedProcess[str]:
    """The run, in a session of its own, until ``ready()`` once every worker waits on a
    held question; then ``stop(process)``."""
    process = subprocess.Popen(command(tape, db), env=environment(fake), text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)  # fmt: skip
    try:
        waiting = lambda: len(gate.held) == WORKERS and ready()  # type: ignore[operator]  # noqa: E731
        wait_for(waiting, "every worker waiting")
        sent = time.monotonic()
        stop(process)  # type: ignore[operator]
        out, err = process.communicate(timeout=BOUND)
        waited = time.monotonic() - sent
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    done = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    done.waited = waited  # type: ignore[attr-defined]
    return done


def uninterrupted(tape: Path, tmp_path: Path, fake: FakeLLM) -> list[str]:
    """What a run never interrupted asks (every answer HOLD, so a decision cut short and
    recorded a HOLD leaves the run as it was: the cut run and its resume ask the same)."""
    before = len(fake.received)
    whole = subprocess.run(command(tape, tmp_path / "whole.db"), env=environment(fake),
                           capture_output=True, text=True, timeout=BOUND)  # fmt: skip
    assert whole.returncode == 0, whole.stderr
    return asked(fake.received)[before:]


@pytest.mark.slow  # replays as processes, interrupted and resumed
def test_ctrl_c_stops_each_worker_keeping_its_calls_and_the_resume_asks_nothing_again(
    tmp_path: Path, server: tuple[FakeLLM, Gate], hand_tape_file: Path
) -> None:
    """Ctrl-C (the terminal's: the whole group) while both workers wait on a question: the run
    ends with 130 and the one line saying how to resume; each worker's journal ends with the
    decision cut, a HOLD whose call is kept as aborted; the same command asks only what was
    never asked, and the log's calls are every request the server saw, once each."""
    fake, gate = server
    db = tmp_path / "run.db"
    cut = stopped(hand_tape_file, db, fake, gate, lambda: True,
                  lambda p: os.killpg(p.pid, signal.SIGINT))  # fmt: skip
    assert cut.returncode == 130, cut.stderr
    assert "Traceback" not in cut.stderr, cut.stderr
    assert cut.stderr.strip().splitlines()[-1].startswith(f"interrupted: {db} holds the run")
    assert cut.waited < 2.0  # type: ignore[attr-defined]  # a bound: the stop, or the kill after
    journals = journaled(db)
    assert len(journals) == WORKERS
    for journal in journals:
        last = calls(journal)[-1].call
        assert last.error == "aborted: RunInterrupted: the run was interrupted (Ctrl-C)"
        decision = [e for e in journal if isinstance(e, DecisionMade)][-1]
        assert decision.action == "HOLD"
        assert decision.error == "RunInterrupted: the run was interrupted (Ctrl-C)"
    first = asked(fake.received)
    assert len(first) == 1 + WORKERS
    gate.released.set()

    resumed = subprocess.run(command(hand_tape_file, db), env=environment(fake),
                             capture_output=True, text=True, timeout=BOUND)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    second = asked(fake.received)[len(first) :]
    assert set(first).isdisjoint(second)  # the cut questions were not asked again
    log = logged(db)
    assert len(calls(log)) == len(first) + len(second)  # every request the server saw, once
    assert sum(c.call.error is not None for c in calls(log)) == WORKERS  # the two cut
    assert not journal_folder(db).exists()
    assert Counter(first + second) == Counter(uninterrupted(hand_tape_file, tmp_path, fake))


@pytest.mark.slow  # replays as processes, killed and resumed
def test_a_killed_driver_leaves_every_answer_in_the_journals_and_the_resume_asks_none_again(
    tmp_path: Path, server: tuple[FakeLLM, Gate], hand_tape_file: Path
) -> None:
    """The driver killed (SIGKILL: its workers die with it) once its first answer is in a
    journal and both workers wait on a question: the answer was journaled as its decision was
    made (with a model answering faster than ``--commit-every``, answers held in a worker's
    memory were lost, and asked again); the same command asks it never again, only the two
    questions never answered."""
    fake, gate = server
    db = tmp_path / "run.db"

    def answer_journaled() -> bool:
        return sum(len(calls(j)) for j in journaled(db)) == 1

    killed = stopped(hand_tape_file, db, fake, gate, answer_journaled, lambda p: p.kill())
    assert killed.returncode == -signal.SIGKILL
    first, answered = asked(fake.received), list(gate.answered)
    assert len(first) == 1 + WORKERS
    gate.released.set()

    resumed = subprocess.run(command(hand_tape_file, db), env=environment(fake),
                             capture_output=True, text=True, timeout=BOUND)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    second = asked(fake.received)[len(first) :]
    assert set(answered).isdisjoint(second)  # the answer given is not asked for again
    assert Counter(first) - Counter(answered) <= Counter(second)  # the unanswered ones are
    assert len(calls(logged(db))) == len(answered) + len(second)
    whole = uninterrupted(hand_tape_file, tmp_path, fake)
    assert Counter(answered + second) == Counter(whole)
