"""Importers: Gamma shapes, winner detection (methodology §1.9), and the shared data sets."""

from __future__ import annotations

import collections
import csv
import gzip
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from replays.errors import TapeError
from replays.importers import import_election2024, import_polymarket
from replays.importers.election2024 import NATIONAL_ID
from replays.importers.parsing import align_outcomes, market_info, parse_ts, verdict
from replays.samples import SAMPLE_HASH, sample_path
from replays.tapefile import load_tape, save_tape

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "polymarket"
needs_shared = pytest.mark.skipif(not SHARED.exists(), reason="shared data not present")


def gamma(**over: Any) -> dict[str, Any]:
    """A raw Gamma market object in its real, string-encoded shape."""
    obj: dict[str, Any] = {
        "id": "253573", "question": "Q?", "outcomes": '["Yes", "No"]',
        "outcomePrices": '["1", "0"]', "clobTokenIds": '["111", "222"]', "volume": "123.5",
        "volumeNum": 123.5, "startDate": "2024-01-01T00:00:00Z",
        "createdAt": "2023-12-01T00:00:00Z",
        "endDate": "2024-02-01T00:00:00Z", "closedTime": "2024-02-02 00:00:00+00", "closed": True,
    }  # fmt: skip
    obj.update(over)
    return obj


def test_parse_ts_reads_both_gamma_formats() -> None:
    assert parse_ts("2024-11-07 11:18:52+00") == 1730978332
    assert parse_ts("2024-11-07T11:18:52Z") == 1730978332
    assert parse_ts("2024-11-07T11:18:52.5Z") == 1730978332
    assert parse_ts(None) is None and parse_ts("") is None
    for garbage in ("garbage", float("nan"), True):
        with pytest.raises(ValueError, match="not an instant"):
            parse_ts(garbage)


@pytest.mark.parametrize("field", ["endDate", "closedTime", "startDate"])
def test_an_unreadable_date_is_refused_by_market_and_field(field: str) -> None:
    # Read as absent, a garbled endDate made a market with no scheduled end, a garbled
    # closedTime an open one.
    with pytest.raises(TapeError, match=f"^market 253573: {field}: not an instant: 'not a date'$"):
        market_info(gamma(**{field: "not a date"}))


def test_a_winner_flag_naming_no_outcome_is_refused() -> None:
    """Read as no winner, a settled market stayed unresolved, counted as 'undecided'."""
    market = market_info(gamma())
    assert verdict(gamma(winner="no"), market).resolution.winner == "No"  # type: ignore[union-attr]
    with pytest.raises(TapeError) as caught:
        verdict(gamma(winner="Maybe"), market)
    assert str(caught.value) == "market 253573: winner 'Maybe' is not one of its outcomes (Yes, No)"


def test_an_unreadable_close_is_refused_when_judging_the_ending() -> None:
    market = market_info(gamma())
    with pytest.raises(TapeError, match="market 253573: umaEndDate: not an instant"):
        verdict(gamma(closedTime=None, umaEndDate="soon"), market)


def test_market_info_from_raw_gamma() -> None:
    m = market_info(gamma(events=[{"tags": [{"label": "All"}, {"label": "Politics"}]}]))
    assert (m.id, m.outcomes, m.volume) == ("253573", ("Yes", "No"), 123.5)
    assert m.clob_token_ids == ("111", "222")
    assert (m.open_ts, m.close_ts) == (1704067200, 1706832000)  # startDate; closedTime
    assert m.category == "Politics" and m.tags == ("All", "Politics")
    assert market_info(gamma(category="Sports")).category == "Sports"
    no_start = market_info(gamma(startDate=None, closedTime=None))
    assert (no_start.open_ts, no_start.close_ts) == (1701388800, 1706745600)  # createdAt; endDate


@pytest.mark.parametrize(
    ("over", "kind", "winner"),
    [
        ({}, "resolved", "Yes"),
        ({"outcomePrices": '["0.005", "0.995"]'}, "resolved", "No"),
        ({"outcomePrices": '["0.5", "0.5"]'}, "voided", None),
        ({"outcomePrices": '["0.7", "0.3"]'}, "undecided", None),
        (
            {"outcomePrices": '["0.995", "0.005"]', "closed": False, "closedTime": None},
            "open",
            None,
        ),
        (
            {"outcomePrices": '["0.5", "0.5"]', "tokens": [{"outcome": "No", "winner": True}]},
            "resolved",
            "No",
        ),
        ({"winner": "no", "outcomePrices": "[]"}, "resolved", "No"),
    ],
)
def test_winner_detection(over: dict[str, Any], kind: str, winner: str | None) -> None:
    obj = gamma(**over)
    judged = verdict(obj, market_info(obj))
    assert judged.kind == kind
    assert (judged.resolution.winner if judged.resolution else None) == winner
    if judged.resolution:
        assert judged.resolution.ts == 1706832000


