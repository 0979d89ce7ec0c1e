"""The one CSV / JSON Lines reader (``strategies.tablefile``) behind ``file:`` forecasters and
``arena score``."""

from __future__ import annotations

import csv
import gzip
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.forecasters import read_predictions
from strategies.tablefile import TableError, open_table

IDS = st.text("abcxyz0123456789-", min_size=1, max_size=8)
PROBS = st.floats(0, 1, allow_nan=False).map(lambda x: float(f"{x:.6g}"))


def write(folder: Path, name: str, rows: list[dict[str, object]]) -> Path:
    path = folder / name
    plain = name.removesuffix(".gz")
    if plain.endswith(".csv"):
        lines = [",".join(rows[0])] + [",".join(str(v) for v in r.values()) for r in rows]
        text = "\n".join(lines) + "\n"
    else:
        text = "".join(json.dumps(r) + "\n\n" for r in rows)  # blank lines are not rows
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    return path


@settings(max_examples=30)
@given(st.dictionaries(IDS, PROBS, min_size=1, max_size=20))
def test_every_format_reads_the_same_predictions(predictions: dict[str, float]) -> None:
    rows: list[dict[str, object]] = [
        {"market_id": m, "pred_prob": p} for m, p in predictions.items()
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("p.csv", "p.jsonl", "p.csv.gz", "p.jsonl.gz"):
            assert read_predictions(write(Path(tmp), name, rows)) == predictions, name


def test_rows_are_numbered_by_data_row_in_both_formats(tmp_path: Path) -> None:
    rows: list[dict[str, object]] = [{"y": 1, "p": 0.5}, {"y": 0, "p": 0.25}]
    for name in ("t.csv", "t.jsonl"):
        with open_table(write(tmp_path, name, rows)) as table:
            assert table.columns == ["y", "p"]
            numbered = [(n, float(r["p"])) for n, r in table.rows]
        assert numbered == [(1, 0.5), (2, 0.25)]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("t.txt", b"", "unknown format, expected .csv or .jsonl (or .gz)"),
        ("t.jsonl", b'{"a": 1}\n\n{"a": \n', "row 2: not valid JSON (Expecting value)"),
        ("t.jsonl", b'{"a": 1}\n[2]\n', "row 2: expected a JSON object"),
        ("t.csv.gz", b"not gzip at all", "cannot read (Not a gzipped file"),
        ("t.csv", b"a,b\n\xff\xfe,1\n", "cannot read ('utf-8' codec can't decode"),
        # csv.DictReader read these as a blank forecast or kept the stray field aside
        ("t.csv", b"a,b\n1,0.5\n\n2\n", "row 2: 1 field(s) where the header has 2"),
        ("t.csv", b"a,b\n1,0.5,\n", "row 1: 3 field(s) where the header has 2"),
        ("t.csv", b'a,b\n1,0.5\n"2,0.5\n3,0.5\n', "row 2: 1 field(s) where the header has 2"),
    ],
)
def test_a_bad_file_is_one_line_naming_it(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(TableError) as caught, open_table(path) as table:
        list(table.rows)
    assert str(caught.value).startswith(f"{path}: {message}")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("name", ["t.csv", "t.jsonl", "t.csv.gz"])
def test_a_byte_order_mark_is_no_part_of_the_first_column(tmp_path: Path, name: str) -> None:
    """Excel's "CSV UTF-8" starts with one; the first column was then '\\ufeffmarket_id'."""
    rows: list[dict[str, object]] = [{"market_id": "m", "pred_prob": 0.25}]
    plain = write(tmp_path, name.removesuffix(".gz"), rows).read_bytes()
    path = tmp_path / f"bom-{name}"
    marked = b"\xef\xbb\xbf" + plain
    path.write_bytes(gzip.compress(marked) if name.endswith(".gz") else marked)
    assert read_predictions(path) == {"m": 0.25}


def test_missing_columns_are_named_with_what_there_is(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    with path.open("w", newline="") as f:
        csv.writer(f).writerows([["market_id", "prob"], ["m", "0.5"]])
    with open_table(path) as table, pytest.raises(TableError) as caught:
        table.require("market_id", "pred_prob")
    assert str(caught.value) == f"{path}: missing column 'pred_prob' (has: market_id, prob)"
    assert read_predictions(path, "prob") == {"m": 0.5}
