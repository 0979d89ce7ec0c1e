"""``arena tapes record`` and its parts, against a fake Polymarket on 127.0.0.1 serving the real
API fixtures from ``shared/data/polymarket/api_fixtures`` (see ``tests/polymarket_server.py``).

The fixture markets by volume, worked out from the files (closed ones only, as recorded by
default; event 16167 is open, so its market 516926 is not offered):
  255151 12,960,333.14   255152 12,519,682.45   40 10,802,601.99 (a 2020 /markets row)
  504903  7,783,375.02   255156  7,698,840.76   504951 3,285,273.35 ...
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from replays.errors import TapeError
from replays.http import FetchError, JsonFetcher, RetryPolicy
from replays.recorder import (
    Endpoints,
    MarketSelector,
    RecordingDir,
    RecordingSummary,
    RecordOptions,
    market_volume,
    price_tokens,
    record,
)
from tests.conftest import Arena
from tests.polymarket_server import FIXTURES, FakePolymarket, Fault, history_for

pytestmark = pytest.mark.skipif(not FIXTURES.exists(), reason="shared/ fixtures not beside repo")

TOP5 = ["255151", "255152", "40", "504903", "255156"]


@pytest.fixture
def server() -> Iterator[FakePolymarket]:
    with FakePolymarket() as fake:
        yield fake


class Recorder:
    """A fetcher wired to the fake server, with sleeps recorded instead of waited on."""

    def __init__(self, server: FakePolymarket, timeout: float = 5.0, max_retries: int = 3):
        self.sleeps: list[float] = []
        self.client = httpx.Client(timeout=httpx.Timeout(timeout))
        policy = RetryPolicy(max_retries=max_retries, base_delay=0.5, max_delay=4.0)
        self.fetcher = JsonFetcher(self.client, policy, sleep=self.sleeps.append)
        self.endpoints = Endpoints(server.url, server.url)

    def record(self, directory: Path, **options: Any) -> RecordingSummary:
        return record(self.fetcher, directory, RecordOptions(**options), self.endpoints)


@pytest.fixture
def recorder(server: FakePolymarket) -> Iterator[Recorder]:
    made = Recorder(server)
    yield made
    made.client.close()


def read_prices(directory: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (directory / "prices.jsonl").read_text().splitlines()]


def yes_token(market: dict[str, object]) -> str:
    return str(json.loads(str(market["clobTokenIds"]))[0])


# --- the retrying fetcher -------------------------------------------------------------------


def test_429_honours_retry_after(server: FakePolymarket, recorder: Recorder) -> None:
    server.inject("/prices-history", Fault(status=429, retry_after="7"))
    body = recorder.fetcher.get_json(server.url + "/prices-history", {"market": "5"})
    assert body == history_for("5")
    assert recorder.sleeps == [7.0]  # the server's wait, not our 0.5 s backoff
    assert server.count("/prices-history") == 2


def test_retry_after_is_capped(server: FakePolymarket, recorder: Recorder) -> None:
    server.inject("/prices-history", Fault(status=503, retry_after="86400"))
    recorder.fetcher.get_json(server.url + "/prices-history", {"market": "5"})
    assert recorder.sleeps == [60.0]  # RetryPolicy.max_retry_after


def test_5xx_backs_off_exponentially_then_gives_up(
    server: FakePolymarket, recorder: Recorder
) -> None:
    server.inject("/prices-history", *[Fault(status=500)] * 4)
    with pytest.raises(FetchError) as failure:
        recorder.fetcher.get_json(server.url + "/prices-history", {"market": "5"})
    # max_retries=3: 4 attempts; waits 0.5*2**0, 0.5*2**1, 0.5*2**2 = 0.5, 1, 2 (under the 4 s cap)
    assert server.count("/prices-history") == 4
    assert recorder.sleeps == [0.5, 1.0, 2.0]
    message = str(failure.value)
    assert "\n" not in message
    assert "after 4 attempts: HTTP 500" in message and "market=5" in message


def test_404_is_not_retried(server: FakePolymarket, recorder: Recorder) -> None:
    with pytest.raises(FetchError) as failure:
        recorder.fetcher.get_json(server.url + "/nowhere", {"limit": 1})
    assert server.count("/nowhere") == 1
    assert recorder.sleeps == []
    assert str(failure.value) == f"GET {server.url}/nowhere?limit=1 failed: HTTP 404 Not Found"


@pytest.mark.parametrize(
    "fault", [Fault(truncated=True), Fault(bad_json=True)], ids=["short-body", "cut-json"]
)
def test_broken_bodies_are_retried(
    server: FakePolymarket, recorder: Recorder, fault: Fault
) -> None:
    server.inject("/prices-history", fault)
    assert recorder.fetcher.get_json(server.url + "/prices-history", {"market": "6"}) == (
        history_for("6")
    )
    assert server.count("/prices-history") == 2
    assert recorder.sleeps == [0.5]


def test_a_stall_past_the_timeout_is_retried_then_reported(server: FakePolymarket) -> None:
    impatient = Recorder(server, timeout=0.3, max_retries=1)
    try:
        server.inject("/prices-history", Fault(stall=1.0))
        assert impatient.fetcher.get_json(server.url + "/prices-history", {"market": "7"})
        assert server.count("/prices-history") == 2
        server.inject("/prices-history", Fault(stall=1.0), Fault(stall=1.0))
        with pytest.raises(FetchError, match="after 2 attempts: timed out"):
            impatient.fetcher.get_json(server.url + "/prices-history", {"market": "7"})
    finally:
        impatient.client.close()


@given(retry=st.integers(0, 40), fraction=st.floats(0, 0.999))
def test_backoff_doubles_up_to_the_cap_plus_bounded_jitter(retry: int, fraction: float) -> None:
    plain = RetryPolicy(base_delay=0.5, max_delay=30.0)
    jittered = RetryPolicy(base_delay=0.5, max_delay=30.0, jitter=lambda: fraction)
    assert plain.backoff(retry) == min(0.5 * 2**retry, 30.0)
    assert plain.backoff(retry + 1) >= plain.backoff(retry)
    assert plain.backoff(retry) <= jittered.backoff(retry) < plain.backoff(retry) + 0.5


# --- reading Gamma shapes -------------------------------------------------------------------


def test_volume_and_tokens_from_gamma_strings() -> None:
    assert market_volume({"volumeNum": 12.5, "volume": "99"}) == 12.5
    assert market_volume({"volume": "1335.045385"}) == 1335.045385
    assert market_volume({"volume": "n/a"}) == 0.0
    assert price_tokens({"clobTokenIds": '["11", "22"]'}) == ["11"]  # binary: YES only
    assert price_tokens({"clobTokenIds": '["1", "2", "3"]'}) == ["1", "2", "3"]
    assert price_tokens({"clobTokenIds": ""}) == []
    with pytest.raises(TapeError, match="market 9: clobTokenIds"):
        price_tokens({"id": "9", "clobTokenIds": "[broken"})


# --- choosing markets -----------------------------------------------------------------------


def test_selects_top_markets_by_volume(server: FakePolymarket, recorder: Recorder) -> None:
    chosen = MarketSelector(recorder.fetcher, server.url, RecordOptions(top=5)).select()
    assert [m["id"] for m in chosen] == TOP5
    # a market met under its event keeps the event (with its tags), as /markets would embed it
    assert chosen[0]["events"][0]["id"] == "903667"
    assert "markets" not in chosen[0]["events"][0]
    sent = next(r.query for r in server.requests if r.path == "/events")
    assert sent["order"] == "volume" and sent["ascending"] == "false" and sent["closed"] == "true"


@pytest.mark.parametrize("page_size", [1, 2, 3, 7])
def test_paging_does_not_change_the_selection(server: FakePolymarket, page_size: int) -> None:
    paged = Recorder(server)
    options = RecordOptions(top=5, page_size=page_size)
    chosen = MarketSelector(paged.fetcher, server.url, options).select()
    paged.client.close()
    assert [m["id"] for m in chosen] == TOP5
    # /markets is ordered by volume, so it stops once it has 5: ceil(5 / page_size) pages
    assert server.count("/markets") == -(-5 // page_size)
    if page_size == 1:
        # events by volume: 903667 (33.2M; its markets top out at 13.0M), 11979 (16.7M; 7.8M),
        # then 2892 (139,186): by now 5+ markets beat 139,186, so no 4th page is asked for
        assert server.count("/events") == 3


def test_tag_slug_and_date_window(server: FakePolymarket, recorder: Recorder) -> None:
    options = RecordOptions(top=10, tags=("politics",), start="2024-03-01", end="2024-11-30")
    chosen = MarketSelector(recorder.fetcher, server.url, options).select()
    # only event 903667 is tagged politics; all three of its markets lie in the window
    assert [m["id"] for m in chosen] == ["255151", "255152", "255156"]
    assert server.count("/markets") == 0  # /markets cannot filter by slug
    assert (
        server.count(
            "/events",
            tag_slug="politics",
            start_date_min="2024-03-01T00:00:00Z",
            end_date_max="2024-11-30T00:00:00Z",
        )
        == 1
    )


def test_date_window_applies_to_each_market(server: FakePolymarket, recorder: Recorder) -> None:
    options = RecordOptions(top=10, start="2024-03-01", end="2024-11-30T23:59:59Z")
    chosen = MarketSelector(recorder.fetcher, server.url, options).select()
    # 504903 ends 2025-01-06 and 40 has no startDate: both out; 255448 starts 2024-04-03
    assert [m["id"] for m in chosen] == ["255151", "255152", "255156", "255448"]


def test_bad_options_are_one_line_errors() -> None:
    with pytest.raises(TapeError, match="--start: 'yesterday' is not an ISO-8601"):
        RecordOptions(start="yesterday")
    with pytest.raises(TapeError, match="--interval must be one of"):
        RecordOptions(interval="2h")


# --- recording and resuming -----------------------------------------------------------------


def test_records_raw_files(server: FakePolymarket, recorder: Recorder, tmp_path: Path) -> None:
    summary = recorder.record(tmp_path, top=5)
    markets = json.loads((tmp_path / "markets.json").read_text())
    assert [m["id"] for m in markets] == TOP5
    rows = read_prices(tmp_path)
    assert [r["token_id"] for r in rows] == [yes_token(m) for m in markets]
    for row in rows:
        assert row["history"] == history_for(str(row["token_id"]))["history"]
    assert server.count("/prices-history", interval="max", fidelity="720") == 5
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["complete"] is True and state["tokens_recorded"] == 5
    assert summary.recorded == 5 and summary.resumed == 0


def test_resume_after_a_failure_asks_only_for_what_is_missing(
    server: FakePolymarket, recorder: Recorder, tmp_path: Path
) -> None:
    server.inject("/prices-history", Fault(), Fault(), Fault(status=404))
    with pytest.raises(FetchError, match="HTTP 404"):
        recorder.record(tmp_path, top=5)
    assert len(read_prices(tmp_path)) == 2
    assert json.loads((tmp_path / "state.json").read_text())["complete"] is False

    before = len(server.requests)
    summary = recorder.record(tmp_path, top=5)
    again = server.requests[before:]
    assert [r.path for r in again] == ["/prices-history"] * 3  # no Gamma, no repeats
    markets = json.loads((tmp_path / "markets.json").read_text())
    assert [r.query["market"] for r in again] == [yes_token(m) for m in markets[2:]]
    assert [r["token_id"] for r in read_prices(tmp_path)] == [yes_token(m) for m in markets]
    assert summary.resumed == 2 and summary.recorded == 3 and summary.requests == 3


def test_resume_drops_a_torn_last_line(
    server: FakePolymarket, recorder: Recorder, tmp_path: Path
) -> None:
    recorder.record(tmp_path, top=5)
    prices = tmp_path / "prices.jsonl"
    lines = prices.read_bytes().splitlines(keepends=True)
    # as if the crash hit while writing the 4th line: 3 whole lines and half of one
    prices.write_bytes(b"".join(lines[:3]) + lines[3][: len(lines[3]) // 2])

    before = len(server.requests)
    recorder.record(tmp_path, top=5)
    assert [r.path for r in server.requests[before:]] == ["/prices-history"] * 2
    assert prices.read_bytes() == b"".join(lines)

    before = len(server.requests)
    recorder.record(tmp_path, top=5)  # complete: nothing left to ask
    assert server.requests[before:] == []


def test_resume_refuses_other_options_and_damaged_files(
    server: FakePolymarket, recorder: Recorder, tmp_path: Path
) -> None:
    recorder.record(tmp_path, top=2)
    with pytest.raises(TapeError, match=r"other options \(top: 2 then, 3 now\)"):
        recorder.record(tmp_path, top=3)
    prices = tmp_path / "prices.jsonl"
    prices.write_text("not json\n" + prices.read_text())
    with pytest.raises(TapeError, match=r"prices.jsonl:1: not a recorded price line"):
        RecordingDir(tmp_path).recorded_tokens()


# --- the command ----------------------------------------------------------------------------


def test_cli_reports_a_client_error_in_one_line(
    arena: Arena, server: FakePolymarket, tmp_path: Path
) -> None:
    result = arena(
        "tapes", "record", "--out", tmp_path / "x.tape", "--gamma-url", server.url + "/gone",
        "--clob-url", server.url, "--max-retries", "0",
    )  # fmt: skip
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "/gone/events" in lines[0] and "HTTP 404" in lines[0]
    assert server.count("/gone/events") == 1


def test_cli_rejects_a_bad_date(arena: Arena, tmp_path: Path) -> None:
    result = arena("tapes", "record", "--out", tmp_path / "x.tape", "--start", "soon")
    assert result.exit_code == 1
    assert result.output.strip() == "Error: --start: 'soon' is not an ISO-8601 date or instant"


def test_cli_checks_the_tape_name_before_recording(
    arena: Arena, server: FakePolymarket, tmp_path: Path
) -> None:
    result = arena("tapes", "record", "--out", tmp_path / "x.csv", "--gamma-url", server.url)
    assert result.exit_code == 1
    assert "unknown tape extension" in result.output and len(result.output.splitlines()) == 1
    assert server.requests == []


def test_cli_records_a_tape_end_to_end(
    arena: Arena, server: FakePolymarket, tmp_path: Path
) -> None:
    pytest.importorskip("replays.importers.polymarket")
    from replays.tapefile import load_tape

    out = tmp_path / "top.tape"
    args = ["--out", str(out), "--top", "5", "--gamma-url", server.url, "--clob-url", server.url]
    result = arena("tapes", "record", *args, "--json")
    assert result.exit_code == 0, result.output
    facts = json.loads(result.stdout)
    assert facts["markets"] == 5 and facts["tokens_recorded"] == 5
    assert facts["requests"] == len(server.requests)
    tape = load_tape(out)
    assert sorted(m.id for m in tape.markets) == sorted(TOP5)

    again = arena("tapes", "record", *args, "--json")
    assert json.loads(again.stdout)["tokens_resumed"] == 5
    assert json.loads(again.stdout)["requests"] == 0


def test_a_recording_is_covered_until_it_was_made_and_knows_volume_from_then(
    server: FakePolymarket, tmp_path: Path
) -> None:
    """Open markets: covered until the market list was fetched (``recorded_at``, kept across a
    resume), one volume point then. Closed ones: covered until they closed, volume final."""
    from replays.recorder import write_tape

    made = Recorder(server)
    when = 1_750_000_000
    record(made.fetcher, tmp_path, RecordOptions(top=40, closed=None), made.endpoints,
           clock=lambda: when)  # fmt: skip
    record(made.fetcher, tmp_path, RecordOptions(top=40, closed=None), made.endpoints,
           clock=lambda: when + 999)  # a resume keeps the first instant  # fmt: skip
    made.client.close()
    assert json.loads((tmp_path / "state.json").read_text())["recorded_at"] == when
    tape = write_tape(tmp_path, tmp_path / "r.tape").tape
    listed = json.loads((tmp_path / "markets.json").read_text())
    open_ids = {str(m["id"]) for m in listed if not m.get("closed")}
    found = {m.id: m for m in tape.markets}
    assert {"517310", "517311", "517313", "517314", "517315"} <= open_ids <= set(found)
    for mid in open_ids:
        info = found[mid]
        last = int(tape.times(tape.index[mid])[-1])  # the fake serves histories of any date
        assert info.covered_until == max(when, last)
        assert info.volume_history == ((when, info.volume),)
        assert info.end_ts == info.close_ts  # no closedTime: endDate for both
    closed = [m for m in tape.markets if m.id not in open_ids]
    assert closed and all(m.volume_history == () for m in closed)
    for info in closed:
        last = int(tape.times(tape.index[info.id])[-1])
        assert info.covered_until == max(info.close_ts or last, last)
