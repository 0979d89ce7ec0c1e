"""``arena tapes import columns``: plain (market, ts, price) rows and a small markets file make
a tape; hostile input is one line naming the file and the line (CSV) or row (Parquet)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replays.errors import TapeError
from replays.importers.columns import import_price_columns
from replays.tapefile import load_tape
from tests.conftest import Arena

T = 1_725_148_800  # 2024-09-01 00:00 UTC
DAY = 86_400

MARKETS = """market,question,outcomes,resolution,resolved_at,end,volume,category
rain,Rain on Monday?,,Yes,2024-09-03T00:00Z,2024-09-02,1500,weather
race,Who wins the race?,A|B|C,B,,2024-09-10,900,
open,Still open?,,,,,,
void,Cancelled?,,void,,,10,
"""
PRICES = f"""market,ts,price,outcome
rain,{T},0.40,
rain,2024-09-02T00:00:00Z,0.55,
race,{T},0.5,A
race,{T},0.3,B
race,{T},0.2,C
race,{T + DAY},0.4,a
race,{T + DAY},0.45,B
race,{T + DAY},0.15,C
open,{T},0.9,
void,{T},0.5,
"""


def write(tmp_path: Path, prices: str = PRICES, markets: str = MARKETS) -> tuple[Path, Path]:
    (tmp_path / "prices.csv").write_text(prices)
    (tmp_path / "markets.csv").write_text(markets)
    return tmp_path / "prices.csv", tmp_path / "markets.csv"


def test_a_plain_archive_becomes_a_tape(tmp_path: Path) -> None:
    tape = import_price_columns(*write(tmp_path)).tape
    ids = [m.id for m in tape.markets]
    assert ids == ["rain", "race", "open", "void"]
    rain, race = tape.markets[0], tape.markets[1]
    assert (rain.question, rain.outcomes, rain.volume, rain.category) == (
        "Rain on Monday?",
        ("Yes", "No"),
        1500.0,
        "weather",
    )
    assert rain.end_ts == T + DAY and race.outcomes == ("A", "B", "C")
    assert tape.times(0).tolist() == [T, T + DAY]
    assert tape.yes(0).tolist() == pytest.approx([0.40, 0.55])
    assert tape.values(1).tolist() == [[0.5, 0.3, 0.2], [0.4, 0.45, 0.15]]
    res = tape.resolutions
    assert (res["rain"].ts, res["rain"].winner) == (T + 2 * DAY, "Yes")
    assert (res["race"].ts, res["race"].winner) == (T + 9 * DAY, "B")  # the end date
    assert (res["void"].ts, res["void"].winner) == (T, None)  # its last price; VOID
    assert "open" not in res


def test_the_cli_writes_a_tape_that_replays(arena: Arena, tmp_path: Path) -> None:
    prices, markets = write(tmp_path)
    out = tmp_path / "plain.tape"
    summary = arena.json("tapes", "import", "columns", "--prices", prices, "--markets", markets,
                         "--out", out)  # fmt: skip
    assert (summary["markets"], summary["resolved"], summary["voided"]) == (4, 2, 1)
    assert load_tape(out).hash == summary["hash"]
    data = arena.json("replay", "--tape", out, "--agent", "k=kelly?forecaster=market",
                      "--db", tmp_path / "run.db")  # fmt: skip
    assert data["cohorts"][0]["start"] == "2024-09-01T00:00:00Z"  # the tape's first start


def test_parquet_prices(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")  # the parquet extra, installed for the tests
    import pyarrow.parquet as pq

    _, markets = write(tmp_path)
    table = pa.table({"market": ["open", "open"], "ts": [T, T + DAY], "price": [0.9, 0.8]})
    pq.write_table(table, tmp_path / "p.parquet")
    tape = import_price_columns(tmp_path / "p.parquet", markets).tape
    assert [m.id for m in tape.markets] == ["open"]
    bad = pa.table({"market": ["open"], "ts": [T], "price": [float("nan")]})
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(TapeError, match=r"bad.parquet: row 1: price 'nan' is not a number"):
        import_price_columns(tmp_path / "bad.parquet", markets)


HOSTILE = [
    (f"market,ts,price\nrain,{T},nan\n", "prices.csv: line 2: price 'nan' is not a number in"),
    (f"market,ts,price\nrain,{T},1.5\n", "line 2: price '1.5' is not a number in [0, 1]"),
    (f"market,ts,price\nrain,{T},\n", "line 2: price '' is not a number"),
    (f"market,ts,price\nrain,{T + DAY},0.5\nrain,{T},0.5\n",
     f"line 3: ts {T} of rain is before the {T + DAY} on line 2: sort"),
    (f"market,ts,price\nrain,{T},0.5\nrain,{T},0.6\n",
     f"line 3: rain already has a price for Yes at ts {T}"),
    (f"market,ts,price\nsnow,{T},0.5\n", "line 2: market 'snow' is not in"),
    ("market,ts,price\nrain,yesterday,0.5\n", "line 2: ts 'yesterday' is not an instant"),
    # an exchange feed's milliseconds (or micro-, nanoseconds) are named as such
    (f"market,ts,price\nrain,{T * 1000},0.5\n",
     "is not an instant (unix seconds or ISO): it looks like milliseconds; divide by 1,000"),
    (f"market,ts,price\nrain,{T * 10**9},0.5\n",
     "it looks like nanoseconds; divide by 1,000,000,000"),
    (f"market,ts,price\nrace,{T},0.5\n", "line 2: market race has 3 outcomes: give each row"),
    (f"market,ts,price,outcome\nrace,{T},0.5,D\n", "line 2: outcome 'D' is not one of race's"),
    (f"market,ts,price,outcome\nrace,{T},0.5,A\n", f"market race at ts {T}: no price for B"),
    (f"market,ts\nrain,{T}\n", "prices.csv: no column 'price'"),
    ("market,ts,price\n", "prices.csv: no prices"),
]  # fmt: skip


@pytest.mark.parametrize(("prices", "message"), HOSTILE)
def test_hostile_prices_are_one_line_naming_file_and_line(
    tmp_path: Path, prices: str, message: str
) -> None:
    with pytest.raises(TapeError) as raised:
        import_price_columns(*write(tmp_path, prices=prices))
    assert message in str(raised.value) and "\n" not in str(raised.value)


BAD_MARKETS = [
    ("market,question,resolution\nrain,?,Maybe\n",
     "markets.csv: line 2: resolution 'Maybe' is not one of Yes, No or VOID"),
    ("market,question,outcomes\nrain,?,Yes\n", "line 2: outcomes 'Yes' are not two or more"),
    ("market,question\nrain,?\nrain,?\n",
     "line 3: market 'rain' is listed twice (first on line 2)"),
    ("market,question,volume\nrain,?,-3\n", "line 2: volume '-3' is not an amount >= 0"),
    ("market,question,end\nrain,?,someday\n", "line 2: end 'someday' is not an instant"),
    ("market,question,resolved_at\nrain,?,2024-09-03\n", "line 2: resolved_at is given but"),
    ("market,outcomes\nrain,?\n", "markets.csv: no column 'question'"),
    ("market,question\n", "markets.csv: no markets"),
]  # fmt: skip


@pytest.mark.parametrize(("markets", "message"), BAD_MARKETS)
def test_bad_markets_are_one_line_naming_file_and_line(
    tmp_path: Path, markets: str, message: str
) -> None:
    with pytest.raises(TapeError) as raised:
        import_price_columns(*write(tmp_path, prices=f"market,ts,price\nrain,{T},0.5\n",
                                    markets=markets))  # fmt: skip
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_not_a_table_file(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text("[]")
    _, markets = write(tmp_path)
    with pytest.raises(TapeError, match=r"p.json: not a .csv, .csv.gz or .parquet file"):
        import_price_columns(tmp_path / "p.json", markets)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.floats(0, 1)), min_size=1, max_size=30))
def test_any_sorted_series_round_trips(
    tmp_path_factory: pytest.TempPathFactory, points: list[tuple[int, float]]
) -> None:
    """Sorted, unique instants with prices in [0, 1] come back exactly; the NO column is 1 − p."""
    tmp = tmp_path_factory.mktemp("rt")
    unique = sorted(dict(points).items())
    rows = "".join(f"m,{T + t},{p!r}\n" for t, p in unique)
    tape = import_price_columns(
        *write(tmp, f"market,ts,price\n{rows}", "market,question\nm,?\n")
    ).tape
    assert tape.times(0).tolist() == [T + t for t, _ in unique]
    assert tape.yes(0).tolist() == [p for _, p in unique]
