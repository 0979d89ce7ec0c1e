"""`arena tapes record books`: the market channel recorded into a journal and a `.books` file,
against a local WebSocket + CLOB server replaying real books in the documented shapes."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from replays.book_recorder import (
    JOURNAL,
    RecordBooksOptions,
    RecordedToken,
    build_books,
    lookup_tokens,
    record_books,
)
from replays.book_stream import BookState, book_hash, parse_rest_book
from replays.errors import TapeError
from replays.http import FetchError, JsonFetcher, RetryPolicy

pytest.importorskip("websockets")

from tests.ws_books_server import FeedServer, sample_tokens

FAST = RetryPolicy(max_retries=1, base_delay=0.01, max_delay=0.05)


def _tokens(server: FeedServer) -> list[RecordedToken]:
    return [RecordedToken(t.token, t.market, t.outcome) for t in server.tokens]


def _record(server: FeedServer, directory: Path, seconds: float = 1.5, **kw: object):
    return record_books(
        directory,
        _tokens(server),
        RecordBooksOptions(duration=seconds, **kw),  # type: ignore[arg-type]
        ws_url=server.ws_url,
        policy=FAST,
    )


def _journal(directory: Path) -> list[dict]:
    return [json.loads(line) for line in (directory / JOURNAL).read_text().splitlines()]


def _expected(server: FeedServer) -> dict[str, list[tuple[int, list, list]]]:
    """Every snapshot of the script, per token: what the recording must hold."""
    out = {}
    for t in server.tokens:
        rows, last = [], None
        for ts, bids, asks in t.snapshots:
            key = (bids, asks)
            if key != last:  # an unchanged book is no new snapshot
                rows.append((ts, [float(p) for p, _ in bids], [float(p) for p, _ in asks]))
            last = key
        out[t.token] = rows
    return out


def test_a_recording_holds_every_book_the_feed_made(tmp_path: Path) -> None:
    with FeedServer(sample_tokens(snapshots=25)) as server:
        summary = _record(server, tmp_path / "rec")
    assert summary.reconnects == 0 and summary.feed.refused == 0
    assert summary.feed.trades > 0  # last_trade_price events were read, and not written
    built = build_books(tmp_path / "rec").books
    expected = _expected(server)
    for token, rows in expected.items():
        k = built.index[token]
        sl = built.rows(k)
        assert sl.stop - sl.start == len(rows)
        for row, (ts, bids, asks) in zip(range(sl.start, sl.stop), rows, strict=True):
            snap = built.snapshot(row)
            assert snap.ts == ts
            assert snap.bid_px.tolist() == bids and snap.ask_px.tolist() == asks
    # the recorded books equal the sample's, level for level, sizes included
    t = server.tokens[0]
    snap = built.book_at(t.token, t.snapshots[10][0])
    assert snap is not None
    assert snap.bid_sz.tolist() == [float(s) for _, s in t.snapshots[10][1]]


def test_a_dropped_connection_resumes_without_a_gap_or_a_duplicate(tmp_path: Path) -> None:
    with FeedServer(sample_tokens(snapshots=25)) as whole:
        _record(whole, tmp_path / "whole")
    with FeedServer(sample_tokens(snapshots=25), drop_before={7, 19, 33}) as cut:
        summary = _record(cut, tmp_path / "cut")
    assert summary.reconnects == 3 and cut.connections == 4
    assert _journal(tmp_path / "cut") == _journal(tmp_path / "whole")


def test_a_rerun_resumes_the_journal(tmp_path: Path) -> None:
    """A second run over the same directory (the server sends every book again on subscribe)
    appends only what is new; a torn last line from a kill is cut off first."""
    with FeedServer(sample_tokens(snapshots=20)) as server:
        _record(server, tmp_path / "rec")
    lines = _journal(tmp_path / "rec")
    journal = tmp_path / "rec" / JOURNAL
    journal.write_bytes(journal.read_bytes() + b'{"token": "torn')
    with FeedServer(sample_tokens(snapshots=20)) as again:
        summary = _record(again, tmp_path / "rec")
    assert summary.resumed == len(lines) and summary.written == 0
    assert _journal(tmp_path / "rec") == lines


def test_a_lost_message_is_repaired_by_the_rest_check(tmp_path: Path) -> None:
    tokens = sample_tokens(snapshots=25)
    with FeedServer(tokens) as probe:
        changes = [i for i, e in enumerate(probe.events) if e["event_type"] == "price_change"]
    with FeedServer(tokens, lose={changes[-1]}) as server:
        fetcher = JsonFetcher(__import__("httpx").Client(timeout=5), FAST)
        summary = record_books(
            tmp_path / "rec", _tokens(server), RecordBooksOptions(duration=1.5, check_every=0.5),
            ws_url=server.ws_url, clob_url=server.clob_url, fetcher=fetcher, policy=FAST,
        )  # fmt: skip
    assert summary.rest_checks > 0 and summary.rest_hash_failures == 0
    assert summary.rest_resyncs == 1
    last = {r["token"]: r for r in _journal(tmp_path / "rec")}
    for t in tokens:  # after the repair each token's last book is the script's last
        _, bids, asks = t.snapshots[-1]
        assert [float(p) for p, _ in last[t.token]["bids"]] == [float(p) for p, _ in bids]
        assert [float(p) for p, _ in last[t.token]["asks"]] == [float(p) for p, _ in asks]
    assert any(r["via"] == "rest" for r in _journal(tmp_path / "rec"))


def test_the_command_records_and_writes_a_books_file(tmp_path: Path) -> None:
    from arena.cli import cli as main

    with FeedServer(sample_tokens(snapshots=15)) as server:
        market = server.tokens[0].market
        out = tmp_path / "btc.books"
        result = CliRunner().invoke(main, [
            "tapes", "record", "books", "--market", market, "--out", str(out),
            "--duration", "1.5", "--ws-url", server.ws_url, "--clob-url", server.clob_url,
            "--check-every", "0.5", "--json",
        ])  # fmt: skip
    assert result.exit_code == 0, result.output
    facts = json.loads(result.output)
    assert facts["tokens"] == 2 and facts["reconnects"] == 0 and facts["snapshots"] > 0
    shown = CliRunner().invoke(main, ["tapes", "validate", str(out), "--json"])
    assert shown.exit_code == 0, shown.output


def test_the_clob_lists_each_markets_tokens(tmp_path: Path) -> None:
    import httpx

    with FeedServer(sample_tokens(snapshots=3)) as server:
        fetcher = JsonFetcher(httpx.Client(timeout=5), FAST)
        market = server.tokens[0].market
        found = lookup_tokens(fetcher, server.clob_url, [market])
        assert {(t.market, t.outcome) for t in found} == {(market, "Up"), (market, "Down")}
        assert {t.token for t in found} == {t.token for t in server.tokens}
        with pytest.raises(FetchError, match="404"):  # well formed, but not listed
            lookup_tokens(fetcher, server.clob_url, ["0x" + "ab" * 32])


class NoNetwork:
    """A fetcher that fails the test if anything is asked of it."""

    def get_json(self, url: str) -> object:
        raise AssertionError(f"asked {url}")


@pytest.mark.parametrize(
    "bad", ["0x…", "0x5f65…f8f1", "5f" * 32, "0x" + "ab" * 31, "0x" + "g" * 64]
)
def test_a_malformed_condition_id_is_refused_before_any_request(bad: str) -> None:
    good = "0x" + "ab" * 32
    with pytest.raises(TapeError) as refused:  # the good id first: nothing is fetched for it
        lookup_tokens(NoNetwork(), "http://127.0.0.1:9", [good, bad])  # type: ignore[arg-type]
    assert str(refused.value) == f"market {bad!r} is not a condition id (0x and 64 hex digits)"


def test_the_command_names_the_expected_shape_in_one_line(tmp_path: Path) -> None:
    from arena.cli import cli as main

    result = CliRunner().invoke(main, [
        "tapes", "record", "books", "--market", "0x…", "--out", str(tmp_path / "x.books"),
        "--clob-url", "http://127.0.0.1:9",
    ])  # fmt: skip
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert result.output.strip() == (
        "Error: market '0x…' is not a condition id (0x and 64 hex digits)"
    )
    assert not (tmp_path / "x.books").exists()


# -- the feed's messages, one rule at a time --------------------------------------------------


def _state() -> BookState:
    return BookState({"A": "m"})


def test_a_price_change_sets_a_levels_total_and_zero_removes_it() -> None:
    state = _state()
    book = {"event_type": "book", "asset_id": "A", "market": "m", "timestamp": "1000",
            "bids": [{"price": ".48", "size": "30"}, {"price": ".50", "size": "15"}],
            "asks": [{"price": ".52", "size": "25"}]}  # fmt: skip
    (first,) = state.apply(book)
    assert first.bids == (("0.50", "15"), ("0.48", "30")) and first.asks == (("0.52", "25"),)
    gone = {"asset_id": "A", "price": "0.5", "size": "0", "side": "BUY"}
    new = {"asset_id": "A", "price": "0.51", "size": "7", "side": "SELL"}
    change = {"event_type": "price_change", "market": "m", "timestamp": "2000",
              "price_changes": [gone, new]}  # fmt: skip
    (after,) = state.apply(change)
    assert after.ts == 2000
    assert after.bids == (("0.48", "30"),)
    assert after.asks == (("0.51", "7"), ("0.52", "25"))


def test_a_tick_change_is_kept_with_the_book() -> None:
    state = _state()
    state.apply({"event_type": "tick_size_change", "asset_id": "A", "market": "m",
                 "old_tick_size": "0.01", "new_tick_size": "0.001", "timestamp": "5"})  # fmt: skip
    (rec,) = state.apply({"event_type": "book", "asset_id": "A", "market": "m", "timestamp": "6",
                          "bids": [], "asks": [{"price": "0.971", "size": "3"}]})  # fmt: skip
    assert rec.tick == "0.001"


@pytest.mark.parametrize(
    "message",
    [
        '{"event_type": "price_change", "timestamp": "1", "price_changes": '
        '[{"asset_id": "A", "price": "0.5", "size": "1", "side": "BUY"}]}',  # before any book
        '{"event_type": "book", "asset_id": "A", "timestamp": "1", "bids": '
        '[{"price": "NaN", "size": "1"}], "asks": []}',
        '{"event_type": "book", "asset_id": "A", "timestamp": "1", "bids": '
        '[{"price": "1.5", "size": "1"}], "asks": []}',
        '{"event_type": "book", "asset_id": "A", "timestamp": "1", "bids": '
        '[{"price": "0.5", "size": "-1"}], "asks": []}',
        '{"event_type": "book", "asset_id": "A", "timestamp": "soon", "bids": [], "asks": []}',
        '{"event_type": "book", "asset_id": "A", "timestamp": "1", "bids": "lots", "asks": []}',
        "[" * 100_000 + "]" * 100_000,
        "not json",
        '{"event_type": "book", "asset_id": "A", "timestamp": "1", "bids": '
        + json.dumps([{"price": "0.5", "size": "1"}] * 6000)
        + ', "asks": []}',
    ],
)
def test_a_message_that_breaks_the_shape_is_counted_and_passed_over(message: str) -> None:
    state = _state()
    assert list(state.apply_message(message)) == []
    assert state.counts.refused == 1


def test_events_for_tokens_not_asked_are_counted_not_kept() -> None:
    state = _state()
    msg = json.dumps([{"event_type": "book", "asset_id": "B", "market": "m", "timestamp": "1",
                       "bids": [], "asks": []}])  # fmt: skip
    assert list(state.apply_message(msg)) == [] and state.counts.foreign == 1
    assert list(state.apply_message("PONG")) == []


def test_the_book_hash_is_polymarkets() -> None:
    """Worked by hand: the compact JSON in the server's field order, hash emptied, SHA-1."""
    raw = {"market": "0xabc", "asset_id": "123", "timestamp": "1700000000000", "hash": "",
           "bids": [{"price": "0.48", "size": "30"}], "asks": [{"price": "0.52", "size": "25"}],
           "min_order_size": "5", "tick_size": "0.01", "neg_risk": False,
           "last_trade_price": "0.50"}  # fmt: skip
    text = (
        '{"market":"0xabc","asset_id":"123","timestamp":"1700000000000","hash":"",'
        '"bids":[{"price":"0.48","size":"30"}],"asks":[{"price":"0.52","size":"25"}],'
        '"min_order_size":"5","tick_size":"0.01","neg_risk":false,"last_trade_price":"0.50"}'
    )
    import hashlib

    assert book_hash(raw) == hashlib.sha1(text.encode()).hexdigest()
    good = parse_rest_book({**raw, "hash": book_hash(raw)})
    assert good.hash_ok and good.bids == [(Decimal("0.48"), Decimal("30"))]
    assert good.tick == Decimal("0.01")
    forged = parse_rest_book(
        {**raw, "hash": book_hash(raw), "bids": [{"price": "0.49", "size": "30"}]}
    )
    assert not forged.hash_ok


