"""``arena export`` and ``arena.open_run``: the tables say what the log and the report say.

The weekly log of the fixtures has a favourite (which states the price it pays as its belief)
and a coin-flipper (which states nothing), so every table has rows and ``beliefs`` is a strict
subset of ``brier``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import sqlite3
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from arena.reports.model import report_data
from arena.reports.notebook import open_run
from ledger.rebuild import rebuild
from ledger.store import EventStore
from tests.conftest import Arena

TABLES = ("fills", "decisions", "positions", "brier", "beliefs", "predictions")


@pytest.fixture(scope="module")
def exported(arena: Arena, weekly_log: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export")
    result = arena("export", weekly_log, "--to", out, "--parquet", "--json")
    assert result.exit_code == 0, result.output
    return out


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _sql(db: Path, query: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(query).fetchall()


def test_fills_and_decisions_are_the_logs_events(weekly_log: Path, exported: Path) -> None:
    fills = _csv(exported / "fills.csv")
    (count, paid), = _sql(weekly_log, "SELECT count(*), sum(payload ->> '$.amount') FROM"
                          " events_view WHERE type = 'OrderFilled'")  # fmt: skip
    assert len(fills) == count and math.isclose(sum(float(f["amount"]) for f in fills), paid)
    seqs = [int(f["seq"]) for f in fills]
    assert seqs == sorted(seqs)  # log order within each cohort, cohorts in stream order
    (decided,) = _sql(weekly_log, "SELECT count(*) FROM events_view WHERE type = 'DecisionMade'")
    assert len(_csv(exported / "decisions.csv")) == decided[0]


def test_brier_rows_and_positions_agree_with_the_report(weekly_log: Path, exported: Path) -> None:
    with EventStore.open(weekly_log, readonly=True) as store:
        report = report_data(rebuild(store))
    brier = _csv(exported / "brier.csv")
    for cohort in report["cohorts"]:
        for agent in cohort["agents"]:
            mine = (cohort["cohort"], agent["agent"])
            rows = [float(r["brier"]) for r in brier if (r["cohort"], r["agent"]) == mine]
            assert len(rows) == agent["n_resolved"]
            if rows:
                assert math.isclose(sum(rows) / len(rows), agent["brier"])
    positions = _csv(exported / "positions.csv")
    assert len(positions) == sum(len(c["positions"]) for c in report["cohorts"])
    beliefs = _csv(exported / "beliefs.csv")
    assert beliefs and {r["agent"] for r in beliefs} == {"fav"}
    assert len(beliefs) == sum(1 for r in brier if r["belief"] != "")


def test_predictions_are_scored_by_arena_score(arena: Arena, exported: Path) -> None:
    rows = _csv(exported / "predictions.csv")
    result = arena("score", exported / "predictions.csv", "--group-cols", "agent", "--json")
    assert result.exit_code == 0, result.output
    scored = json.loads(result.output)
    by_hand = sum((float(r["pred_prob"]) - int(r["y"])) ** 2 for r in rows) / len(rows)
    assert scored["n"] == len(rows) and math.isclose(scored["brier"], by_hand)


def test_parquet_and_sqlite_hold_the_same_rows_as_the_csv(exported: Path) -> None:
    for name in TABLES:
        rows = _csv(exported / f"{name}.csv")
        header = (exported / f"{name}.csv").read_text().splitlines()[0].split(",")
        table = pq.read_table(exported / f"{name}.parquet")
        assert table.num_rows == len(rows) and table.column_names == header
        (count,) = _sql(exported / "tables.db", f"SELECT count(*) FROM {name}")[0]
        assert count == len(rows)
    amounts = pq.read_table(exported / "fills.parquet").column("amount").to_pylist()
    assert amounts == [float(r["amount"]) for r in _csv(exported / "fills.csv")]  # exact


def test_parquet_without_pyarrow_is_one_clear_line(
    arena: Arena, weekly_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # as if it were not installed
    result = arena("export", weekly_log, "--to", tmp_path, "--parquet")
    assert result.exit_code == 1
    assert result.output == (
        "Error: this needs pyarrow, which is not installed (pip install 'arena[parquet]')\n"
    )


def test_a_folder_that_cannot_be_written_is_named(
    arena: Arena, weekly_log: Path, tmp_path: Path
) -> None:
    """It said only "[Errno 20] Not a directory: '…'", without what was being done."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = arena("export", weekly_log, "--to", blocker / "out")
    assert result.exit_code == 1
    assert result.output == f"Error: {blocker / 'out'}: cannot write the export: Not a directory\n"


def test_an_export_never_writes_over_the_log(
    arena: Arena, weekly_log: Path, tmp_path: Path
) -> None:
    """A log named tables.db exported into its own folder was replaced by the export's tables."""
    db = tmp_path / "tables.db"
    db.write_bytes(weekly_log.read_bytes())
    result = arena("export", db, "--to", tmp_path)
    assert result.exit_code == 1
    assert result.output == f"Error: {db} is the log; export it to another folder than {tmp_path}\n"
    assert db.read_bytes() == weekly_log.read_bytes()
    assert arena("export", db, "--to", tmp_path / "out").exit_code == 0


def test_open_run_gives_numpy_and_arrow(weekly_log: Path, exported: Path) -> None:
    run = open_run(weekly_log)
    fills = run.fills.to_numpy()
    assert fills["amount"].dtype.kind == "f" and fills["seq"].dtype.kind == "i"
    assert len(run.fills) == len(_csv(exported / "fills.csv"))
    assert run.brier.to_arrow().num_rows == len(run.brier)
    assert run.report() == report_data(open_run(weekly_log).__dict__["_tables"].loaded.ledger)
    assert run.note is None


def test_the_readme_notebook_example_runs(
    weekly_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    readme = (Path(__file__).parents[3] / "docs" / "reports.md").read_text()
    found = re.search(r"<!-- notebook:start -->\s*```python\n(.*?)```", readme, re.S)
    assert found, "docs/reports.md lost its notebook example"
    code = found.group(1)
    assert len([line for line in code.splitlines() if line.strip()]) == 5
    shutil.copy(weekly_log, tmp_path / "arena.db")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/reports.md", "exec"), {})
    out = capsys.readouterr().out
    n_fills = len(open_run(weekly_log).fills)
    assert out.startswith(f"{n_fills} fills, $") and "brier_mean" in out
    assert os.path.exists(tmp_path / "arena.db")
