"""Importing books: the bundled BTC 15-minute sample (its ledger counted again from the Parquet
by a separate, plain reading), the embedded second sample, the generic CSV and Parquet forms,
and hostile inputs as one-line errors naming the input's row."""

from __future__ import annotations

import gzip
import itertools
import re
import sys
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from replays.bookfile import load_books, save_books
from replays.errors import TapeError
from replays.importers.books import (
    RESOLVEDKIT_ATTRIBUTION,
    import_columns,
    import_resolvedkit,
)
from replays.samples import (
    SAMPLE_BOOKS,
    SAMPLE_BOOKS_HASH,
    SAMPLE_BOOKS_TAPE_HASH,
    books_file,
    sample_books_paths,
    sample_path,
    tape_file,
)
from replays.tapefile import load_tape
from replays.validate_books import ledger

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "polymarket" / "books_btc15m"
needs_shared = pytest.mark.skipif(not SHARED.exists(), reason="shared data not present")
T0 = 1_790_587_077_000


# -- the embedded sample ----------------------------------------------------------------------


def test_sample_books_names_the_embedded_pair_and_sample_is_unchanged() -> None:
    tape_path, books_path = sample_books_paths()
    assert tape_file(SAMPLE_BOOKS) == tape_path and books_file(SAMPLE_BOOKS) == books_path
    assert tape_file("sample") == sample_path() and books_file("x.books") == Path("x.books")
    assert tape_file("other.tape") == Path("other.tape")
    tape = load_tape(tape_path, verify_hash=True)
    books = load_books(books_path, verify=True)
    assert (tape.hash, books.hash) == (SAMPLE_BOOKS_TAPE_HASH, SAMPLE_BOOKS_HASH)
    assert books.attribution == RESOLVEDKIT_ATTRIBUTION
    assert all(RESOLVEDKIT_ATTRIBUTION in m.description for m in tape.markets)
    notice = (books_path.parent / "NOTICE.md").read_text()
    assert RESOLVEDKIT_ATTRIBUTION in notice and "CC BY 4.0" in notice
    assert SAMPLE_BOOKS_HASH in notice and SAMPLE_BOOKS_TAPE_HASH in notice
    # every market of the tape has its two outcome books in the store
    for market in tape.markets:
        for outcome in market.outcomes:
            assert books.tokens[books.token(market.id, outcome)].depth == "l2"


def test_the_sample_tape_never_shows_a_price_before_its_book_existed() -> None:
    tape = load_tape(sample_books_paths()[0])
    books = load_books(sample_books_paths()[1])
    rng = np.random.default_rng(3)
    for m, market in enumerate(tape.markets):
        times, values = tape.times(m), tape.values(m)
        for i in rng.integers(0, times.size, 25).tolist():
            for j, outcome in enumerate(market.outcomes):
                k = books.token(market.id, outcome)
                rows = books.rows(k)
                # the mid of the latest two-sided snapshot at or before the point's instant
                at = books.asof(k, int(times[i]) * 1000)
                bid, _, ask, _ = books.quotes(np.arange(rows.start, at + 1))
                both = np.flatnonzero(~np.isnan(bid) & ~np.isnan(ask))
                assert both.size
                assert values[i, j] == pytest.approx((bid[both[-1]] + ask[both[-1]]) / 2)


# -- the bundled data set, counted independently ----------------------------------------------


