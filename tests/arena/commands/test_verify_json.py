"""``arena verify DB --json`` answers in JSON whatever goes wrong: a log that will not open, or
a tape or book file that will not load, is ``{"ok": false, "error": ...}`` on stdout with exit
status 1, as an altered log is (with its ``first_bad_seq``), never the text line a script
cannot parse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Arena


def failure(arena: Arena, *args: object) -> dict[str, object]:
    result = arena("verify", *args, "--json")
    assert result.exit_code == 1, result.output
    answer: dict[str, object] = json.loads(result.stdout)
    return answer


def test_a_file_that_is_no_log_is_a_json_error(arena: Arena, tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all, just bytes " * 100)
    assert failure(arena, junk) == {
        "ok": False, "error": f"{junk}: not an arena event log (not a SQLite database)",
    }  # fmt: skip
    assert failure(arena, tmp_path / "none.db") == {
        "ok": False, "error": f"{tmp_path / 'none.db'}: no such event log",
    }  # fmt: skip


@pytest.mark.parametrize("option", ["--tape", "--books"])
def test_a_tape_or_books_that_will_not_load_is_a_json_error(
    arena: Arena, tmp_path: Path, option: str
) -> None:
    db = tmp_path / "sample.db"
    assert arena("replay", "--tape", "sample", "--db", db).exit_code == 0
    missing = tmp_path / "missing.file"
    tape = ("--tape", "sample") if option == "--books" else ()
    answer = failure(arena, db, *tape, option, missing)
    assert answer["ok"] is False and "first_bad_seq" not in answer
    assert str(answer["error"]).startswith(f"{missing}: ")