def test_align_outcomes_carries_prices_forward_from_a_common_start() -> None:
    grid, prices = align_outcomes([(np.array([1, 3, 5]), np.array([0.1, 0.3, 0.5])),
                                   (np.array([2, 5]), np.array([0.9, 0.5]))])  # fmt: skip
    assert grid.tolist() == [2, 3, 5]
    assert prices.tolist() == [[0.1, 0.9], [0.3, 0.9], [0.5, 0.5]]


def write_inputs(
    tmp_path: Path, markets: list[dict[str, Any]], lines: list[dict[str, Any]]
) -> tuple[Path, Path]:
    mpath, ppath = tmp_path / "markets.json", tmp_path / "prices.jsonl.gz"
    mpath.write_text(json.dumps(markets))
    ppath.write_bytes(gzip.compress("\n".join(json.dumps(x) for x in lines).encode()))
    return mpath, ppath


def test_generic_import_handles_no_only_histories_nan_duplicates_and_skips(tmp_path: Path) -> None:
    markets = [
        gamma(),
        gamma(id="2", clobTokenIds='["333", "444"]', outcomePrices='["0.6", "0.4"]'),
        gamma(id="3", clobTokenIds='["555", "666"]'),  # no history at all
        gamma(id="4", outcomes='["A", "B", "C"]', clobTokenIds='["a", "b", "c"]',
              outcomePrices='["0", "0", "1"]'),
    ]  # fmt: skip
    hist = [
        {
            "token_id": "111",
            "history": [{"t": 20, "p": 0.4}, {"t": 10, "p": 0.3}, {"t": 20, "p": 0.45}],
        },
        {"token_id": "444", "history": [{"t": 10, "p": 0.25}]},  # NO only
        {"token_id": "a", "history": [{"t": 10, "p": 0.2}]},
        {"token_id": "b", "history": [{"t": 10, "p": 0.3}]},
        {"token_id": "c", "history": [{"t": 10, "p": 0.5}, {"t": 11, "p": 0.6}]},
    ]
    mpath, ppath = write_inputs(tmp_path, markets, hist)
    ppath.write_bytes(
        gzip.compress(gzip.decompress(ppath.read_bytes()).replace(b"0.3}", b"NaN}", 1))
    )
    result = import_polymarket(mpath, ppath)
    tape = result.tape
    assert [m.id for m in tape.markets] == ["253573", "2", "4"]
    assert tape.times(0).tolist() == [20] and tape.yes(0).tolist() == [
        0.45
    ]  # NaN dropped, last kept
    assert tape.yes(1).tolist() == [0.75]
    assert tape.values(2).tolist() == [[0.2, 0.3, 0.5], [0.2, 0.3, 0.6]]
    assert result.skipped_no_prices == ["3"] and result.undecided == ["2"]
    assert result.notes == ["dropped 1 points without a price (NaN or null)"]
    assert {k: r.winner for k, r in tape.resolutions.items()} == {"253573": "Yes", "4": "C"}


def test_import_errors_are_one_line(tmp_path: Path) -> None:
    mpath, ppath = write_inputs(tmp_path, [gamma()], [])
    ppath.write_bytes(ppath.read_bytes()[:-3])
    with pytest.raises(TapeError, match="truncated gzip"):
        import_polymarket(mpath, ppath)
    mpath.write_text("[{")
    with pytest.raises(TapeError, match="bad JSON"):
        import_polymarket(mpath, ppath)
    with pytest.raises(TapeError, match="cannot read"):
        import_polymarket(tmp_path / "missing.json", ppath)


@needs_shared
def test_election_import_is_the_embedded_sample(tmp_path: Path) -> None:
    """The sample is today's import of the shared data: written again, every member of the
    file is the same bytes (the members, not the zip: deflate's output may differ between zlib
    builds, what it inflates to may not)."""
    again = tmp_path / "election2024.tape"
    save_tape(import_election2024(SHARED / "election2024").tape, again)
    with zipfile.ZipFile(sample_path()) as shipped, zipfile.ZipFile(again) as made:
        assert [(i.filename, i.date_time) for i in shipped.infolist()] == [
            (i.filename, i.date_time) for i in made.infolist()
        ]
        for name in shipped.namelist():
            assert shipped.read(name) == made.read(name), name
    assert load_tape(again, verify_hash=True).hash == SAMPLE_HASH