def independent_counts(folder: Path, gap_ms: int = 10_000) -> dict[str, Any]:
    """The coverage ledger's totals from the Parquet rows, read plainly: Python loops, prices as
    decimals, no code shared with the importer."""
    rows = pq.read_table(folder / "books.parquet").to_pylist()
    tokens: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        tokens[(row["market_id"], row["side"])].append(row)
    ticks = (Decimal("0.1"), Decimal("0.01"), Decimal("0.001"), Decimal("0.0001"))
    out = dict.fromkeys(
        ("snapshots", "crossed", "locked", "one_sided", "empty", "gaps", "tick_changes"), 0
    )
    out["longest_gap_ms"] = 0
    for series in tokens.values():
        series.sort(key=lambda r: r["ts"])
        out["snapshots"] += len(series)
        found = []
        for row in series:
            bids, asks = row["bid_px"], row["ask_px"]
            if bids and asks:
                out["crossed"] += bids[0] > asks[0] + 1e-9
                out["locked"] += abs(bids[0] - asks[0]) <= 1e-9
            out["one_sided"] += bool(bids) != bool(asks)
            out["empty"] += not bids and not asks
            prices = [Decimal(repr(p)) for p in bids + asks]
            found.append(next((t for t in ticks if all(p % t == 0 for p in prices)), None))
        known = [t for t in found if t is not None]
        filled: list[Decimal] = []
        for t in found:  # an empty book keeps the tick before it (the first known at the start)
            filled.append(t if t is not None else (filled[-1] if filled else known[0]))
        out["tick_changes"] += sum(a != b for a, b in itertools.pairwise(filled))
        for a, b in itertools.pairwise(series):
            out["gaps"] += b["ts"] - a["ts"] > gap_ms
            out["longest_gap_ms"] = max(out["longest_gap_ms"], b["ts"] - a["ts"])
    pairs = mismatched = 0
    for (market, side), series in tokens.items():
        if side != "UP":
            continue
        down = {r["ts"]: r for r in tokens[(market, "DOWN")]}
        for up in series:
            other = down.get(up["ts"])
            if other is None:
                continue
            pairs += 1
            same = True
            for mine, theirs in (("bid", "ask"), ("ask", "bid")):
                px, sz = up[f"{mine}_px"], up[f"{mine}_sz"]
                opx, osz = other[f"{theirs}_px"], other[f"{theirs}_sz"]
                same &= len(px) == len(opx) and all(
                    abs(p - (1 - q)) <= 1e-9 and abs(s - t) <= 1e-9 * max(1, s)
                    for p, q, s, t in zip(px, opx, sz, osz, strict=True)
                )
            mismatched += not same
    out["mirror_pairs"], out["mirror_mismatches"] = pairs, mismatched
    out["tokens"] = len(tokens)
    return out


@needs_shared
def test_the_bundled_books_import_validate_and_count_as_a_plain_reading_says() -> None:
    result = import_resolvedkit(SHARED)
    books, tape = result.books, result.tape
    assert tape is not None
    assert (books.hash, tape.hash) == (SAMPLE_BOOKS_HASH, SAMPLE_BOOKS_TAPE_HASH)
    assert (result.rows, result.collapsed, result.replaced, result.notes) == (25_256, 0, 0, [])
    entries = ledger(books, gap_seconds=10)
    counted = {
        name: sum(e.total(name) for e in entries)
        for name in ("snapshots", "crossed", "locked", "one_sided", "empty", "gaps", "tick_changes")
    }
    counted["longest_gap_ms"] = max(t.longest_gap_ms for e in entries for t in e.tokens)
    counted["mirror_pairs"] = sum(e.mirror_pairs for e in entries)
    counted["mirror_mismatches"] = sum(e.mirror_mismatches for e in entries)
    counted["tokens"] = len(books.tokens)
    assert counted == independent_counts(SHARED)
    assert counted == {
        "snapshots": 25_256, "crossed": 4, "locked": 2, "one_sided": 2_110, "empty": 0,
        "gaps": 663, "tick_changes": 16, "longest_gap_ms": 77_999, "mirror_pairs": 12_383,
        "mirror_mismatches": 11, "tokens": 24,
    }  # fmt: skip
    assert len(entries) == 12 and books.n_levels == 875_067
    assert sorted({t for e in entries for tok in e.tokens for t in tok.ticks}) == [0.001, 0.01]


