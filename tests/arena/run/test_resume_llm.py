"""A slow LLM run commits its decisions as they happen, and the same command resumes a killed or
interrupted run without asking the model again for anything it already answered.

The run is ``arena replay`` in a child process on the hand tape of ``conftest.py`` (three
markets, weekly decisions), one ``llm`` agent asking the fake server of ``llm_server.py`` on
127.0.0.1, which counts the requests it receives and holds one of them unanswered until the
test has killed (or interrupted) the child.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from arena.run.runner import CohortRunner
from arena.run.settings import RunOptions, RunSettings
from ledger.events import DecisionMade, Event, ModelCalled
from ledger.store import EventStore
from replays.tape import Tape
from strategies.llm.connection import Connection
from tests.conftest import hand_config
from tests.llm_server import HOLD, FakeLLM, Received

MODEL = "test/model"
HELD = 3
"""The request held unanswered: the child is killed while it waits for it."""


class Gate:
    """Answers HOLD, except request number ``HELD`` of a run, held until ``release``."""

    def __init__(self) -> None:
        self.count = 0
        self.reached = threading.Event()
        self.released = threading.Event()
        self.holding = True

    def __call__(self, request: Received) -> str:
        self.count += 1
        if self.holding and self.count == HELD:
            self.reached.set()
            self.released.wait(60)
        return HOLD

    def release(self) -> None:
        self.holding = False
        self.released.set()


@pytest.fixture
def server() -> Iterator[tuple[FakeLLM, Gate]]:
    gate = Gate()
    with FakeLLM(gate) as fake:
        yield fake, gate
        gate.release()


def command(tape: Path, db: Path) -> list[str]:
    return [
        sys.executable, "-c", "from arena.cli import main; main()", "replay", "--tape",
        str(tape), "--db", str(db), "--start", "2024-01-07", "--universe", "3", "--marks",
        "weekly", "--agent", f"llm=llm:{MODEL}", "--jobs", "1", "--commit-every", "0", "--json",
    ]  # fmt: skip


def environment(fake: FakeLLM) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_LLM_")}
    return clean | {
        "ARENA_LLM_BASE_URL": fake.url,
        "ARENA_LLM_API_KEY_ENV": "",
        "ARENA_LLM_RETRIES": "0",
        "ARENA_LLM_BACKOFF": "0",
    }


def events(db: Path) -> list[Event]:
    with EventStore.open(db, readonly=True) as store:
        return list(store.read())


def without_latency(log: list[Event]) -> list[Event]:
    """The events with the latencies taken out (of each call, and their sum in its decision):
    the only fields two live runs against the same server may log differently."""
    out: list[Event] = []
    for e in log:
        if isinstance(e, ModelCalled):
            e = msgspec.structs.replace(e, call=msgspec.structs.replace(e.call, latency_ms=None))
        elif isinstance(e, DecisionMade):
            e = msgspec.structs.replace(e, latency_ms=None)
        out.append(e)
    return out


def asked(received: list[Received]) -> list[str]:
    return [json.dumps(r.body["messages"], sort_keys=True) for r in received]


def start_and_stop_at_the_held_request(
    tape: Path, db: Path, fake: FakeLLM, gate: Gate, how: signal.Signals
) -> subprocess.CompletedProcess[str]:
    """Run the replay until it waits for the held request, then send it ``how``."""
    child = subprocess.Popen(
        command(tape, db), env=environment(fake), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert gate.reached.wait(120), child.stderr.read() if child.stderr else ""
        sent = time.monotonic()
        child.send_signal(how)
        out, err = child.communicate(timeout=30)
        waited = time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    gate.release()
    done = subprocess.CompletedProcess(child.args, child.returncode, out, err)
    done.waited = waited  # type: ignore[attr-defined]
    return done


def killed_and_resumed(tmp_path: Path, server: tuple[FakeLLM, Gate], hand_tape_file: Path) -> Path:
    """Kill the run (SIGKILL) while its third question is out, resume it with the same command,
    and check what was asked: nothing answered is asked again, the unanswered one once, and
    the log equals an uninterrupted run's but for latencies. Returns the resumed log and the
    resumed command's output; the command is this module's ``command`` (a test may make it an
    isolated one)."""
    fake, gate = server
    db = tmp_path / "run.db"
    killed = start_and_stop_at_the_held_request(hand_tape_file, db, fake, gate, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL
    committed = events(db)
    assert sum(isinstance(e, ModelCalled) for e in committed) == HELD - 1
    assert sum(isinstance(e, DecisionMade) for e in committed) == HELD - 1
    first = asked(fake.received)
    assert len(first) == HELD

    resumed = subprocess.run(command(hand_tape_file, db), env=environment(fake),
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    second = asked(fake.received)[HELD:]
    assert set(first[: HELD - 1]).isdisjoint(second)  # answered once, never asked again
    assert second[0] == first[HELD - 1]  # the one never answered is asked again, once
    assert len(set(second)) == len(second)

    whole = tmp_path / "whole.db"
    again = subprocess.run(command(hand_tape_file, whole), env=environment(fake),
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert asked(fake.received)[HELD + len(second) :] == first[: HELD - 1] + second
    assert without_latency(events(db)) == without_latency(events(whole))
    return db, resumed.stdout


@pytest.mark.slow
def test_a_killed_llm_run_resumes_without_asking_again(
    tmp_path: Path, server: tuple[FakeLLM, Gate], hand_tape_file: Path
) -> None:
    """Killed (SIGKILL) while its third question is out: the two decisions before it are in
    the log, calls and all; the same command finishes the cohort, asking the model only what
    it never answered, and logs what an uninterrupted run logs."""
    fake, _ = server
    db, resumed = killed_and_resumed(tmp_path, server, hand_tape_file)

    from_itself = subprocess.run(
        command(hand_tape_file, tmp_path / "replayed.db"),
        env=environment(fake) | {"ARENA_LLM_MODE": "replay", "ARENA_LLM_CASSETTE": str(db)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert from_itself.returncode == 0, from_itself.stderr
    assert json.loads(from_itself.stdout)["digest"] == json.loads(resumed)["digest"]


@pytest.mark.slow
def test_ctrl_c_writes_the_cut_decision_and_says_how_to_resume(
    tmp_path: Path, server: tuple[FakeLLM, Gate], hand_tape_file: Path
) -> None:
    """Ctrl-C while the third question is out: within a second the run has committed every
    decision before it and the cut one (a HOLD with its call, cut short), says in one line how
    to resume, and the same command resumes it without sending anything it sent already."""
    fake, gate = server
    db = tmp_path / "run.db"
    stopped = start_and_stop_at_the_held_request(hand_tape_file, db, fake, gate, signal.SIGINT)
    assert stopped.returncode == 130
    assert stopped.waited < 1.0  # type: ignore[attr-defined]
    lines = stopped.stderr.strip().splitlines()
    assert lines[-1] == (
        f"interrupted: {db} holds the run up to the decision Ctrl-C cut short, kept as a HOLD "
        "if it asked a model (a run never interrupted may have traded there); the same "
        "command resumes it"
    )
    committed = events(db)
    calls = [e for e in committed if isinstance(e, ModelCalled)]
    assert len(calls) == HELD
    assert calls[-1].call.error is not None and calls[-1].call.error.startswith("aborted: ")
    cut = [e for e in committed if isinstance(e, DecisionMade)][-1]
    assert cut.action == "HOLD" and cut.error == "RunInterrupted: the run was interrupted (Ctrl-C)"

    first = asked(fake.received)
    resumed = subprocess.run(command(hand_tape_file, db), env=environment(fake),
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert set(first).isdisjoint(asked(fake.received)[HELD:])
    verified = subprocess.run(
        [sys.executable, "-c", "from arena.cli import main; main()", "verify", str(db)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_stored_prefix_is_answered_from_the_log_in_process(
    tmp_path: Path, hand_tape: Tape, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner itself, in this process: a log holding a whole run's first events up to its
    second decision's calls is completed asking only the questions after them."""
    for name in Connection.model_fields:
        monkeypatch.delenv(f"ARENA_LLM_{name.upper()}", raising=False)
    config = hand_config({"llm": f"llm:{MODEL}"})
    with FakeLLM() as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        monkeypatch.setenv("ARENA_LLM_API_KEY_ENV", "")
        with EventStore.open(tmp_path / "whole.db") as store:
            CohortRunner(hand_tape, config).run(store)
            whole = list(store.read())
        first = asked(fake.received)
        calls = [k for k, e in enumerate(whole) if isinstance(e, ModelCalled)]
        cut = calls[1] + 1  # through the second decision's call
        with EventStore.open(tmp_path / "cut.db") as store:
            store.append(whole[0].cohort, whole[:cut], expected_version=0)
            CohortRunner(hand_tape, config).run(store)
            resumed = list(store.read())
        assert asked(fake.received)[len(first) :] == first[2:]
    # the prefix was regenerated to the byte (latencies and all: the stored answers were
    # served) or the write would have stopped; the rest is what the whole run asked and logged
    assert without_latency(resumed) == without_latency(whole)


def test_each_decision_that_asked_a_model_is_committed_as_it_is_made(
    tmp_path: Path, hand_tape: Tape, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In this process, with ``commit_every`` an hour: by the time the agent asks its next
    question, the log holds the last one's call (a SQLite commit against the model's seconds),
    so a run killed between two decisions has every answer it paid for."""
    for name in Connection.model_fields:
        monkeypatch.delenv(f"ARENA_LLM_{name.upper()}", raising=False)
    db = tmp_path / "run.db"
    committed: list[int] = []

    def count_then_answer(_: Received) -> str:
        with EventStore.open(db, readonly=True) as store:
            committed.append(sum(isinstance(e, ModelCalled) for e in store.read()))
        return HOLD

    settings = RunSettings(cohort=hand_config({"llm": f"llm:{MODEL}"}),
                           options=RunOptions(commit_every=3600))  # fmt: skip
    with FakeLLM(count_then_answer) as fake:
        monkeypatch.setenv("ARENA_LLM_BASE_URL", fake.url)
        monkeypatch.setenv("ARENA_LLM_API_KEY_ENV", "")
        with EventStore.open(db) as store:
            CohortRunner(hand_tape, settings).run(store)
    assert committed == [0, 1, 2]