@needs_shared
def test_election_coverage_is_where_each_recording_stops() -> None:
    """Each market is covered until the last point its source recorded, read here from the raw
    files, not from the tape. For 97 of the 100 Gamma markets that point is under 12 h before
    Gamma's closedTime (the CLOB history ends with trading); for three it is days before:
    Vermont president (its series ends 11-06 12:00, 1.5 h before UMA resolved it at 13:32, but
    Gamma closed it only on 11-20) and the two still trading when the source's last commit was
    made on 11-12 (Pennsylvania senate, Vermont governor)."""
    folder = SHARED / "election2024"
    tape = import_election2024(folder).tape
    with open(folder / "election2024_market_index.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    raw = {f: json.loads((folder / "tapes" / Path(f).name).read_text())
           for f in {r["tape_file"] for r in rows}}  # fmt: skip
    for row in rows:
        market = tape.markets[tape.index[row["gamma_market_id"] or NATIONAL_ID]]
        assert market.covered_until == raw[row["tape_file"]][row["region"]][-1]["t"], row["region"]
    early = sorted(
        m.id
        for m in tape.markets
        if m.close_ts is not None and m.close_ts - tape.coverage(tape.index[m.id]) > 12 * 3600
    )
    assert early == ["255186", "500108", "501491"]
    vermont = tape.markets[tape.index["255186"]]
    assert vermont.covered_until == 1730894403  # 2024-11-06 12:00:03 UTC = 1730851200 + 43203
    assert vermont.close_ts == parse_ts("2024-11-20 17:38:30.502018+00")
    assert vermont.end_ts == parse_ts("2024-11-05T12:00:00Z")
    # the tape's last points: Pennsylvania senate 2024-11-12 14:01:03, Vermont governor 15:01:03
    assert tape.coverage(tape.index["500108"]) == 1731420063
    assert tape.coverage(tape.index["501491"]) == 1731423663
    national = tape.resolutions[NATIONAL_ID]
    assert national.winner == "No"  # final price 0.0015: NO at 0.9985 >= 0.99
    pa = tape.markets[tape.index["255151"]]
    assert pa.volume == pytest.approx(12_960_333.136703)
    assert pa.category == next(t for t in pa.tags if t != "All")
    # every market of the shared data is closed: its volume is only known as final
    assert all(m.volume_history == () for m in tape.markets)


@needs_shared
def test_btc_set_imports_through_the_generic_importer() -> None:
    folder = SHARED / "btc_daily_range_minute_tapes"
    result = import_polymarket(folder / "markets.json", folder / "prices_history.jsonl.gz")
    assert len(result.tape.markets) == 728
    assert len(result.tape.resolutions) == 728
    # 728 YES series × 1,440 minutes, less 1,800 YES points recorded as NaN (3,600 over both sides)
    assert result.tape.n_points == 728 * 1440 - 1800
    assert result.notes == ["dropped 3600 points without a price (NaN or null)"]
    # Each recording stops a minute before its market's scheduled end. 692 markets closed after
    # it (a median 3.4 h): covered until the end, not the close. 36 list an end (21:00) after
    # their close (20:08-20:27) and have points until 20:59: covered until their last point.
    tape = result.tape
    reach = [(m.covered_until or 0) - int(tape.times(k)[-1]) for k, m in enumerate(tape.markets)]
    assert sorted(collections.Counter(reach).items()) == [(0, 36), (60, 692)]
    assert all(
        m.covered_until == m.end_ts for m, r in zip(tape.markets, reach, strict=True) if r == 60
    )


# -- hostile raw shapes: each was a traceback, or a tape that then could not be loaded ----------


def import_one(tmp_path: Path, market: dict[str, Any], history: list[dict[str, Any]]) -> Any:
    mpath, ppath = write_inputs(tmp_path, [market], [{"token_id": "111", "history": history}])
    return import_polymarket(mpath, ppath)


POINT = {"t": 1704067200, "p": 0.5}


@pytest.mark.parametrize(
    ("point", "problem"),
    [
        ({"t": 2**70, "p": 0.5}, "line 1: Expected `int` <= 4102444799"),  # was OverflowError
        ({"t": -1, "p": 0.5}, "line 1: Expected `int` >= 0"),
        ({"t": 1704067200, "p": True}, "line 1: Expected `float | null`, got `bool`"),
        ({"t": 1704067200, "p": "0.5"}, "line 1: Expected `float | null`, got `str`"),
        ({"t": 1704067200, "p": 1.5}, "market 253573: price 1.5 is outside [0, 1]"),
    ],
)
def test_hostile_clob_points(tmp_path: Path, point: dict[str, Any], problem: str) -> None:
    with pytest.raises(TapeError) as info:
        import_one(tmp_path, gamma(), [point])
    assert problem in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("over", "problem"),
    [
        ({"outcomes": '["Yes", "Yes"]'}, "market 253573: outcome 'Yes' is listed twice"),
        ({"outcomes": "[]"}, "market 253573: needs at least two outcomes, has []"),
        ({"outcomes": "Yes or No"}, "market 253573: needs at least two outcomes, has []"),
        ({"startDate": 2**70}, "market 253573: open_ts t=1180591620717411303424 is outside"),
        ({"closedTime": 1e300}, "close_ts t=1000000000000000052504760255204420248704468581"),
        ({"id": None}, "a market object has no id"),
    ],
)
def test_hostile_gamma_objects(tmp_path: Path, over: dict[str, Any], problem: str) -> None:
    """Repeated or empty outcomes were imported (empty silently became Yes/No)."""
    with pytest.raises(TapeError) as info:
        import_one(tmp_path, gamma(**over), [POINT])
    assert problem in str(info.value)


