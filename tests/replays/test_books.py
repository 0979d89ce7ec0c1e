"""The book store and its file: as-of lookups, every validation rule on crafted books, the
coverage ledger's counts, and hostile ``.books`` files as one-line errors."""

from __future__ import annotations

import io
import mmap
import re
import struct
import zipfile
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replays.bookfile import is_books_file, load_books, recorded_hash, save_books
from replays.books import Books, Snapshot
from replays.errors import TapeError
from replays.tapefile import load_tape
from replays.validate_books import (
    COLUMN_DTYPES,
    MAX_LEVELS,
    BookToken,
    Columns,
    infer_ticks,
    ledger,
)

T0 = 1_790_587_077_000  # 2026-09-28 09:17:57 UTC, in ms
YES = BookToken(token="y", market="m", outcome="Yes")
NO = BookToken(token="n", market="m", outcome="No")

Series = list[tuple[int, list[tuple[float, float]], list[tuple[float, float]]]]


def book(series: dict[str, Series], tokens: tuple[BookToken, ...] = (YES, NO), **kw: Any) -> Books:
    return Books.from_snapshots(tokens, series, **kw)


def two_sided(at: int, bid: float = 0.48, ask: float = 0.50) -> tuple[int, Any, Any]:
    return (
        at,
        [(bid, 10.0), (round(bid - 0.01, 2), 5.0)],
        [(ask, 3.0), (round(ask + 0.01, 2), 7.0)],
    )


def columns_of(books: Books, **changes: np.ndarray) -> Columns:
    """A store's columns, writable copies, with some replaced."""
    return Columns(*(np.array(c) for c in books.columns))._replace(**changes)


def raises_line(fragment: str) -> Any:
    return pytest.raises(TapeError, match=fragment)


# -- lookups ----------------------------------------------------------------------------------


def test_a_book_is_the_latest_snapshot_at_or_before_the_instant_never_after() -> None:
    books = book({"y": [two_sided(T0), two_sided(T0 + 1_000, 0.47, 0.49)]})
    k = books.index["y"]
    assert books.asof(k, T0 - 1) == -1 and books.book_at("y", T0 - 1) is None
    assert books.asof(k, T0) == 0 and books.asof(k, T0 + 999) == 0
    assert books.asof(k, T0 + 1_000) == 1 and books.asof(k, 10**15) == 1
    snap = books.book_at(k, T0 + 1_500)
    assert isinstance(snap, Snapshot) and snap.ts == T0 + 1_000
    assert (snap.best_bid, snap.best_ask, snap.tick) == (0.47, 0.49, 0.01)
    assert snap.bid_px.tolist() == [0.47, 0.46] and snap.ask_sz.tolist() == [3.0, 7.0]
    assert snap.spread == pytest.approx(0.02) and snap.mid == pytest.approx(0.48)
    assert not (snap.crossed or snap.locked or snap.one_sided)
    assert snap.quote == books.quote(1) == (T0 + 1_000, 0.47, 10.0, 0.49, 3.0)
    assert not snap.bid_px.flags.writeable  # a plugin cannot rewrite the book it is handed
    # past the recording, a book older than max_age_ms is no book
    assert books.book_at(k, T0 + 60_000, max_age_ms=5_000) is None
    assert books.book_at(k, T0 + 3_000, max_age_ms=5_000).row == snap.row  # type: ignore[union-attr]
    # the other token has no snapshot at all
    assert books.book_at("n", T0 + 1_000) is None and books.span(books.index["n"]) is None


def test_tokens_are_found_by_market_and_outcome_or_by_id() -> None:
    books = book({"y": [two_sided(T0)], "n": [two_sided(T0)]})
    assert books.token("m", "No") == books.index["n"] == 1
    with raises_line(r"^<memory>: no book for market m outcome 'Maybe'$"):
        books.token("m", "Maybe")
    with raises_line("no token 'x'"):
        books.book_at("x", T0)