def test_rest_books_are_turned_best_first() -> None:
    raw = {"market": "m", "asset_id": "A", "timestamp": "1",
           "bids": [{"price": "0.47", "size": "1"}, {"price": "0.48", "size": "2"}],
           "asks": [{"price": "0.53", "size": "3"}, {"price": "0.52", "size": "4"}]}  # fmt: skip
    rest = parse_rest_book(raw)
    assert [str(p) for p, _ in rest.bids] == ["0.48", "0.47"]
    assert [str(p) for p, _ in rest.asks] == ["0.52", "0.53"]
    assert not rest.hash_ok  # no hash: not provably the venue's


def test_a_directory_of_other_markets_is_refused(tmp_path: Path) -> None:
    with FeedServer(sample_tokens(snapshots=3)) as server:
        _record(server, tmp_path / "rec", seconds=0.3)
        other = [RecordedToken("X", "m", "Yes")]
        with pytest.raises(TapeError, match="recorded other markets"):
            record_books(tmp_path / "rec", other, RecordBooksOptions(duration=0.1),
                         ws_url=server.ws_url)  # fmt: skip


def test_built_books_keep_the_recorded_instants_in_order(tmp_path: Path) -> None:
    with FeedServer(sample_tokens(market_index=1, snapshots=12)) as server:
        _record(server, tmp_path / "rec")
    books = build_books(tmp_path / "rec").books
    for k in range(len(books.tokens)):
        ts = books.times(k)
        assert np.all(np.diff(ts) > 0)
