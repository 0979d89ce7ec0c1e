"""Tapes and importer input made to hurt (issue 25): each case once gave a traceback or was
accepted as something it is not; now it is one ``Error:`` line, a ``FAIL`` line, or shown as
text, never obeyed by the terminal."""

from __future__ import annotations

import gzip
import json
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from replays.markets import MarketInfo
from replays.tape import Tape
from replays.tapefile import load_tape, save_tape
from tests.conftest import Arena

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x9b31m"
"""Retitle the window (OSC ... BEL), clear the screen (CSI 2 J), and the one-byte C1 CSI."""


def _market(mid: str, volume: float, **extra: Any) -> MarketInfo:
    return MarketInfo(id=mid, question=f"{mid}?", outcomes=("Yes", "No"), volume=volume, **extra)


@pytest.fixture
def pointless(tmp_path: Path) -> Path:
    """Two markets, the bigger with no price point at all, and text full of escapes."""
    hostile = MarketInfo(id=f"b{ESCAPES}", question=f"Q{ESCAPES}?", volume=2.0,
                         outcomes=(f"Yes{ESCAPES}", "No"), category=f"c{ESCAPES}")  # fmt: skip
    markets = [_market("a", 1.0), hostile]
    series = {"a": (np.array([100, 200]), np.array([0.5, 0.625]))}
    path = tmp_path / "pointless.tape"
    save_tape(Tape.from_series(markets, series, []), path)
    return path


def _obeyed(text: str) -> set[str]:
    """Control characters a terminal would act on (the line break aside)."""
    return {c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0}


def test_show_lists_a_market_with_no_points_with_dashes(arena: Arena, pointless: Path) -> None:
    result = arena("tapes", "show", pointless)
    assert result.exit_code == 0, result.output
    [row] = [line for line in result.output.splitlines() if line.startswith(" b")]
    assert re.search(r"Yes\\x1b\S*/No\s+—\s+—", row)  # first and last price: none
    [row] = [line for line in result.output.splitlines() if line.startswith(" a ")]
    assert re.search(r"Yes/No\s+0\.500\s+0\.625", row)


def test_show_writes_escape_sequences_out(arena: Arena, pointless: Path) -> None:
    table = arena("tapes", "show", pointless).output
    one = arena("tapes", "show", pointless, "--market", f"b{ESCAPES}").output
    for text in (table, one):
        assert _obeyed(text) == set()
        assert "Q\\x1b]0;pwned" in text
        # ids are cut in the middle to fit 80 columns: what is left is written out too
        assert "b\\x1b]0" in text


def test_show_json_keeps_the_text_and_escapes_what_a_terminal_obeys(
    arena: Arena, pointless: Path
) -> None:
    result = arena("tapes", "show", pointless, "--json")
    assert _obeyed(result.stdout) == set()
    rows = {r["id"]: r for r in json.loads(result.stdout)["market_rows"]}
    assert rows[f"b{ESCAPES}"]["question"] == f"Q{ESCAPES}?"  # the same text, escaped in JSON
    assert (rows[f"b{ESCAPES}"]["points"], rows[f"b{ESCAPES}"]["first_price"]) == (0, None)


def test_an_error_naming_a_hostile_market_is_shown_not_obeyed(arena: Arena, tmp_path: Path) -> None:
    """Refused by the tape's own checks, whose message names the market: the FAIL line of
    ``validate`` and the ``Error:`` line of every other command write it out."""
    twice = [msgspec.to_builtins(_market(f"x{ESCAPES}", 1.0))] * 2
    header = {"format": "arena-tape", "version": 1, "resolutions": [], "markets": twice}
    path = tmp_path / "twice.tape.jsonl"
    path.write_text(json.dumps(header) + "\n")
    failed = arena("tapes", "validate", path)
    shown = arena("tapes", "show", path)
    assert (failed.exit_code, shown.exit_code) == (1, 1)
    for text in (failed.output, shown.output):
        assert _obeyed(text) == set()
        assert "market x\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m: appears twice" in text


def test_validate_checks_the_points_the_file_records(arena: Arena, tmp_path: Path) -> None:
    """FORMAT.md: the ``points`` field is a check ``validate`` makes; it was ignored."""
    path = tmp_path / "t.tape.jsonl"
    save_tape(Tape.from_series([_market("a", 1.0)], {"a": ([100, 200], [0.5, 0.6])}, []), path)
    header, *rest = path.read_text().splitlines()
    told = json.loads(header)
    assert told["points"] == 2
    path.write_text("\n".join([json.dumps({**told, "points": 3}), *rest]) + "\n")
    result = arena("tapes", "validate", path)
    assert result.exit_code == 1
    assert result.output.strip() == f"FAIL {path}: the file says 3 points, its series hold 2"
    assert load_tape(path).n_points == 2  # a plain load does not check it (FORMAT.md)