def test_l1_quotes_live_in_the_same_store() -> None:
    quote = BookToken(token="q", market="k", outcome="Yes", depth="l1")
    books = book({"q": [(T0, [(0.4, 100.0)], [(0.42, 50.0)]), (T0 + 60_000, [], [(0.45, 1.0)])]},
                 (quote,))  # fmt: skip
    assert books.tokens[0].depth == "l1"
    touch = books.quote(1)
    assert np.isnan(touch.bid) and touch[2:] == (0.0, 0.45, 1.0) and touch.ts == T0 + 60_000
    bid, bid_sz, _, _ = books.quotes(np.array([0, 1]))
    assert bid[0] == 0.4 and np.isnan(bid[1]) and bid_sz.tolist() == [100.0, 0.0]
    with raises_line("token q: row 0 .*: 2 bid levels, more than an l1 .* book may have \\(1\\)"):
        book({"q": [(T0, [(0.4, 1.0), (0.39, 1.0)], [])]}, (quote,))


def test_depths_are_dollars_resting_on_each_side() -> None:
    books = book({"y": [two_sided(T0), (T0 + 1, [], [(0.5, 2.0)])]})
    bid, ask = books.depths(np.array([0, 1]))
    assert bid.tolist() == pytest.approx([0.48 * 10 + 0.47 * 5, 0.0])
    assert ask.tolist() == pytest.approx([0.5 * 3 + 0.51 * 7, 1.0])


instants = st.lists(st.integers(0, 10_000), min_size=0, max_size=40, unique=True).map(sorted)
some = st.lists(st.integers(0, 10_000), min_size=1, max_size=40, unique=True).map(sorted)


@settings(max_examples=150, deadline=None)
@given(
    series=st.tuples(some, st.lists(instants, max_size=3)).map(lambda s: [s[0], *s[1]]),
    queries=st.lists(st.integers(-5, 10_005), min_size=1, max_size=60),
)
def test_asof_returns_the_latest_snapshot_with_ts_at_most_t(
    series: list[list[int]], queries: list[int]
) -> None:
    tokens = tuple(
        BookToken(token=f"t{j}", market=f"m{j}", outcome="Yes") for j in range(len(series))
    )
    books = book({f"t{j}": [(T0 + t, [(0.5, 1.0)], []) for t in ts] for j, ts in enumerate(series)},
                 tokens)  # fmt: skip
    asked_k, asked_t, expected = [], [], []
    for k, ts in enumerate(series):
        first = books.columns.offsets[k]
        for q in queries:
            t = T0 + q
            before = [i for i, s in enumerate(ts) if T0 + s <= t]
            want = int(first) + before[-1] if before else -1
            row = books.asof(k, t)
            assert row == want
            if row >= 0:  # never a snapshot after the instant, and no later one at or before it
                assert books.columns.ts[row] <= t
                assert row + 1 == books.columns.offsets[k + 1] or books.columns.ts[row + 1] > t
                snap = books.book_at(k, t)
                assert snap is not None and snap.ts <= t and snap.token == tokens[k]
            asked_k.append(k)
            asked_t.append(t)
            expected.append(want)
    assert books.asof_many(np.array(asked_k), np.array(asked_t)).tolist() == expected
    walk = books.walk(np.arange(len(series)))
    for q in sorted(set(queries)):
        rows = walk.advance(T0 + q)
        assert rows.tolist() == [books.asof(k, T0 + q) for k in range(len(series))]


# -- faults: every rule on crafted books ------------------------------------------------------


