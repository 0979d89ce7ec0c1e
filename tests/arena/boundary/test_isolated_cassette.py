"""A cassette under ``--isolate`` (issue #24): an agent's confined worker may open no file but
its libraries' and its plugin's, so the run reads a replay's cassette and hands the worker its
answers, and writes a recording's cassette from the calls each decision brings back.

Through the real CLI, in child processes: two agents (the ``llm`` trader and a ``sign`` trader
over the ``llm`` forecaster, whose decisions ask a question per market, at once) against the
canned server of ``llm_server.py``, which fails one request with a 500 (the client asks again:
one question of two attempts). Recorded in process and under ``--isolate``, each cassette is
replayed both ways with the server gone and a socket that only listens on its port (the same
URL: an isolated run's opening notes the one port its workers may reach): every replay logs
what its recording logged (an isolated run's log differs by that note of the sandbox alone, so
its digest differs; each digest is its recording's), and nothing connects.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from ledger.events import Event, ModelCalled
from tests.arena.boundary.test_isolation import without_isolation
from tests.arena.run.test_resume_llm import MODEL, command, environment, events
from tests.llm_server import HOLD, FakeLLM, Received, Reply

FORECASTER = "test/forecaster"


class Canned:
    """HOLD to the trader, 0.8 to every forecast, and a 500 to the second request of a run
    (``count`` set to 0 between runs)."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def __call__(self, request: Received) -> str | Reply:
        with self.lock:
            self.count += 1
            if self.count == 2:
                return Reply(status=500)
        return '{"p_yes": 0.8}' if request.body.get("model") == FORECASTER else HOLD


def replayed(tape: Path, db: Path, env: dict[str, str], *extra: str) -> tuple[str, list[Event]]:
    """``arena replay`` of the two agents into ``db``: its digest and its log."""
    args = [*command(tape, db), "--agent", f"edge=sign?forecaster=llm:{FORECASTER}", *extra]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["digest"], events(db)


@pytest.mark.slow  # six replays in child processes, three with a worker per agent
def test_a_cassette_recorded_or_replayed_under_isolate_logs_what_it_does_in_process(
    tmp_path: Path, hand_tape_file: Path
) -> None:
    both = {"in process": (), "isolated": ("--isolate",)}
    recorded: dict[str, tuple[str, list[Event]]] = {}
    canned = Canned()
    with FakeLLM(canned) as fake:
        live = environment(fake) | {"ARENA_LLM_RETRIES": "1"}
        for how, extra in both.items():
            canned.count = 0
            cassette = tmp_path / f"{how}.jsonl"
            env = live | {"ARENA_LLM_MODE": "record", "ARENA_LLM_CASSETTE": str(cassette)}
            recorded[how] = replayed(hand_tape_file, tmp_path / f"{how}.db", env, *extra)
        asked = len(fake.received)
        port = int(fake.url.rsplit(":", 1)[1].split("/")[0])
    for how, (_, log) in recorded.items():
        calls = [e.call for e in log if isinstance(e, ModelCalled)]
        assert {c.model for c in calls} == {MODEL, FORECASTER}
        assert [c.status for c in calls if c.attempt == 2] == [200]  # asked again after the 500
        lines = (tmp_path / f"{how}.jsonl").read_text().splitlines()
        assert len(lines) == sum(c.attempt == 1 for c in calls)  # a line a question
    assert asked == sum(isinstance(e, ModelCalled) for _, log in recorded.values() for e in log)

    with socket.socket() as nobody:  # the model's URL: no server behind it, and never reached
        nobody.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the server's, just shut
        nobody.bind(("127.0.0.1", port))
        nobody.listen()
        nobody.setblocking(False)
        offline = live | {"ARENA_LLM_TIMEOUT": "5"}
        for made, (digest, log) in recorded.items():
            env = offline | {"ARENA_LLM_MODE": "replay",
                             "ARENA_LLM_CASSETTE": str(tmp_path / f"{made}.jsonl")}  # fmt: skip
            for how, extra in both.items():
                db = tmp_path / f"{made} replayed {how}.db"
                again, replay_log = replayed(hand_tape_file, db, env, *extra)
                assert without_isolation(replay_log) == without_isolation(log), (made, how)
                assert (again == digest) == (how == made), (made, how)
        with pytest.raises(BlockingIOError):
            nobody.accept()


@pytest.mark.slow  # a worker process checks the spec
def test_a_broken_cassette_is_the_same_one_line_error_under_isolate(
    tmp_path: Path, hand_tape_file: Path
) -> None:
    """The run reads the cassette for its workers, and words what is wrong with it as an agent
    built in process does (before, the worker's read was refused: a PermissionError)."""
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"request": "k"}\n')
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_LLM_")}
    env = clean | {"ARENA_LLM_MODE": "replay", "ARENA_LLM_CASSETTE": str(broken)}
    said = []
    for extra in ((), ("--isolate",)):
        args = [*command(hand_tape_file, tmp_path / f"run{len(extra)}.db"), *extra]
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 1
        said.append(done.stderr)
    assert said[0] == said[1] == f"Error: llm: cassette {broken}: line 1 is not a recorded answer\n"