def test_blank_lines_are_skipped_and_lines_still_counted(tmp_path: Path) -> None:
    path = tmp_path / "t.tape.jsonl"
    save_tape(Tape.from_series([_market("a", 1.0)], {"a": ([100, 200], [0.5, 0.6])}, []), path)
    header, line = path.read_bytes().splitlines()
    path.write_bytes(header + b"\n\n  \t\n\n" + line.replace(b"0.6", b"1.5") + b"\n\n")
    with pytest.raises(Exception, match=r"t\.tape\.jsonl: market a: price 1\.5 is outside"):
        load_tape(path)
    path.write_bytes(header + b"\n\n  \t\n\n" + line.replace(b"[100,", b'["x",') + b"\n")
    with pytest.raises(Exception, match=r"t\.tape\.jsonl: line 5: market a: instants must be"):
        load_tape(path)


def test_a_gzip_of_blank_lines_is_one_line_in_little_memory(tmp_path: Path) -> None:
    """150 M newlines after a header: split into a list of lines they asked for 1.2 GB of
    pointers (a MemoryError under this address-space limit); now one scan and one line."""
    path = tmp_path / "blank.tape.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(b'{"format":"arena-tape","version":1,"markets":[],"resolutions":[]}')
        fh.write(b"\n" * 150_000_000)
    limit = 1_200_000_000
    program = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))\n"
        "from arena.cli import main\n"
        f"sys.argv = ['arena', 'tapes', 'validate', {str(path)!r}]\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert (done.stdout + done.stderr).strip() == (
        f"FAIL {path}: empty tape (no markets or no price points)"
    )


# -- the Polymarket importer -----------------------------------------------------------------


def _gamma(**over: Any) -> dict[str, Any]:
    return {"id": "m1", "question": "Q?", "outcomes": '["Yes", "No"]',
            "clobTokenIds": '["1", "2"]', "volume": "12.5"} | over  # fmt: skip


def _import(arena: Arena, folder: Path, markets: Any, raw: str | None = None) -> Any:
    mpath, ppath = folder / "markets.json", folder / "prices.jsonl"
    mpath.write_text(raw if raw is not None else json.dumps(markets))
    ppath.write_text(json.dumps({"token_id": "1", "history": [{"t": 100, "p": 0.5}]}) + "\n")
    return arena("tapes", "import", "polymarket", "--markets", mpath, "--prices", ppath,
                 "--out", folder / "out.tape")  # fmt: skip


@pytest.mark.parametrize(
    ("over", "problem"),
    [
        ({"volume": "lots"}, "market m1: volume: 'lots' is not a finite amount >= 0"),
        ({"volume": "1e999"}, "market m1: volume: '1e999' is not a finite amount >= 0"),
        ({"volumeNum": -5}, "market m1: volumeNum: '-5' is not a finite amount >= 0"),
        ({"volumeNum": "NaN"}, "market m1: volumeNum: 'NaN' is not a finite amount >= 0"),
        ({"id": {"a": 1}}, "a market's id: expected text, found an object"),
        ({"id": ["m1"]}, "a market's id: expected text, found a list"),
        ({"question": {"text": "Q"}}, "market m1: question: expected text, found an object"),
        ({"outcomes": '[{"a": 1}, "No"]'}, "market m1: outcomes: expected text, found an object"),
        ({"category": True}, "market m1: category: expected text, found a boolean"),
    ],
)
def test_garbage_in_a_market_object_is_refused_by_name(
    arena: Arena, tmp_path: Path, over: dict[str, Any], problem: str
) -> None:
    result = _import(arena, tmp_path, [_gamma(**over)])
    assert result.exit_code == 1
    assert result.output.strip() == f"Error: {tmp_path / 'markets.json'}+prices.jsonl: {problem}"
    assert not (tmp_path / "out.tape").exists()


def test_a_whole_number_id_is_text_and_absent_volume_is_none(arena: Arena, tmp_path: Path) -> None:
    result = _import(arena, tmp_path, [_gamma(id=253573, volume=None)])
    assert result.exit_code == 0, result.output
    [market] = load_tape(tmp_path / "out.tape").markets
    assert (market.id, market.volume) == ("253573", 0.0)


@pytest.mark.parametrize("depth", [10_000, 200_000])
def test_deeply_nested_json_is_one_line(arena: Arena, tmp_path: Path, depth: int) -> None:
    result = _import(arena, tmp_path, None, raw="[" * depth + "]" * depth)
    assert result.exit_code == 1
    assert (
        result.output.strip() == f"Error: {tmp_path / 'markets.json'}: bad JSON: nested too deeply"
    )


def test_deeply_nested_json_inside_a_gamma_string_is_no_list(arena: Arena, tmp_path: Path) -> None:
    """Gamma spells lists as JSON strings; one nested past the interpreter's limit is not a
    list of outcomes, so the market is refused for having none."""
    result = _import(arena, tmp_path, [_gamma(outcomes="[" * 100_000 + "]" * 100_000)])
    assert result.exit_code == 1
    assert result.output.strip().endswith("market m1: needs at least two outcomes, has []")