@pytest.mark.parametrize(
    ("series", "fragment"),
    [
        ({"y": [two_sided(T0), two_sided(T0)]},
         r"token y: row 1 \(t=1790587077000 ms\): a second snapshot at the same instant"),
        ({"y": [two_sided(T0 + 5), two_sided(T0)]}, r"token y: row 1 .*: unsorted"),
        ({"y": [two_sided(-1)]}, r"row 0 .*: instant is outside 1970-01-01..2100-01-01"),
        ({"y": [(T0, [(float("nan"), 1.0)], [])]}, r"row 0 .*: bid price nan is not a price"),
        ({"y": [(T0, [], [(float("inf"), 1.0)])]}, r"ask price inf is not a price in \(0, 1\)"),
        ({"y": [(T0, [(1.0, 1.0)], [])]}, r"bid price 1.0 is not a price in \(0, 1\)"),
        ({"y": [(T0, [], [(0.0, 1.0)])]}, r"ask price 0.0 is not a price in \(0, 1\)"),
        ({"y": [(T0, [(0.5, -3.0)], [])]}, r"bid size -3.0 at 0.5 is not positive"),
        ({"y": [(T0, [], [(0.5, 0.0)])]}, r"ask size 0.0 at 0.5 is not positive"),
        ({"y": [(T0, [(0.5, float("nan"))], [])]}, r"bid size nan at 0.5 is not positive"),
        ({"y": [(T0, [(0.47, 1.0), (0.48, 1.0)], [])]},
         r"bid levels are not strictly falling from the best \(0.47 then 0.48\)"),
        ({"y": [(T0, [], [(0.52, 1.0), (0.52, 2.0)])]},
         r"ask levels are not strictly rising from the best \(0.52 then 0.52\)"),
        ({"y": [(T0, [], [(0.52, 1.0), (0.51, 2.0)])]}, r"ask levels are not strictly rising"),
    ],
)  # fmt: skip
def test_a_fault_is_one_line_naming_the_token_and_row(
    series: dict[str, Series], fragment: str
) -> None:
    with pytest.raises(TapeError, match=fragment) as caught:
        book(series, tick=0.01)
    assert "\n" not in str(caught.value) and str(caught.value).startswith("<memory>: token y: ")


def test_prices_must_be_on_the_snapshots_tick_grid() -> None:
    with raises_line(r"row 0 .*: bid price 0.485 is off the tick grid \(0.01\)"):
        book({"y": [(T0, [(0.485, 1.0)], [])]}, tick=0.01)
    assert book({"y": [(T0, [(0.485, 1.0)], [])]}, tick=0.001).columns.tick.tolist() == [0.001]
    with raises_line(
        r"^<memory>: row 0: prices fit none of the tick sizes 0.1, 0.01, 0.001, 0.0001$"
    ):
        book({"y": [(T0, [(0.12345, 1.0)], [])]})  # inferred: no tick explains it
    for tick in (0.0, 0.5, float("nan")):
        with raises_line(f"row 0 .*: tick {tick} is not in \\(0, 0.1\\]"):
            book({"y": [(T0, [(0.5, 1.0)], [])]}, tick=tick)


def test_ticks_are_inferred_coarsest_first_and_carried_over_empty_snapshots() -> None:
    px = np.array([0.5, 0.4, 0.49, 0.48, 0.485, 0.5, 0.0001])
    counts = np.array([2, 2, 2, 0, 1])
    assert infer_ticks(px, counts)[:3].tolist() == [0.1, 0.01, 0.001]
    assert np.isnan(infer_ticks(px, counts)[3])
    books = book({
        "y": [(T0, [], []), (T0 + 1, [(0.49, 1.0)], [(0.5, 1.0)]), (T0 + 2, [], []),
              (T0 + 3, [(0.985, 1.0)], [(0.986, 1.0)])],
        "n": [(T0, [], [])],
    })  # fmt: skip
    # the first empty snapshot takes the next's tick, the second the one before it; a token with
    # no price at all the finest
    assert books.columns.tick.tolist() == [0.01, 0.01, 0.01, 0.001, 0.0001]


