"""``report``, ``step`` and ``export`` check what they read: a tampered log gets one line, never
a traceback and never changed figures without a word.

The two edits from the issue: a fill whose amount was doubled, and a deleted ``MarketListed``
(which used to crash the report with ``KeyError``). Each is tried as a plain edit (the chain
breaks at the row) and re-chained (the chain is whole; the facts no longer fold).
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import Result

from tests import conftest
from tests.conftest import Arena

READS = {
    "report": ["report", "{db}"],
    "step": ["step", "{db}", "--no-input", "--json"],
    "export": ["export", "{db}", "--to", "{out}"],
}


def _args(read: str, db: Path) -> list[str]:
    return [a.format(db=db, out=db.parent / "out") for a in READS[read]]


def _one_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


@pytest.fixture
def log(weekly_log: Path, tmp_path: Path) -> Path:
    db = tmp_path / "arena.db"
    shutil.copy(weekly_log, db)
    return db


def _edit(db: Path, sql: str, *, rechain: bool, snapshots: bool = False) -> int:
    """Apply an edit with the triggers dropped; return the first seq it touched. ``rechain``
    then renumbers seqs and versions and recomputes every hash, as a careful forger would."""
    conn = sqlite3.connect(db, isolation_level=None)
    for table in ("events", "snapshots"):
        for verb in ("update", "delete"):
            conn.execute(f"DROP TRIGGER IF EXISTS {table}_no_{verb}")
    if not snapshots:
        conn.execute("DROP TABLE snapshots")
    first = conn.execute(sql).fetchone()[0]
    if rechain:
        conftest.rechain(conn)
    conn.close()
    return int(first)


DOUBLE_FIRST_FILL = """
UPDATE events SET payload = json_set(payload, '$.amount', 2 * (payload ->> '$.amount'))
WHERE seq = (SELECT min(seq) FROM events_view WHERE type = 'OrderFilled') RETURNING seq
"""
DELETE_A_TRADED_MARKET = """
DELETE FROM events WHERE seq = (
  SELECT l.seq FROM events_view l JOIN events_view f ON f.type = 'OrderFilled'
   AND l.type = 'MarketListed' AND f.stream = l.stream
   AND f.payload ->> '$.market' = l.payload ->> '$.market' ORDER BY f.seq LIMIT 1
) RETURNING seq
"""


@pytest.mark.parametrize("read", list(READS))
def test_a_doubled_fill_amount_is_named(arena: Arena, log: Path, read: str) -> None:
    seq = _edit(log, DOUBLE_FIRST_FILL, rechain=False)
    assert f"event {seq} was altered (hash mismatch)" in _one_line(arena(*_args(read, log)))


@pytest.mark.parametrize("read", list(READS))
def test_a_deleted_market_listing_is_named(arena: Arena, log: Path, read: str) -> None:
    seq = _edit(log, DELETE_A_TRADED_MARKET, rechain=False)
    assert f"event {seq + 1} " in _one_line(arena(*_args(read, log)))


@pytest.mark.parametrize("read", list(READS))
def test_a_rechained_deleted_listing_does_not_fold_and_says_so(
    arena: Arena, log: Path, read: str
) -> None:
    _edit(log, DELETE_A_TRADED_MARKET, rechain=True)
    message = _one_line(arena(*_args(read, log)))
    assert "does not fold" in message and "KeyError" not in message


def test_a_report_from_the_closing_snapshot_keeps_the_runs_figures(arena: Arena, log: Path) -> None:
    """An edit before a closing snapshot cannot change the report read from that snapshot
    (the state the run recorded, anchored by its close digest); ``verify`` names the edit."""
    before = json.loads(arena("report", log, "--json").stdout)
    seq = _edit(log, DOUBLE_FIRST_FILL, rechain=False, snapshots=True)
    after = arena("report", log, "--json")
    assert after.exit_code == 0 and json.loads(after.stdout) == before
    assert f"event {seq} was altered" in _one_line(arena("verify", log))


def test_a_cohort_cut_after_its_opening_names_the_markets_it_chose(arena: Arena, log: Path) -> None:
    """A replay killed right after it opened a cohort: the report said '0 markets chosen'."""
    chosen = arena("report", log, "--all").output
    listed = _edit(log, "SELECT 1", rechain=False)  # drops the snapshots only
    conn = sqlite3.connect(log, isolation_level=None)
    conn.execute("DELETE FROM events WHERE seq > 1")
    conn.close()
    said = arena("report", log).output
    assert listed == 1 and "still open" in said
    counted = [re.search(r"Cohort \S+ — start \S+, (\d+) markets", t) for t in (chosen, said)]
    assert [m.group(1) for m in counted if m] == ["6", "6"]
