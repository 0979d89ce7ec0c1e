"""``arena tapes import books``, ``tapes show`` and ``tapes validate`` on book files, the
``sample-books`` sample replayed, and ``arena bench books`` at toy sizes (figures' shapes, never
their speed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from replays.bookfile import load_books, save_books
from replays.books import Books
from replays.samples import SAMPLE_BOOKS_HASH, SAMPLE_BOOKS_TAPE_HASH, books_file
from replays.validate_books import BookToken, Columns
from tests.arena.commands.test_tapes_cli import assert_one_line_error
from tests.conftest import Arena

SHARED = Path(__file__).resolve().parents[4] / "shared" / "data" / "polymarket" / "books_btc15m"
T0 = 1_790_587_077_000
HEAD = "market,outcome,ts,bid_px,bid_sz,ask_px,ask_sz"


def csv_books(folder: Path) -> Path:
    path = folder / "in.csv"
    rows = [
        f'm,Yes,{T0},"[0.48, 0.47]","[10, 5]","[0.5, 0.51]","[3, 7]"',
        f'm,No,{T0},"[0.5, 0.49]","[3, 7]","[0.52, 0.53]","[10, 5]"',
        f"m,Yes,{T0 + 30_000},[0.49],[1],[0.49],[2]",  # locked, after a 30 s gap
        f"m,Yes,{T0 + 30_000},[0.49],[1],[0.49],[2]",  # the same again: collapsed
    ]
    path.write_text("\n".join((HEAD, *rows)) + "\n")
    return path


def test_import_books_from_columns_writes_a_books_file_and_summarises(
    arena: Arena, tmp_path: Path
) -> None:
    out = tmp_path / "x.books"
    summary = arena.json("tapes", "import", "books", "--format", "columns", csv_books(tmp_path),
                         "--out", out)  # fmt: skip
    assert (summary["markets"], summary["tokens"], summary["snapshots"]) == (1, 2, 3)
    assert (summary["rows"], summary["collapsed"], summary["replaced"]) == (4, 1, 0)
    assert summary["hash"] == load_books(out, verify=True).hash
    result = arena("tapes", "import", "books", "--format", "columns", csv_books(tmp_path),
                   "--out", tmp_path / "x.tape")  # fmt: skip
    assert_one_line_error(result, "a book file's name ends in .books")
    result = arena("tapes", "import", "books", "--format", "columns", csv_books(tmp_path),
                   "--out", out, "--tape", tmp_path / "t.tape")  # fmt: skip
    assert_one_line_error(result, "--tape and --markets are for --format resolvedkit")


@pytest.mark.skipif(not SHARED.exists(), reason="shared data not present")
def test_the_bundled_books_import_in_one_command(arena: Arena, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    out, tape = tmp_path / "btc.books", tmp_path / "btc.tape"
    summary = arena.json("tapes", "import", "books", SHARED, "--out", out, "--tape", tape)
    assert (
        summary["hash"] == SAMPLE_BOOKS_HASH and summary["tape"]["hash"] == SAMPLE_BOOKS_TAPE_HASH
    )
    assert (summary["markets"], summary["tokens"], summary["snapshots"]) == (12, 24, 25_256)
    assert (
        summary["attribution"] == "Order-book sample from resolvedkit (resolvedmarkets), CC BY 4.0."
    )
    assert summary["tape"]["markets"] == 12 and summary["tape"]["resolved"] == 12
    result = arena("tapes", "import", "books", SHARED, "--out", out)
    assert result.exit_code == 0 and "CC BY 4.0" in result.output


def test_show_books_gives_spread_and_depth_over_time(arena: Arena, tmp_path: Path) -> None:
    shown = arena.json("tapes", "show", "sample-books", "--books", "--buckets", "5")
    assert shown["hash"] == SAMPLE_BOOKS_HASH and shown["snapshots"] == 25_256
    rows = shown["token_rows"]
    assert len(rows) == 24 and {r["outcome"] for r in rows} == {"Up", "Down"}
    first = rows[0]
    assert len(first["series"]) == 5
    assert sum(p["snapshots"] for p in first["series"]) == first["snapshots"]
    assert first["spread"] == pytest.approx(0.01) and len(first["spread_trend"]) == 5
    out = tmp_path / "x.books"
    arena.json("tapes", "import", "books", "--format", "columns", csv_books(tmp_path), "--out", out)
    shown = arena.json("tapes", "show", out, "--market", "m", "--buckets", "2")  # a .books file
    yes = next(r for r in shown["token_rows"] if r["outcome"] == "Yes")
    assert yes["snapshots"] == 2 and yes["spread"] == pytest.approx(0.01)  # locked: 0, first: 2¢
    assert yes["bid_depth"] == pytest.approx((0.48 * 10 + 0.47 * 5 + 0.49) / 2)
    result = arena("tapes", "show", out)
    assert result.exit_code == 0 and "spread¢" in result.output and "m" in result.output
    result = arena("tapes", "show", out, "--market", "nope")
    assert result.exit_code == 1 and "no market 'nope' in this book file" in result.output
    # the pair's tape still shows as a tape
    assert arena.json("tapes", "show", "sample-books")["markets"] == 12


def test_show_books_says_what_its_limit_left_out(arena: Arena) -> None:
    cut = arena("tapes", "show", "sample-books", "--books", "--limit", "3").output
    assert "3 of 12 markets, by first snapshot (--limit N for more)" in cut
    whole = arena("tapes", "show", "sample-books", "--books").output
    assert "all 12 markets, by first snapshot;" in whole and "--limit N" not in whole


def test_validate_books_prints_the_coverage_ledger(arena: Arena, tmp_path: Path) -> None:
    results = arena.json("tapes", "validate", "sample-books")
    assert [(r["ok"], r.get("kind")) for r in results] == [(True, None), (True, "books")]
    assert results[0]["hash"] == SAMPLE_BOOKS_TAPE_HASH and results[1]["hash"] == SAMPLE_BOOKS_HASH
    entries = results[1]["ledger"]
    totals = {k: sum(e[k] for e in entries) for k in ("crossed", "locked", "one_sided", "gaps")}
    assert totals == {"crossed": 4, "locked": 2, "one_sided": 2_110, "gaps": 663}
    assert sum(e["mirror_mismatches"] for e in entries) == 11
    out = tmp_path / "x.books"
    arena.json("tapes", "import", "books", "--format", "columns", csv_books(tmp_path), "--out", out)
    [result] = arena.json("tapes", "validate", out, "--gap", "40")
    [market] = result["ledger"]
    assert (market["locked"], market["gaps"], market["mirror_pairs"]) == (1, 0, 1)
    [result] = arena.json("tapes", "validate", out, "--gap", "20")
    assert result["ledger"][0]["gaps"] == 1
    text = arena("tapes", "validate", out)
    assert text.exit_code == 0 and "gaps>10s" in text.output and "unmirrored" in text.output


def hostile_books(folder: Path) -> Path:
    """A stored book file whose second snapshot has a negative size, behind a good first one."""
    token = BookToken(token="y", market="m", outcome="Yes")
    columns = Columns(
        np.array([0, 2]), np.array([T0, T0 + 1]), np.array([0.01, 0.01]),
        np.array([0, 1, 2]), np.array([0.48, 0.48]), np.array([1.0, -1.0]),
        np.array([0, 0, 0]), np.empty(0), np.empty(0),
    )  # fmt: skip
    path = folder / "bad.books"
    save_books(Books([token], columns, lazy=True), path)
    return path


def test_a_hostile_book_file_is_one_line_in_every_command(arena: Arena, tmp_path: Path) -> None:
    path = hostile_books(tmp_path)
    fragment = f"{path}: token y: row 1 (t={T0 + 1} ms): bid size -1.0 at 0.48 is not positive"
    assert_one_line_error(arena("tapes", "show", path), fragment)
    result = arena("tapes", "validate", path)
    assert result.exit_code == 1 and result.output.strip() == f"FAIL {fragment}"
    garbage = tmp_path / "junk.books"
    garbage.write_bytes(b"PK\x03\x04 nonsense")
    assert_one_line_error(arena("tapes", "show", garbage), "corrupt or unreadable book file")
    [failed] = json.loads(arena("tapes", "validate", garbage, "--json").output)
    assert failed["ok"] is False and failed["kind"] == "books"


def test_import_books_has_help_with_an_example(arena: Arena) -> None:
    result = arena("tapes", "import", "books", "--help")
    assert result.exit_code == 0 and "Example" in result.output and "--format" in result.output


def test_the_books_sample_has_markets_to_trade(arena: Arena, tmp_path: Path) -> None:
    """Its markets are Up/Down, not binary: a scripted agent trades one by its outcome's name."""
    script = tmp_path / "s.json"
    market = "0xfb85ca82aa27f2ae7ea27513c8e341f029168fb664e78f8d82ab585af9af1028"
    script.write_text(json.dumps([{"action": "BET", "bets": [
        {"market_id": market, "side": "Down", "amount": 100, "probability": 0.6}]}]))  # fmt: skip
    db = tmp_path / "run.db"
    result = arena("replay", "--tape", "sample-books", "--start", "2026-09-28T09:05",
                   "--decisions", "1m", "--marks", "1m", "--agent", f"s=scripted:{script}",
                   "--db", db, "--jobs", "1")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "100%" in result.output  # one bet, won: the 09:00-09:15 window went Down


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def test_bench_books(arena: Arena, tmp_path: Path) -> None:
    out = arena.json("bench", "books", "--lookups", "2000", "--tokens", "4", "--snapshots", "50",
                     "--levels", "2", "--touched", "1", "--data", tmp_path)  # fmt: skip
    assert (out["sample_tokens"], out["sample_snapshots"], out["lookups"]) == (24, 25_256, 2_000)
    assert out["import_note"].endswith("no books.parquet; import not measured")
    assert (out["memory_tokens"], out["memory_snapshots"], out["memory_levels"]) == (4, 200, 800)
    first, last = load_books(books_file("sample-books")).span() or (0, 0)
    seconds = (last - first) // 1000 + 1
    assert out["walk_token_instants"] == 24 * seconds == 24 * 12_621  # every token, every second
    for key in ("asof_per_cpu_s", "asof_many_per_cpu_s", "book_at_per_cpu_s", "walk_per_cpu_s",
                "file_mb", "open_ms", "rss_after_open_mb", "rss_after_lookups_mb"):  # fmt: skip
        assert is_number(out[key]) and out[key] >= 0, key