def test_more_levels_than_a_book_can_have_is_refused_by_row() -> None:
    base = book({"y": [two_sided(T0), two_sided(T0 + 1)]})
    claim = columns_of(base, bid_offsets=np.array([0, 10**9, 4]))
    with raises_line(
        r"token y: row 0 .*: 1000000000 bid levels, more than a book may have \(10000\)"
    ):
        Books(base.tokens, claim)
    levels = MAX_LEVELS + 1
    wide = columns_of(
        base, bid_offsets=np.array([0, levels, levels]), bid_px=np.linspace(0.9, 0.1, levels),
        bid_sz=np.ones(levels), ts=np.array([T0, T0 + 1]),
    )  # fmt: skip
    with raises_line("10001 bid levels, more than a book may have"):
        Books(base.tokens, wide)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"offsets": np.array([0, 2])}, "offsets has 2 entries for 2 tokens"),
        ({"offsets": np.array([0, 3, 2])}, "snapshot offsets do not match|decrease"),
        ({"offsets": np.array([0, 2, 1])}, "snapshot offsets do not match the snapshots"),
        ({"tick": np.array([0.01])}, "1 ticks for 2 snapshots"),
        ({"bid_offsets": np.array([0, 2])}, "bid_offsets has 2 entries for 2 snapshots"),
        ({"ask_sz": np.array([1.0])}, "4 ask prices but 1 sizes"),
        ({"ask_offsets": np.array([0, 2, 5])}, "ask level offsets do not match the ask levels"),
        ({"bid_offsets": np.array([0, 5, 4])}, r"row 1 .*: bid level offsets decrease"),
    ],
)
def test_columns_that_do_not_fit_together_are_corrupt(
    change: dict[str, np.ndarray], fragment: str
) -> None:
    base = book({"y": [two_sided(T0), two_sided(T0 + 1)]})
    with raises_line(fragment):
        Books(base.tokens, columns_of(base, **change))


@pytest.mark.parametrize(
    ("tokens", "ticks", "fragment"),
    [
        ((), "inferred", "no tokens: an empty book file"),
        ((YES, YES), "inferred", "token y: listed twice"),
        ((YES, BookToken(token="z", market="m", outcome="Yes")), "inferred",
         "token z: market m has two books for outcome 'Yes'"),
        ((BookToken(token="y", market="m", outcome="Yes", depth="l3"),), "inferred",
         "depth 'l3' is not one of l2, l1"),
        ((BookToken(token="y", market="", outcome="Yes"),), "inferred", "must all be named"),
        ((YES,), "guessed", "ticks 'guessed' is not one of inferred, stated"),
    ],
)  # fmt: skip
def test_a_bad_header_is_refused(tokens: tuple[BookToken, ...], ticks: str, fragment: str) -> None:
    base = book({"y": [two_sided(T0)]}, (YES,))
    with raises_line(fragment):
        Books(tokens, base.columns, ticks=ticks)


def test_no_snapshot_at_all_is_an_empty_book_file() -> None:
    with raises_line("no snapshots: an empty book file"):
        book({})


# -- flags: the coverage ledger ---------------------------------------------------------------


def flagged() -> Books:
    """Yes: two-sided, crossed, locked, one-sided, empty, a 0.001 tick, a 20 s gap; No: the
    mirror of Yes at three of its instants (one of them not a mirror), and one of its own."""
    yes: Series = [
        two_sided(T0),  # bids .48 .47, asks .50 .51
        (T0 + 1_000, [(0.51, 1.0)], [(0.50, 1.0)]),  # crossed
        (T0 + 2_000, [(0.49, 1.0)], [(0.49, 2.0)]),  # locked
        (T0 + 3_000, [(0.49, 1.0)], []),  # one-sided
        (T0 + 4_000, [], []),  # empty
        (T0 + 24_000, [(0.985, 1.0)], [(0.987, 1.0)]),  # after a 20 s gap; tick 0.001
        (T0 + 25_000, [(0.98, 1.0)], [(0.99, 1.0)]),  # back to 0.01
    ]
    no: Series = [
        (T0, [(0.50, 3.0), (0.49, 7.0)], [(0.52, 10.0), (0.53, 5.0)]),  # the mirror
        (T0 + 1_000, [(0.50, 1.0)], [(0.49, 1.0)]),  # mirror of the crossed book, crossed too
        (T0 + 2_000, [(0.51, 2.0)], [(0.51, 9.0)]),  # a size differs: not a mirror
        (T0 + 2_500, [(0.40, 1.0)], [(0.60, 1.0)]),  # no Yes snapshot at this instant
    ]
    return book({"y": yes, "n": no})


