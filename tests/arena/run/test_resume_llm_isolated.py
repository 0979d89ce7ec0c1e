"""A killed ``--isolate`` LLM run resumes without asking the model again for anything its log
holds: the runner sends each agent's stored calls to its worker with the setup, and the worker
serves them (``strategies.llm.resume.answering``) as the runner does in process.

The run is ``tests/arena/run/test_resume_llm.py``'s, under ``--isolate``: ``arena replay`` in a
child process, one ``llm`` agent asking the counting server of ``llm_server.py`` (the only
port its confined worker may reach is the one ``ARENA_LLM_BASE_URL`` names).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ledger.events import DecisionMade, ModelCalled
from tests.arena.run.test_resume_llm import (
    MODEL,
    Gate,
    command,
    environment,
    events,
    killed_and_resumed,
    server,  # noqa: F401 (the fixture)
)
from tests.llm_server import FakeLLM


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    """``command`` with ``--isolate``."""
    import tests.arena.run.test_resume_llm as plain

    base = plain.command
    monkeypatch.setattr(plain, "command", lambda tape, db: [*base(tape, db), "--isolate"])


@pytest.mark.slow
def test_a_killed_isolated_llm_run_resumes_without_asking_again(
    tmp_path: Path,
    server: tuple[FakeLLM, Gate],  # noqa: F811
    hand_tape_file: Path,
    isolated: None,
) -> None:
    killed_and_resumed(tmp_path, server, hand_tape_file)


SWALLOWS = """
import time

from strategies.api import Decision, Strategy
from strategies.loader import build_strategy


class Swallows(Strategy):
    \"\"\"Asks the model as the llm agent does, then swallows its time limit for ever.\"\"\"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.inner = build_strategy("llm:test/model")

    def setup(self, context):
        self.inner.setup(context)

    def decide(self, view):
        self.inner.decide(view)
        while True:
            try:
                time.sleep(0.01)
            except BaseException:
                pass
"""


@pytest.mark.slow  # each decision waits out its limit and the driver's grace
def test_a_killed_isolated_worker_keeps_its_decisions_calls(
    tmp_path: Path, hand_tape_file: Path
) -> None:
    """A worker whose plugin swallows the time limit is killed 2 s past it; before the kill the
    driver asks the worker's call-log thread for the decision so far, so every request the
    server answered is a ModelCalled of the log (the decision a HOLD naming the timeout)."""
    folder = tmp_path / "plugin"
    folder.mkdir()
    (folder / "swallows.py").write_text(SWALLOWS)
    with FakeLLM() as fake:
        db = tmp_path / "run.db"
        args = command(hand_tape_file, db)
        at = args.index(f"llm=llm:{MODEL}")
        args[at] = f"s={folder / 'swallows.py'}:Swallows"
        done = subprocess.run([*args, "--isolate", "--timeout", "1"], env=environment(fake),
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        sent = len(fake.received)
    log = events(db)
    calls = [e for e in log if isinstance(e, ModelCalled)]
    decisions = [e for e in log if isinstance(e, DecisionMade)]
    assert sent == len(decisions) > 0
    assert len(calls) == sent
    assert all(d.action == "HOLD" and d.error for d in decisions)
    assert all(c.call.answer is not None for c in calls)  # answered, then marked cut
    assert all(c.call.error and c.call.error.startswith("aborted: ") for c in calls)
