"""``arena tapes``: JSON output, one-line errors, and exit codes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result

from arena.commands.tapes_view import compact, sparkline
from replays.markets import MarketInfo
from replays.synthetic import random_walk_tape
from replays.tape import Tape
from replays.tapefile import save_tape
from tests.conftest import Arena


def test_sparkline_maps_prices_to_blocks() -> None:
    assert sparkline(np.array([0.0, 0.5, 0.999, 1.0]), width=4) == "▁▅██"
    assert sparkline(np.array([])) == ""


def test_list_and_show_json(arena: Arena, tmp_path: Path) -> None:
    save_tape(random_walk_tape(3, 10, seed=1, step_seconds=60), tmp_path / "a.tape")
    (tmp_path / "notes.txt").write_text("not a tape")
    result = arena("tapes", "list", tmp_path, "--json")
    assert result.exit_code == 0
    [row] = json.loads(result.output)
    assert (row["markets"], row["points"], row["resolved"], row["unresolved"]) == (3, 30, 3, 0)
    assert row["first"] == "2024-01-01 00:00" and row["last"] == "2024-01-01 00:09"
    result = arena("tapes", "show", tmp_path / "a.tape", "--market", "syn-00001", "--json")
    assert result.exit_code == 0
    [market] = json.loads(result.output)["market_rows"]
    assert market["id"] == "syn-00001" and market["points"] == 10 and len(market["sparkline"]) == 10


def test_show_sample_lists_markets_by_volume(arena: Arena) -> None:
    result = arena("tapes", "show", "sample", "--limit", "2", "--json")
    assert result.exit_code == 0
    rows = json.loads(result.output)["market_rows"]
    assert [r["id"] for r in rows] == ["255151", "255143"]  # PA then MI president
    # each is covered until its own last point (the CLOB history ends with trading, under 12 h
    # before Gamma's closedTime: PA 11-07 12:53, MI 11-07 09:59), not the tape's (11-12 15:01),
    # and shown its scheduled end (Gamma endDate)
    assert [(r["covered_until"], r["coverage_recorded"], r["scheduled_end"]) for r in rows] == [
        ("2024-11-07 12:00", True, "2024-11-05 12:00"),
        ("2024-11-07 00:00", True, "2024-11-05 12:00"),
    ]


def test_validate_reports_each_file_and_fails_on_any_bad(arena: Arena, tmp_path: Path) -> None:
    good = tmp_path / "good.tape.jsonl.gz"
    save_tape(random_walk_tape(2, 5, seed=2), good)
    bad = tmp_path / "bad.tape"
    bad.write_bytes(b"PK\x03\x04 nonsense")
    result = arena("tapes", "validate", good, bad, "--json")
    assert result.exit_code == 1
    results = json.loads(result.output)
    assert [r["ok"] for r in results] == [True, False]
    assert results[1]["error"].startswith(f"{bad}: corrupt columnar tape")
    assert arena("tapes", "validate", good).exit_code == 0


def test_bad_input_is_one_line_not_a_traceback(arena: Arena, tmp_path: Path) -> None:
    result = arena("tapes", "show", tmp_path / "missing.tape")
    assert result.exit_code == 1
    assert (
        result.output.strip().startswith("Error:")
        and result.output.count("\n") == 1
        and "cannot read" in result.output
    )
    result = arena("tapes", "show", "sample", "--market", "nope")
    assert result.exit_code == 1 and "no market 'nope'" in result.output
    # --limit -1 listed all but the smallest market ([:-1]); an empty folder an empty table
    result = arena("tapes", "show", "sample", "--limit", "-1")
    assert result.exit_code == 2 and "-1 is not in the range x>=1" in result.output
    result = arena("tapes", "list", tmp_path)
    assert result.exit_code == 1
    assert (
        result.output == f"Error: {tmp_path}: no tape in it (.tape, .tape.jsonl, .tape.jsonl.gz)\n"
    )


def test_import_polymarket_writes_a_tape_and_summarises(arena: Arena, tmp_path: Path) -> None:
    market = {"id": "7", "question": "Q?", "outcomes": '["Yes", "No"]', "closed": True}
    market |= {"clobTokenIds": '["1", "2"]', "outcomePrices": '["0.5", "0.5"]'}
    market |= {"closedTime": "2024-01-02 00:00:00+00"}
    markets = [market]
    (tmp_path / "m.json").write_text(json.dumps(markets))
    (tmp_path / "p.jsonl").write_text(
        json.dumps({"token_id": "1", "history": [{"t": 1704067200, "p": 0.5}]})
    )
    out_path = tmp_path / "o.tape"
    inputs = ("--markets", str(tmp_path / "m.json"), "--prices", str(tmp_path / "p.jsonl"))
    result = arena("tapes", "import", "polymarket", *inputs, "--out", out_path, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert (summary["markets"], summary["voided"], summary["resolved"]) == (1, 1, 0)
    assert out_path.exists()
    result = arena("tapes", "import", "polymarket", *inputs, "--out", tmp_path / "o.csv")
    assert result.exit_code == 1 and "unknown tape extension" in result.output


def test_every_command_has_help_with_an_example(arena: Arena) -> None:
    for args in (
        ["list"],
        ["show"],
        ["validate"],
        ["import", "polymarket"],
        ["import", "election2024"],
    ):
        result = arena("tapes", *args, "--help")
        assert result.exit_code == 0 and "Example" in result.output


HEAD = {"format": "arena-tape", "version": 1, "resolutions": [],
        "markets": [{"id": "a", "question": "A?", "outcomes": ["Yes", "No"]}]}  # fmt: skip


def hostile_tapes(folder: Path) -> dict[str, Path]:
    """One file per hole fuzzing found; each crashed a command or was accepted."""

    def jsonl(name: str, head: dict[str, object], t: list[object], p: list[object]) -> None:
        row = {"market": "a", "t": t, "p": p}
        (folder / f"{name}.tape.jsonl").write_text(f"{json.dumps(head)}\n{json.dumps(row)}\n")

    twice = [{"market": "a", "ts": 300, "winner": w} for w in ("Yes", "No")]
    jsonl("no-outcomes", {**HEAD, "markets": [{"id": "a", "question": "?", "outcomes": []}]},
          [100, 200, 300], [0.1, 0.2, 0.3])  # fmt: skip
    jsonl("huge-instant", HEAD, [100, 2**70], [0.1, 0.2])
    far = [{"market": "a", "ts": 2**63, "winner": "Yes"}]
    jsonl("far-resolution", {**HEAD, "resolutions": far}, [100], [0.1])
    jsonl("two-resolutions", {**HEAD, "resolutions": twice}, [100], [0.1])
    jsonl("true-price", HEAD, [100], [True])
    gz = folder / "bomb.tape.jsonl.gz"
    gz.write_bytes(gzip.compress(json.dumps(HEAD).encode() + b"\n" + b" " * (3 << 20)))
    return {p.name.split(".")[0]: p for p in sorted(folder.iterdir())}


def assert_one_line_error(result: Result, fragment: str) -> None:
    assert result.exit_code != 0
    assert isinstance(result.exception, SystemExit), result.exception  # not a traceback
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.output


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("no-outcomes", "market a: needs at least two outcomes"),
        ("huge-instant", "market a: instants must be whole unix seconds"),
        ("far-resolution", "market a: resolution instant t=9223372036854775808"),
        ("two-resolutions", "market a: resolved twice"),
        ("true-price", "market a: prices must be numbers"),
        ("bomb", "decompresses to more than 2.0 MiB"),
    ],
)
def test_hostile_tapes_are_one_line_in_every_command(
    arena: Arena, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, fragment: str
) -> None:
    monkeypatch.setenv("ARENA_TAPE_MAX_BYTES", str(2 << 20))
    path = str(hostile_tapes(tmp_path)[name])
    for args in (["validate", path], ["show", path], ["list", path]):
        assert_one_line_error(arena("tapes", *args), fragment)
    db = str(tmp_path / "run.db")
    result = arena("replay", "--tape", path, "--start", "2024-01-07", "--db", db)
    assert_one_line_error(result, fragment)
    assert not Path(db).exists()


def test_hostile_import_inputs_are_one_line(arena: Arena, tmp_path: Path) -> None:
    market = {
        "id": "7",
        "question": "Q?",
        "outcomes": '["Yes", "Yes"]',
        "clobTokenIds": '["1", "2"]',
    }
    (tmp_path / "m.json").write_text(json.dumps([market]))
    (tmp_path / "p.jsonl").write_text(
        json.dumps({"token_id": "1", "history": [{"t": 2**70, "p": 0.5}]})
    )
    inputs = ["--markets", str(tmp_path / "m.json"), "--prices", str(tmp_path / "p.jsonl")]
    out = ["--out", str(tmp_path / "o.tape")]
    result = arena("tapes", "import", "polymarket", *inputs, *out)
    assert_one_line_error(result, "p.jsonl: line 1: Expected `int` <= 4102444799")
    (tmp_path / "p.jsonl").write_text(
        json.dumps({"token_id": "1", "history": [{"t": 100, "p": 0.5}]})
    )
    result = arena("tapes", "import", "polymarket", *inputs, *out)
    assert_one_line_error(result, "market 7: outcome 'Yes' is listed twice")
    assert not (tmp_path / "o.tape").exists()


@pytest.mark.parametrize(("tape", "listed"), [
    ("sample", "30 of 101 markets, by volume (--limit N for more)"),
    ("sample-books", "all 12 markets, by volume"),
])  # fmt: skip
def test_show_at_80_columns_gives_each_question_a_line_under_its_figures(
    arena: Arena, tape: str, listed: str
) -> None:
    """At 80 columns the question had 13 cells, five lines a market ("Will a" / "Democrat win"
    / …), and "September" was cut to "Septemb…"; the 30 rows of the default --limit were shown
    under "101 markets" with nothing to say so. Now each market's figures take a line, whole
    (a 66-character condition id cut in the middle, the trend's 16 blocks all there), its
    question and outcomes the line under them, and a last line says how many of how many are
    listed."""
    data = arena.json("tapes", "show", tape)
    rows = data["market_rows"]
    done = arena("tapes", "show", tape, env={"COLUMNS": "80"})
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert f"{data['points']:,} points" in done.stdout
    heading = next(k for k, line in enumerate(lines) if line.startswith("id "))
    assert lines[heading].split() == ["id", "volume", "first", "last", "winner", "trend"]
    # a market's line of figures, then its question's, indented (wrapped past 78 cells)
    blocks: list[list[str]] = []
    for line in lines[heading + 2 : -1]:
        if line.startswith("  "):
            blocks[-1][1] += " " + line.strip()
        else:
            blocks.append([line, ""])
    assert len(blocks) == len(rows)
    for row, (figures, question) in zip(rows, blocks, strict=True):
        cells = figures.split()
        assert row["id"] == cells[0] or "…" in cells[0]
        assert cells[1:] == [compact(row["volume"]), f"{row['first_price']:.3f}",
                             f"{row['last_price']:.3f}", row["resolution"],
                             row["sparkline"]]  # fmt: skip
        # whole, under its figures, with the outcomes
        assert question.strip() == f"{row['question']} ({'/'.join(row['outcomes'])})"
    cut = any(len(r["id"]) > 10 for r in rows)
    assert lines[-1] == listed + (
        "; ids cut in the middle to fit; --json has each whole" if cut else ""
    )


def test_show_in_a_wide_terminal_keeps_the_table_and_says_what_it_lists(arena: Arena) -> None:
    """At 120 columns the question has a column of its own beside the figures; --limit 2
    lists two of the 101, and says so."""
    done = arena("tapes", "show", "sample", "--limit", "2", env={"COLUMNS": "120"})
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 120
    heading = next(line for line in lines if line.startswith(" id "))
    assert heading.split() == ["id", "question", "volume", "outcomes", "first", "last", "winner",
                               "trend"]  # fmt: skip
    assert any(line.startswith(" 255151  Will a Democrat win Pennsylvania") for line in lines)
    assert lines[-1] == "2 of 101 markets, by volume (--limit N for more)"
    one = arena("tapes", "show", "sample", "--market", "255151", env={"COLUMNS": "120"})
    assert "of 101 markets" not in one.stdout  # one market asked for: no listing to count


def test_show_at_80_columns_writes_a_questions_escapes_out(arena: Arena, tmp_path: Path) -> None:
    """The narrow layout prints each question as text of its own: an escape sequence in it,
    or in an id or an outcome, is written out (``\\x1b``), never sent to the terminal; and a
    market with no price point shows dashes for its prices and trend."""
    escapes = "\x1b]0;pwned\x07\x1b[2J"
    hostile = MarketInfo(id=f"b{escapes}", question=f"Q{escapes}?", volume=2.0,
                         outcomes=(f"Yes{escapes}", "No"))  # fmt: skip
    plain = MarketInfo(id="a", question="a?", outcomes=("Yes", "No"), volume=1.0)
    series = {"a": (np.array([100, 200]), np.array([0.5, 0.625]))}
    save_tape(Tape.from_series([plain, hostile], series, []), tmp_path / "h.tape")
    out = arena("tapes", "show", tmp_path / "h.tape", env={"COLUMNS": "80"}).stdout
    assert "\x1b" not in out and "\x07" not in out
    lines = out.splitlines()
    b = next(k for k, line in enumerate(lines) if line.startswith("b\\x1b"))
    assert lines[b].split()[-3:] == ["—", "—", "—"]  # first, last, winner; no trend
    assert lines[b + 1] == "  Q\\x1b]0;pwned\\x07\\x1b[2J? (Yes\\x1b]0;pwned\\x07\\x1b[2J/No)"
    assert lines[-1].startswith("all 2 markets, by volume; ids cut in the middle")