def test_the_ledger_counts_flags_and_keeps_every_book() -> None:
    books = flagged()
    [entry] = ledger(books, gap_seconds=10)
    assert books.n_snapshots == 11  # nothing dropped
    yes, no = entry.tokens
    assert (yes.token, yes.snapshots, yes.first_ts, yes.last_ts) == ("y", 7, T0, T0 + 25_000)
    assert (yes.crossed, yes.locked, yes.one_sided, yes.empty) == (1, 1, 1, 1)
    assert (yes.gaps, yes.longest_gap_ms) == (1, 20_000)
    assert yes.tick_changes == 2 and yes.ticks == [0.001, 0.01]
    assert (no.crossed, no.locked, no.one_sided, no.empty, no.gaps) == (1, 1, 0, 0, 0)
    assert (entry.mirror_pairs, entry.mirror_mismatches) == (3, 1)
    summary = entry.as_dict()
    assert (summary["snapshots"], summary["crossed"], summary["locked"]) == (11, 2, 2)
    assert ledger(books, gap_seconds=25)[0].tokens[0].gaps == 0


def test_a_market_with_one_token_has_no_mirror_to_check() -> None:
    [entry] = ledger(book({"y": [two_sided(T0)]}, (YES,)))
    assert (entry.mirror_pairs, entry.mirror_mismatches) == (0, 0)


# -- the file ---------------------------------------------------------------------------------


def test_a_file_round_trips_with_the_same_hash_either_way(tmp_path: Path) -> None:
    books = flagged()
    plain, packed = tmp_path / "a.books", tmp_path / "b.books"
    save_books(books, plain)
    save_books(books, packed, compress=True)
    for path in (plain, packed):
        again = load_books(path, verify=True)
        assert again.hash == books.hash == recorded_hash(path)
        assert all(np.array_equal(a, b) for a, b in zip(again.columns, books.columns, strict=True))
        assert again.tokens == books.tokens and again.ticks == "inferred"
    save_books(books, tmp_path / "c.books")
    assert (tmp_path / "c.books").read_bytes() == plain.read_bytes()  # reproducible bytes
    assert packed.stat().st_size < plain.stat().st_size
    assert is_books_file(plain) and not is_books_file(tmp_path / "nothing")


def test_attribution_is_content(tmp_path: Path) -> None:
    plain = book({"y": [two_sided(T0)]}, (YES,))
    credited = book({"y": [two_sided(T0)]}, (YES,), attribution="Data: someone, CC BY 4.0.")
    assert plain.hash != credited.hash
    save_books(credited, tmp_path / "c.books")
    assert load_books(tmp_path / "c.books").attribution == "Data: someone, CC BY 4.0."


def test_a_stored_file_is_mapped_aligned_and_checked_token_by_token(tmp_path: Path) -> None:
    good = book({"y": [two_sided(T0)], "n": [two_sided(T0)]})
    bad_sizes = np.array(good.columns.ask_sz)
    bad_sizes[-1] = -1.0  # the last ask of the No token's only snapshot
    bad = Books(good.tokens, columns_of(good, ask_sz=bad_sizes), lazy=True)
    path = tmp_path / "bad.books"
    save_books(bad, path)
    books = load_books(path)  # opens: nothing of a token is read until it is used
    assert books.checked == 0
    for column in books.columns:
        assert not column.flags.writeable and column.ctypes.data % 64 == 0
        base: Any = column
        while isinstance(base, np.ndarray):
            base = base.base
        assert isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)  # not a copy
    assert books.book_at("y", T0) is not None and books.checked == 1
    with pytest.raises(TapeError, match="token n: row 1"):
        books.quotes(np.array([1]))  # rows of a token not used yet are checked first too
    message = f"{path}: token n: row 1 (t={T0} ms): ask size -1.0 at 0.51 is not positive"
    with pytest.raises(TapeError) as caught:
        books.book_at("n", T0)
    assert str(caught.value) == message
    with pytest.raises(TapeError, match=r"ask size -1\.0"):
        load_books(path, verify=True)


