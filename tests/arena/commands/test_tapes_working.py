"""``arena tapes import`` says what it is doing on a terminal (a spinner on stderr: reading
what, writing where), and nothing of it when piped or under ``--json``, where the output is the
summary alone."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

import arena.commands.tapes as tapes
from tests.conftest import Arena
from tests.replays.importers.test_columns import write

ARENA = str(Path(sys.executable).with_name("arena"))


def columns(tmp_path: Path, out: Path) -> list[str]:
    """A plain-columns import of a small archive written for the test (no data beside it)."""
    prices, markets = write(tmp_path)
    return ["tapes", "import", "columns", "--prices", str(prices), "--markets", str(markets),
            "--out", str(out)]  # fmt: skip


@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_a_piped_import_shows_no_status(tmp_path: Path, json_flag: tuple[str, ...]) -> None:
    out = tmp_path / "e.tape"
    done = subprocess.run([ARENA, *columns(tmp_path, out), *json_flag], capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "reading" not in done.stdout and "writing" not in done.stdout
    assert out.exists()


def test_on_a_terminal_the_import_says_what_it_reads_and_writes(
    arena: Arena, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn = io.StringIO()
    terminal = Console(file=drawn, force_terminal=True, width=200)
    monkeypatch.setattr(tapes, "on_a_terminal", lambda as_json=False: not as_json)
    monkeypatch.setattr(tapes, "make_console", lambda stderr=False: terminal)
    out = tmp_path / "e.tape"
    assert arena(*columns(tmp_path, out)).exit_code == 0
    assert f"reading {tmp_path / 'prices.csv'} and {tmp_path / 'markets.csv'} …" in (
        drawn.getvalue()
    )
    assert f"writing {out} …" in drawn.getvalue()
    drawn.truncate(0)
    assert arena(*columns(tmp_path, out), "--json").exit_code == 0
    assert drawn.getvalue() == ""  # --json: the summary alone, even on a terminal