def test_odd_but_harmless_gamma_values_still_make_a_loadable_tape(tmp_path: Path) -> None:
    """A numeric category was written into a tape that then failed to load."""
    over = {
        "category": 7,
        "volumeNum": None,  # absent: 0 (a volume that is there but no amount is refused)
        "volume": "",
        "startDate": "",
        "createdAt": None,
    }
    result = import_one(tmp_path, gamma(**over), [POINT])
    [market] = result.tape.markets
    # empty or null dates are absent ones: the market opens at its first point
    assert (market.category, market.volume, market.open_ts) == ("7", 0.0, 1704067200)
    save_tape(result.tape, tmp_path / "t.tape")
    assert load_tape(tmp_path / "t.tape").hash == result.tape.hash


def test_an_import_names_the_file_market_and_field_of_an_unreadable_date(tmp_path: Path) -> None:
    with pytest.raises(TapeError, match=r"markets\.json\+prices\.jsonl\.gz: market 253573: end"):
        import_one(tmp_path, gamma(endDate="2024-13-45"), [POINT])


def test_a_gzip_bomb_of_price_histories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mpath, ppath = write_inputs(tmp_path, [gamma()], [])
    ppath.write_bytes(gzip.compress(b"\n" * (3 << 20)))
    monkeypatch.setenv("ARENA_TAPE_MAX_BYTES", str(1 << 20))
    with pytest.raises(TapeError, match=r"prices\.jsonl\.gz: decompresses to more than 1\.0 MiB"):
        import_polymarket(mpath, ppath)


@needs_shared
@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda d: d.replace('"p": 0.74', '"p": "0.74"', 1), "bad point: Expected `float`"),
        (lambda d: d.replace('"t": 1712188803', '"t": 1e30', 1), "bad point: Expected `int`"),
        (lambda d: d.replace('{"t": 1712188803, ', "{", 1), "missing required field `t`"),
        (lambda d: "[1, 2]", "no series for region"),
    ],
)
def test_hostile_election_series(tmp_path: Path, damage: Any, problem: str) -> None:
    import shutil

    folder = tmp_path / "election2024"
    shutil.copytree(SHARED / "election2024", folder)
    (folder / "tapes").chmod(0o755)
    target = folder / "tapes" / "2024-president-polymarket-prices.json"
    target.chmod(0o644)
    data = json.dumps(json.loads(target.read_text()))
    target.write_text(damage(data))
    with pytest.raises(TapeError) as info:
        import_election2024(folder)
    assert problem in str(info.value) and str(target) in str(info.value)


def test_an_election_index_without_its_columns(tmp_path: Path) -> None:
    (tmp_path / "election2024_market_index.csv").write_text("race,region\npresident,Ohio\n")
    with pytest.raises(TapeError, match="missing columns gamma_market_id, yes_token_id, tape_file"):
        import_election2024(tmp_path)


def test_the_election_index_is_read_within_a_tapes_size_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index was read whole with no limit: 2 MiB of rows, or a gzip of them under its
    .csv name, is refused at a 1 MiB limit before any of it is parsed."""
    index = tmp_path / "election2024_market_index.csv"
    rows = "race,region,gamma_market_id,yes_token_id,tape_file\n" + "p,r,1,2,t.json\n" * 150_000
    monkeypatch.setenv("ARENA_TAPE_MAX_BYTES", str(1 << 20))
    for data in (rows.encode(), gzip.compress(rows.encode())):
        index.write_bytes(data)
        with pytest.raises(
            TapeError, match=r"market_index\.csv: decompresses to more than 1\.0 MiB"
        ):
            import_election2024(tmp_path)
    index.unlink()
    with pytest.raises(TapeError, match=r"market_index\.csv: cannot read: No such file"):
        import_election2024(tmp_path)


def test_an_empty_clob_history_is_a_market_without_prices(tmp_path: Path) -> None:
    """CLOB answers {"history": []} for a token that never traded; that was an IndexError."""
    markets = [gamma(), gamma(id="2", clobTokenIds='["333", "444"]')]
    lines = [{"token_id": "111", "history": [POINT]}, {"token_id": "333", "history": []}]
    result = import_polymarket(*write_inputs(tmp_path, markets, lines))
    assert [m.id for m in result.tape.markets] == ["253573"]
    assert result.skipped_no_prices == ["2"]