# -- hostile files ----------------------------------------------------------------------------


def npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=True)
    return buf.getvalue()


def claiming(shape: tuple[int, ...], data: np.ndarray) -> bytes:
    """A ``.npy`` member whose header states ``shape`` but which holds ``data``'s bytes."""
    buf = io.BytesIO()
    header = {"descr": data.dtype.str, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(buf, header)
    return buf.getvalue() + data.tobytes()


def write_members(path: Path, members: dict[str, bytes], *, stored: bool = True) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data, zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED)
    return path


def members_of(books: Books) -> dict[str, bytes]:
    meta = {
        "format": "arena-books",
        "version": 1,
        "tokens": [msgspec.to_builtins(t) for t in books.tokens],
    }
    out = {"meta.json": msgspec.json.encode(meta)}
    for (name, dtype), column in zip(COLUMN_DTYPES, books.columns, strict=True):
        out[f"{name}.npy"] = npy(np.asarray(column, dtype=dtype))
    return out


def hostile(tmp_path: Path) -> dict[str, Path]:
    """One file per way a book file can lie; each must be a one-line error."""
    base = book({"y": [two_sided(T0), two_sided(T0 + 1)]}, (YES,))
    good = members_of(base)
    files: dict[str, Path] = {}

    def variant(name: str, changes: dict[str, bytes], stored: bool = True) -> None:
        files[name] = write_members(tmp_path / f"{name}.books", {**good, **changes}, stored=stored)

    variant("object-dtype", {"bid_px.npy": npy(np.array([0.48, "x", None, 1], dtype=object))})
    variant("float32", {"bid_px.npy": npy(np.zeros(4, dtype="<f4"))})
    variant("big-endian", {"ts.npy": npy(np.array([T0, T0 + 1], dtype=">i8"))})
    variant("two-d", {"ts.npy": npy(np.array([[T0, T0 + 1]], dtype="<i8"))})
    variant("claims-more", {"ask_sz.npy": claiming((9,), np.zeros(4))})
    variant("claims-1e9", {"bid_sz.npy": claiming((10**9,), np.zeros(4))})
    variant("not-npy", {"tick.npy": b"hello"})
    unsorted = np.array([T0 + 5, T0], dtype="<i8")
    variant("unsorted", {"ts.npy": npy(unsorted)})
    nan = np.asarray(base.columns.ask_px).copy()
    nan[0] = np.nan
    variant("nan", {"ask_px.npy": npy(nan)})
    negative = np.asarray(base.columns.bid_sz).copy()
    negative[1] = -5
    variant("negative-size", {"bid_sz.npy": npy(negative)})
    levels = np.asarray(base.columns.bid_offsets).copy()
    levels[1] = 10**9
    variant("levels-1e9", {"bid_offsets.npy": npy(levels)})
    variant("bomb", {"bid_px.npy": npy(np.zeros(1 << 20))}, stored=False)  # 8 MB of zeros
    variant("bad-meta", {"meta.json": b"{not json"})
    variant("wrong-format", {"meta.json": b'{"format":"arena-tape","version":1,"tokens":[]}'})
    files["missing-member"] = write_members(
        tmp_path / "missing-member.books", {k: v for k, v in good.items() if k != "tick.npy"}
    )
    files["not-a-zip"] = tmp_path / "not-a-zip.books"
    files["not-a-zip"].write_bytes(b"PK\x03\x04 nonsense")
    files["text"] = tmp_path / "text.books"
    files["text"].write_text("hello")
    save_books(base, tmp_path / "whole.books")
    raw = (tmp_path / "whole.books").read_bytes()
    files["truncated"] = tmp_path / "truncated.books"
    files["truncated"].write_bytes(raw[: len(raw) // 2] + raw[-200:])
    tampered = bytearray(raw)
    data = load_books(tmp_path / "whole.books").columns.bid_sz
    offset = raw.index(np.asarray(data).tobytes())
    tampered[offset : offset + 8] = struct.pack("<d", 11.0)  # 10 shares become 11: still valid
    files["tampered"] = tmp_path / "tampered.books"
    files["tampered"].write_bytes(bytes(tampered))
    return files


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("object-dtype", "bid_px.npy is |O(4,), not 1-D <f8"),
        ("float32", "bid_px.npy is <f4(4,), not 1-D <f8"),
        ("big-endian", "ts.npy is >i8(2,), not 1-D <i8"),
        ("two-d", "ts.npy is <i8(1, 2), not 1-D <i8"),
        ("claims-more", "ask_sz.npy claims 9 values (72 bytes) but holds 32 bytes"),
        ("claims-1e9", "bid_sz.npy claims 1000000000 values (8000000000 bytes) but holds 32"),
        ("not-npy", "tick.npy has a bad .npy header"),
        ("unsorted", r"token y: row 1 \(t=1790587077000 ms\): unsorted"),
        ("nan", r"token y: row 0 .*: ask price nan is not a price in \(0, 1\)"),
        ("negative-size", r"token y: row 0 .*: bid size -5.0 at 0.47 is not positive"),
        ("levels-1e9", "token y: row 0 .*: 1000000000 bid levels, more than a book may have"),
        ("bomb", "bid_px.npy decompresses to more than 1.0 MiB"),
        ("bad-meta", "bad book file header"),
        ("wrong-format", "not an arena-books v1 file .format='arena-tape'"),
        ("missing-member", "corrupt or unreadable book file: \"There is no item named 'tick.npy'"),
        ("not-a-zip", "corrupt or unreadable book file"),
        ("text", "not a book file .not a zip."),
        ("truncated", "corrupt or unreadable book file"),
        ("tampered", "content hash mismatch"),
    ],
)
def test_a_hostile_book_file_is_one_line_naming_the_file(
    tmp_path: Path, name: str, fragment: str
) -> None:
    path = hostile(tmp_path)[name]
    with pytest.raises(TapeError) as caught:
        load_books(path, verify=True, max_bytes=1 << 20)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert fragment in message or re.search(fragment, message), message