@needs_shared
def test_the_bundled_tape_resolves_each_market_from_its_payouts_at_its_window_end() -> None:
    tape = import_resolvedkit(SHARED).tape
    assert tape is not None
    facts = {r["market_id"]: r for r in pq.read_table(SHARED / "markets.parquet").to_pylist()}
    assert [m.id for m in tape.markets] == sorted(facts, key=lambda m: facts[m]["start_ts"])
    for m, market in enumerate(tape.markets):
        fact = facts[market.id]
        assert market.outcomes == ("Up", "Down") and not market.is_binary
        assert (market.end_ts, market.close_ts) == (fact["end_ts"] // 1000,) * 2
        assert market.question == fact["question"] and market.category == "crypto"
        resolution = tape.resolutions[market.id]
        assert resolution.ts == fact["end_ts"] // 1000
        assert resolution.winner == ("Up" if fact["payout_up"] == 1.0 else "Down")
        assert market.covered_until == int(tape.times(m)[-1])
    assert tape.n_points == 11_555


@needs_shared
def test_reimporting_the_bundled_books_gives_the_embedded_files_byte_for_byte(
    tmp_path: Path,
) -> None:
    result = import_resolvedkit(SHARED / "books.parquet", SHARED / "markets.parquet")
    save_books(result.books, tmp_path / "btc15m.books", compress=True)
    assert (tmp_path / "btc15m.books").read_bytes() == sample_books_paths()[1].read_bytes()


def test_rows_in_any_order_give_the_same_books(tmp_path: Path) -> None:
    table = pq.read_table(sample_parquet(tmp_path))
    order = np.random.default_rng(0).permutation(table.num_rows)
    pq.write_table(table.take(pa.array(order)), tmp_path / "shuffled.parquet")
    first = import_columns(tmp_path / "books.parquet").books
    assert import_columns(tmp_path / "shuffled.parquet").books.hash == first.hash


# -- the generic form -------------------------------------------------------------------------


def sample_parquet(folder: Path) -> Path:
    """A small snapshot-per-row Parquet file in resolvedkit's column names."""
    table = pa.table({
        "market_id": ["m", "m", "m", "m"],
        "ts": [T0 + 1_000, T0, T0, T0 + 1_000],
        "side": ["Yes", "Yes", "No", "No"],
        "bid_px": [[0.49, 0.48], [0.48], [0.51], [0.5]],
        "bid_sz": [[1.0, 2.0], [5.0], [3.0], [2.0]],
        "ask_px": [[0.5], [0.49], [0.52], [0.51, 0.52]],
        "ask_sz": [[2.0], [3.0], [5.0], [1.0, 2.0]],
    })  # fmt: skip
    path = folder / "books.parquet"
    pq.write_table(table, path)
    return path


def test_a_parquet_file_with_a_row_per_snapshot(tmp_path: Path) -> None:
    result = import_columns(sample_parquet(tmp_path))
    books = result.books
    assert [(t.token, t.outcome, t.depth) for t in books.tokens] == [
        ("m:No", "No", "l2"), ("m:Yes", "Yes", "l2"),
    ]  # fmt: skip
    snap = books.book_at("m:Yes", T0 + 1_500)
    assert snap is not None and snap.bid_px.tolist() == [0.49, 0.48] and snap.ts == T0 + 1_000
    assert books.ticks == "inferred" and result.rows == 4


def write_csv(path: Path, header: str, *lines: str) -> Path:
    path.write_text("\n".join((header, *lines)) + "\n")
    return path


def test_a_csv_with_lists_quotes_or_levels(tmp_path: Path) -> None:
    lists = write_csv(
        tmp_path / "lists.csv", "market,outcome,token,ts,bid_px,bid_sz,ask_px,ask_sz",
        f'm,Yes,111,{T0},"[0.48, 0.47]","[10, 5]",[0.5],[3]',
        f"m,Yes,111,{T0 + 1000},[],[],[0.5],[3]",
    )  # fmt: skip
    books = import_columns(lists).books
    assert books.index == {"111": 0} and books.tokens[0].depth == "l2"
    assert books.book_at("111", T0 + 1_000).bid_px.size == 0  # type: ignore[union-attr]
    quotes = write_csv(
        tmp_path / "quotes.csv", "market,side,ts,bid_px,bid_sz,ask_px,ask_sz,tick",
        f"m,Yes,{T0 // 1000},0.48,10,0.5,3,0.01", f"m,Yes,{T0 // 1000 + 60},,,0.5,3,0.01",
    )  # fmt: skip
    books = import_columns(quotes, ts_unit="s").books
    assert books.tokens[0].depth == "l1" and books.ticks == "stated"
    assert books.quote(0) == (T0, 0.48, 10.0, 0.5, 3.0)
    assert books.columns.ts.tolist() == [T0, T0 + 60_000]
    levels = write_csv(
        tmp_path / "levels.csv", "market,outcome,ts,book,price,size",
        f"m,Yes,{T0 * 1000 + 1},ask,0.51,1", f"m,Yes,{T0 * 1000 + 1},bid,0.47,2",
        f"m,Yes,{T0 * 1000 + 1},ask,0.5,3", f"m,Yes,{T0 * 1000 + 1},bid,0.48,4",
    )  # fmt: skip
    books = import_columns(levels, ts_unit="us").books
    snap = books.book_at(0, T0 + 1)
    assert snap is not None and snap.ts == T0 + 1  # 1 µs past T0 is first seen at T0 + 1 ms
    assert (snap.bid_px.tolist(), snap.ask_px.tolist()) == ([0.48, 0.47], [0.5, 0.51])
    assert snap.bid_sz.tolist() == [4.0, 2.0] and books.book_at(0, T0) is None
    gz = tmp_path / "lists.csv.gz"
    gz.write_bytes(gzip.compress(lists.read_bytes()))
    assert import_columns(gz).books.hash == import_columns(lists).books.hash


def test_a_parquet_file_with_a_row_per_level_or_quotes(tmp_path: Path) -> None:
    pq.write_table(pa.table({
        "market": ["m"] * 3, "outcome": ["Yes"] * 3,
        "ts": pa.array([T0 * 1_000_000] * 3, pa.timestamp("ns")),
        "book": ["bid", "ask", "bid"], "price": [0.48, 0.5, 0.49], "size": [1.0, 2.0, 3.0],
    }), tmp_path / "levels.parquet")  # fmt: skip
    snap = import_columns(tmp_path / "levels.parquet").books.book_at(0, T0)
    assert snap is not None and snap.bid_px.tolist() == [0.49, 0.48]
    pq.write_table(pa.table({
        "market": ["m"], "outcome": ["Yes"], "ts": [T0], "bid_px": [0.4], "bid_sz": [9.0],
        "ask_px": [float("nan")], "ask_sz": [float("nan")],
    }), tmp_path / "quotes.parquet")  # fmt: skip
    books = import_columns(tmp_path / "quotes.parquet").books
    assert books.tokens[0].depth == "l1" and books.quote(0)[1:3] == (0.4, 9.0)


def test_a_snapshot_repeated_at_one_instant_is_collapsed_and_counted(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path / "dup.csv", "market,outcome,ts,bid_px,bid_sz,ask_px,ask_sz",
        f"m,Yes,{T0},[0.48],[1],[0.5],[1]", f"m,Yes,{T0},[0.48],[1],[0.5],[1]",
        f"m,Yes,{T0 + 5},[0.48],[1],[0.5],[1]", f"m,Yes,{T0 + 5},[0.47],[2],[0.5],[1]",
    )  # fmt: skip
    result = import_columns(path)
    assert (result.collapsed, result.replaced, result.books.n_snapshots) == (1, 1, 2)
    assert result.books.book_at(0, T0 + 5).best_bid == 0.47  # type: ignore[union-attr]
    assert len(result.notes) == 2


# -- hostile inputs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "fragment"),
    [
        ([f"m,Yes,{T0},[0.48],[-1],[0.5],[1]"],
         r"line 2 \(t=\d+ ms\)|line 2: bid size -1.0 at 0.48 is not positive"),
        ([f"m,Yes,{T0 + 9},[0.48],[1],[],[]", f'm,Yes,{T0},"[0.47, 0.48]","[1, 1]",[],[]'],
         "line 3: bid levels are not strictly falling"),
        ([f'm,Yes,{T0},[0.48],"[1, 2]",[],[]'], "line 2: 1 bid prices but 2 sizes"),
        ([f"m,Yes,{T0},[NaN],[1],[],[]"], "line 2: bid_px is not a list of numbers"),
        ([f"m,Yes,{T0},[1.5],[1],[],[]"], r"line 2: bid price 1.5 is not a price in \(0, 1\)"),
        ([f"m,Yes,{T0},[0.12345],[1],[],[]"], "line 2: prices fit none of the tick sizes"),
        (["m,Yes,soon,[0.48],[1],[],[]"], "line 2: ts 'soon' is not a whole number"),
        ([f",Yes,{T0},[0.48],[1],[],[]"], "line 2: market and outcome must be named"),
        ([f"m,Yes,{10**17},[0.48],[1],[],[]"], "line 2: instant is outside 1970-01-01..2100"),
        ([f'm,Yes,{T0},"{[0.5] * 10_001}","{[1] * 10_001}",[],[]'],
         "line 2: 10001 bid levels, more than a book may have"),
    ],
)  # fmt: skip
def test_a_bad_csv_row_is_one_line_naming_its_line(
    tmp_path: Path, lines: list[str], fragment: str
) -> None:
    path = write_csv(tmp_path / "bad.csv", "market,outcome,ts,bid_px,bid_sz,ask_px,ask_sz", *lines)
    with pytest.raises(TapeError) as caught:
        import_columns(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert re.search(fragment, message), message


def test_a_bad_parquet_input_is_one_line(tmp_path: Path) -> None:
    def table(**columns: Any) -> Path:
        base = {"market": ["m"], "outcome": ["Yes"], "ts": [T0], "bid_px": [[0.48]],
                "bid_sz": [[1.0]], "ask_px": [[0.5]], "ask_sz": [[1.0]]}  # fmt: skip
        path = tmp_path / f"bad-{len(list(tmp_path.iterdir()))}.parquet"
        pq.write_table(pa.table({**base, **columns}), path)
        return path

    cases = [
        (
            table(bid_px=[["0.48"]]),
            "column 'bid_px' is list<element: string>, not lists of numbers",
        ),
        (table(bid_sz=[[float("nan")]]), r"row 1 \(.*\)|row 1: bid size nan at 0.48"),
        (table(ts=[1.5]), "column 'ts' is double, not whole instants"),
        (table(market=[1]), "column 'market' is int64, not text"),
    ]
    for path, fragment in cases:
        with pytest.raises(TapeError) as caught:
            import_columns(path)
        assert re.search(fragment, str(caught.value)), caught.value
    path = table(bid_px=[[0.48] * 50_000], bid_sz=[[1.0] * 50_000])
    with pytest.raises(TapeError, match="its data decompresses to more than"):
        import_columns(path, max_bytes=100_000)  # refused before anything is read
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(TapeError, match=r"not a \.csv, \.csv\.gz or \.parquet file"):
        import_columns(tmp_path / "x.json")


def test_a_gzip_bomb_costs_nothing_past_the_cap(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.csv.gz"
    header = b"market,outcome,ts,bid_px,bid_sz,ask_px,ask_sz\n"
    bomb.write_bytes(gzip.compress(header + b" " * (8 << 20)))
    with pytest.raises(TapeError, match=r"decompresses to more than 1\.0 MiB"):
        import_columns(bomb, max_bytes=1 << 20)


def test_one_token_id_for_two_books_or_two_for_one_is_refused(tmp_path: Path) -> None:
    head = "market,outcome,token,ts,bid_px,bid_sz,ask_px,ask_sz"
    two_ids = write_csv(tmp_path / "a.csv", head, f"m,Yes,1,{T0},[],[],[],[]",
                        f"m,Yes,2,{T0 + 1},[],[],[],[]")  # fmt: skip
    with pytest.raises(TapeError, match="line 3: market m outcome 'Yes' is token '1' above"):
        import_columns(two_ids)
    one_id = write_csv(tmp_path / "b.csv", head, f"m,Yes,1,{T0},[],[],[],[]",
                       f"m,No,1,{T0},[],[],[],[]")  # fmt: skip
    with pytest.raises(TapeError, match="token 1 prices two books"):
        import_columns(one_id)


def test_a_level_given_twice_in_one_snapshot_is_refused(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "l.csv", "market,outcome,ts,book,price,size",
                     f"m,Yes,{T0},bid,0.48,1", f"m,Yes,{T0},bid,0.48,2",
                     f"m,Yes,{T0},middle,0.5,2")  # fmt: skip
    with pytest.raises(TapeError, match="line 4: book 'middle' is not bid or ask"):
        import_columns(path)
    path.write_text("\n".join(path.read_text().splitlines()[:3]) + "\n")
    with pytest.raises(TapeError, match=r"line 3: a second bid level at 0\.48 in one snapshot"):
        import_columns(path)


def test_resolvedkit_sides_and_markets_must_be_known(tmp_path: Path) -> None:
    books = tmp_path / "books.parquet"
    rows = {"market_id": ["m", "m"], "ts": [T0, T0], "side": ["UP", "SIDEWAYS"],
            "bid_px": [[0.4], [0.4]], "bid_sz": [[1.0], [1.0]], "ask_px": [[0.6], [0.6]],
            "ask_sz": [[1.0], [1.0]]}  # fmt: skip
    pq.write_table(pa.table(rows), books)
    facts = {"market_id": ["m"], "question": ["Q?"], "start_ts": [T0], "end_ts": [T0 + 900_000],
             "outcome_up": ["Up"], "outcome_down": ["Down"], "payout_up": [1.0],
             "payout_down": [0.0]}  # fmt: skip
    pq.write_table(pa.table(facts), tmp_path / "markets.parquet")
    with pytest.raises(TapeError, match="row 2: side 'SIDEWAYS' is neither UP nor DOWN"):
        import_resolvedkit(tmp_path)
    pq.write_table(pa.table({**facts, "market_id": ["other"]}), tmp_path / "markets.parquet")
    with pytest.raises(TapeError, match=r"row 1: market m is not in markets\.parquet"):
        import_resolvedkit(tmp_path)


def test_without_pyarrow_parquet_is_a_one_line_error_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(TapeError) as caught:
        import_columns(tmp_path / "books.parquet")
    assert str(caught.value) == (
        f"{tmp_path / 'books.parquet'}: reading Parquet needs pyarrow: pip install 'arena[parquet]'"
    )
    csv = write_csv(tmp_path / "ok.csv", "market,outcome,ts,bid_px,bid_sz,ask_px,ask_sz",
                    f"m,Yes,{T0},[0.48],[1],[0.5],[1]")  # fmt: skip
    assert import_columns(csv).books.n_snapshots == 1  # CSV needs nothing more


def test_json_cells_are_strict(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "s.csv", "market,outcome,ts,bid_px,bid_sz,ask_px,ask_sz",
                     f'm,Yes,{T0},"[""0.48""]",[1],[],[]')  # fmt: skip
    with pytest.raises(TapeError, match="line 2: bid_px is not a list of numbers"):
        import_columns(path)
