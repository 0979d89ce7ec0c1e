"""Event logs, and places to put them, made to hurt (issue 25): each case once gave a traceback,
changed a file it then refused, or hid why a write failed; now it is one ``Error:`` line and
the file is as it was."""

from __future__ import annotations

import hashlib
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Arena

SAMPLE_DIGEST = "c890b6c510ee6c3dffef419d83a2599cddc15f9af968a50396e0f063b89d7c3b"
SAMPLE_HEAD = "915:e2f24b05acfc8840668f0a969c61c7bd769a144796a12404a1ff852c726b468b"


def _one_error_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), output
    return lines[0]


def test_every_bit_flip_in_the_stored_schema_text_is_one_line(
    arena: Arena, weekly_log: Path, tmp_path: Path
) -> None:
    """SQLite keeps each table's, index's, view's and trigger's CREATE statement as text on the
    log's first page; a flipped bit there gave a UnicodeDecodeError traceback, or an error
    quoting the damaged text across lines. 120 seeded flips over that text, each read by
    ``verify`` and ``report``."""
    data = weekly_log.read_bytes()
    page = int.from_bytes(data[16:18], "big")
    schema = range(data.index(b"CREATE", 0, page), page)
    rng = random.Random(25)
    refused = 0
    for k in range(120):
        flipped = bytearray(data)
        flipped[rng.choice(schema)] ^= 1 << rng.randrange(8)
        db = tmp_path / f"flip{k}.db"
        db.write_bytes(flipped)
        for command in ("verify", "report"):
            result = arena(command, db)
            assert result.exit_code in (0, 1), result.output
            if result.exit_code == 1:
                assert _one_error_line(result.output).startswith(f"Error: {db}: ")
                refused += 1
    assert refused > 40  # most flips break a statement; a few fall in a name's case or a space


@pytest.mark.parametrize(
    "command", [("replay", "--db"), ("report",), ("verify",), ("step",), ("export", "--to", ".")]
)
def test_a_path_too_long_for_the_file_system_is_one_line(
    arena: Arena, tmp_path: Path, command: tuple[str, ...]
) -> None:
    db = tmp_path / ("a" * 5_000 + ".db")
    args = (*command, db) if command[-1] == "--db" else (command[0], db, *command[1:])
    result = arena(*args)
    assert result.exit_code == 1
    assert _one_error_line(result.output) == (
        f"Error: {db}: cannot use as an event log (File name too long)"
    )


def test_a_foreign_sqlite_file_is_refused_before_anything_in_it_changes(
    arena: Arena, tmp_path: Path
) -> None:
    """It was refused only after ``PRAGMA journal_mode = WAL`` had rewritten its header."""
    db = tmp_path / "photos.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE photos (name TEXT)")
        conn.execute("INSERT INTO photos VALUES ('cat.jpg')")
    conn.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    result = arena("replay", "--db", db)
    assert result.exit_code == 1
    assert _one_error_line(result.output) == (
        f"Error: {db}: not an arena event log (no meta/events tables)"
    )
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["photos.db"]  # no -wal, no -shm
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()


def _replay_within(db: Path, limit: int) -> subprocess.CompletedProcess[str]:
    """``arena replay --db DB`` in a process of its own whose files may not grow past
    ``limit`` bytes (``RLIMIT_FSIZE``, as a quota or a full disk would stop them)."""
    program = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
        "from arena.cli import main\n"
        f"sys.argv = ['arena', 'replay', '--db', {str(db)!r}]\n"
        "main()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("limit", [200_000, 800_000])
def test_a_full_disk_is_one_line_and_the_log_resumes_whole(
    arena: Arena, tmp_path: Path, limit: int
) -> None:
    """It read "cannot rollback - no transaction is active": SQLite had rolled the
    transaction back itself, and the ROLLBACK after it hid why. At 200 kB the first batch
    does not fit (nothing is kept); at 800 kB the events do and a snapshot does not. Either
    way a run with room resumes to the sample's digest and head."""
    db = tmp_path / "arena.db"
    done = _replay_within(db, limit)
    assert done.returncode == 1, done.stderr
    assert _one_error_line(done.stdout + done.stderr) == (
        f"Error: {db}: the disk is full or refused a write (disk I/O error): nothing of this "
        "write was kept, the log is intact up to its last whole write; free space and run "
        "again to resume"
    )
    result = arena("replay", "--db", db)
    assert result.exit_code == 0, result.output
    assert f"digest {SAMPLE_DIGEST}" in result.output
    assert f"head   {SAMPLE_HEAD}" in result.output
    assert arena("verify", db, "--head", SAMPLE_HEAD).exit_code == 0


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[" * 2_000 + "]" * 2_000, "maximum recursion depth exceeded"),
        ('{"head": "' + "1" * 10_000 + '"}', "longer than 4096 bytes"),
        ('{"head": 915}', None),
    ],
)
def test_a_hostile_head_file_is_one_line(
    arena: Arena, weekly_log: Path, tmp_path: Path, text: str, problem: str | None
) -> None:
    """The head recorded beside a log is read by every command: nested past the recursion
    limit it was a RecursionError traceback; it is one short line, so it is read capped."""
    db = tmp_path / "arena.db"
    db.write_bytes(weekly_log.read_bytes())
    db.with_name("arena.db.head").write_text(text)
    for command in ("verify", "report"):
        line = _one_error_line(arena(command, db).output)
        assert line.startswith(f"Error: {db}.head: not a head file")
        assert problem is None or problem in line
