"""What a plugin prints never mixes with a command's result: ``--json`` stays parseable.

The plugin prints when it is imported and at every decision; its words must reach stderr and
stdout must be exactly the JSON the command made. Workers (``--isolate``, the local pool) write
to file descriptors of their own, so one test runs the real console script in a process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Arena

CHATTY = """
import pydantic
from strategies.api import Decision, Strategy

print("chatty imported")


class Settings(pydantic.BaseModel):
    n: int = 0


class Chatty(Strategy):
    Settings = Settings

    def decide(self, view):
        print(f"chatty decides at {view.ts}")
        return Decision.hold("said something")
"""

ONE_WEEK = ("--universe", "2", "--starts", "2024-09-01..2024-09-01", "--jobs", "1")


@pytest.fixture
def chatty(tmp_path: Path) -> str:
    (tmp_path / "chatty.py").write_text(CHATTY)
    return f"{tmp_path / 'chatty.py'}:Chatty"


@pytest.mark.parametrize(
    "command",
    [
        ("replay", "--agent", "c={plugin}"),
        ("backtest", "{plugin}", "--against", "hold"),
        ("sweep", "{plugin}", "--grid", "n=1,2", "--against", "hold"),
    ],
    ids=["replay", "backtest", "sweep"],
)
def test_json_on_stdout_and_the_plugins_words_on_stderr(
    arena: Arena, tmp_path: Path, chatty: str, command: tuple[str, ...]
) -> None:
    args = [part.format(plugin=chatty) for part in command]
    result = arena(*args, *ONE_WEEK, "--db", tmp_path / "run.db", "--json")
    assert result.exit_code == 0, result.output
    assert "digest" in json.loads(result.stdout)
    assert "chatty imported" in result.stderr
    assert "chatty decides at 1725148800" in result.stderr


@pytest.mark.slow  # a console script and an isolated worker, each a fresh interpreter
def test_an_isolated_workers_words_reach_stderr_too(tmp_path: Path, chatty: str) -> None:
    arena = Path(sys.executable).parent / "arena"
    done = subprocess.run(
        [str(arena), "replay", "--agent", f"c={chatty}", "--isolate", *ONE_WEEK,
         "--db", str(tmp_path / "run.db"), "--json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "digest" in json.loads(done.stdout)
    assert "chatty decides at 1725148800" in done.stderr
