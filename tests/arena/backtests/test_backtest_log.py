"""Where a backtest's log goes: kept where the user asked (``--db``, beside ``--report``), else
removed after the run, and the output says which (it once left 13 MB in the temp folder)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from arena.backtests.backtest import BacktestError, backtest_log
from tests.conftest import Arena

ONE = ("hold", "--universe", "3", "--starts", "2024-09-01..2024-09-01", "--against", "hold",
       "--jobs", "1")  # fmt: skip


def test_a_named_db_is_kept_as_given(tmp_path: Path) -> None:
    log = backtest_log(tmp_path / "mine.db", tmp_path / "report")
    assert (log.path, log.kept) == (tmp_path / "mine.db", True)
    assert log.note == f"log kept in {tmp_path / 'mine.db'}"
    assert not (tmp_path / "report").exists()  # the report's folder is made by the page


def test_with_a_report_the_log_goes_beside_it(tmp_path: Path) -> None:
    log = backtest_log(None, tmp_path / "out" / "report")
    assert (log.path, log.kept) == (tmp_path / "out" / "report" / "backtest.db", True)
    assert log.path.parent.is_dir()
    log.remove()  # a kept log is never removed
    assert log.path.parent.is_dir()


def test_a_report_folder_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(BacktestError, match=r"file/r: cannot write the report"):
        backtest_log(None, tmp_path / "file" / "r")


def test_otherwise_a_temporary_log_is_removed_with_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    log = backtest_log(None, None)
    assert not log.kept and log.path.parent.parent == tmp_path
    (log.path.parent / "backtest.db-wal").write_text("")
    log.remove()
    assert list(tmp_path.iterdir()) == []
    assert "removed after the run" in log.note


def test_the_command_leaves_nothing_in_the_temp_folder_and_says_so(
    arena: Arena, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = arena("backtest", *ONE)
    assert result.exit_code == 0, result.output
    assert "log removed after the run" in result.output
    assert list(tmp_path.iterdir()) == []


def test_the_command_keeps_the_log_beside_the_report(arena: Arena, tmp_path: Path) -> None:
    result = arena("backtest", *ONE, "--report", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "backtest.db").is_file()
    assert (tmp_path / "out" / "index.html").is_file()
    assert f"log kept in {tmp_path / 'out' / 'backtest.db'}" in result.output.replace("\n", "")
