"""``arena export`` on a disk that fills up: one line, and no file left half written.

Before (issue 25), a full disk ended an export with SQLite's "cannot rollback - no transaction
is active" and left a partial ``fills.csv`` beside the complete ones, indistinguishable from
them. Now every file is written beside its name and moved over it when whole.
"""

from __future__ import annotations

import csv
import errno
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Arena


@pytest.fixture
def log(weekly_log: Path, tmp_path: Path) -> Path:
    db = tmp_path / "arena.db"
    shutil.copy(weekly_log, db)
    return db


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_csv_the_disk_cannot_hold_is_not_left_half_written(
    arena: Arena, log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = log.parent / "out"
    assert arena("export", log, "--to", out).exit_code == 0
    before = _files(out)
    real = csv.writer

    class Filling:
        """A CSV writer on a disk with room for the header and a few rows of fills."""

        def __init__(self, fh: Any) -> None:
            self.out, self.fh = real(fh), fh

        def writerow(self, row: Any) -> None:
            self.out.writerow(row)

        def writerows(self, rows: Any) -> None:
            for k, row in enumerate(rows):
                if k == 5 and "fills.csv" in self.fh.name:
                    raise OSError(errno.ENOSPC, "No space left on device")
                self.out.writerow(row)

    monkeypatch.setattr("arena.reports.export.csv.writer", Filling)
    result = arena("export", log, "--to", out)
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"Error: {out}: cannot write the export: No space left on device"
    ]
    assert _files(out) == before  # the earlier export's files, whole; nothing partial beside


def test_tables_db_on_a_full_disk_is_one_line_and_not_left_behind(log: Path) -> None:
    """A real limit on the size of a file (``RLIMIT_FSIZE``, as a quota or a full disk would
    set it), in a process of its own: the CSV files fit, SQLite's ``tables.db`` does not."""
    out = log.parent / "out"
    limit = 60_000  # above SQLite's 32 KiB shared-memory file, below tables.db
    program = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
        "from arena.cli import cli\n"
        f"sys.argv = ['arena', 'export', {str(log)!r}, '--to', {str(out)!r}]\n"
        "cli()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1, done.stderr
    [line] = (done.stdout + done.stderr).strip().splitlines()
    assert line.startswith(f"Error: {out}: cannot write the export: ")
    assert sorted(p.name for p in out.iterdir()) == [
        "beliefs.csv", "brier.csv", "decisions.csv", "fills.csv", "positions.csv",
        "predictions.csv",
    ]  # fmt: skip