def test_nothing_past_the_size_cap_is_mapped_or_read(tmp_path: Path) -> None:
    books = book({"y": [two_sided(T0 + k) for k in range(2_000)]}, (YES,))
    path = tmp_path / "big.books"
    save_books(books, path)
    # the columns before bid_px fit in 60 kB, bid_px (32 kB) no longer does
    with raises_line(f"^{path}: bid_px.npy decompresses to more than 0.1 MiB"):
        load_books(path, max_bytes=60_000)
    assert load_books(path, max_bytes=1 << 20).n_snapshots == 2_000


def test_a_header_that_miscounts_its_snapshots_is_refused(tmp_path: Path) -> None:
    base = book({"y": [two_sided(T0)]}, (YES,))
    members = members_of(base)
    meta = msgspec.json.decode(members["meta.json"])
    members["meta.json"] = msgspec.json.encode({**meta, "snapshots": 5})
    path = write_members(tmp_path / "count.books", members)
    with raises_line("the header counts 5 snapshots, the columns hold 1"):
        load_books(path)


def test_a_tape_and_a_book_file_are_never_taken_for_each_other(tmp_path: Path) -> None:
    save_books(book({"y": [two_sided(T0)]}, (YES,)), tmp_path / "x.books")
    with raises_line("x.books: bad tape header"):
        load_tape(tmp_path / "x.books")
    from replays.samples import sample_path

    with raises_line("not an arena-books v1 file .format='arena-tape'"):
        load_books(sample_path())
    with raises_line("a book file's name ends in .books"):
        save_books(book({"y": [two_sided(T0)]}, (YES,)), tmp_path / "x.tape")
