"""Every way a tape can be bad is refused with one line naming the file, market and problem."""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from replays.errors import TapeError
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from replays.tapefile import load_tape, save_tape


def header(
    markets: list[dict[str, Any]] | None = None, resolutions: list[Any] | None = None
) -> dict[str, Any]:
    default = [{"id": "a", "question": "A?", "outcomes": ["Yes", "No"], "open_ts": 100}]
    return {
        "format": "arena-tape",
        "version": 1,
        "markets": markets or default,
        "resolutions": resolutions or [],
    }


def write_jsonl(path: Path, head: dict[str, Any], *rows: dict[str, Any]) -> Path:
    path.write_text("\n".join(json.dumps(x) for x in (head, *rows)) + "\n")
    return path


def write_columnar(path: Path, head: dict[str, Any], times: list[int], prices: list[float]) -> Path:
    """A .tape written without going through Tape, so it can hold anything."""
    arrays = {
        "offsets": np.array([0, len(times)], dtype="<i8"),
        "times": np.array(times, dtype="<i8"),
        "prices": np.array(prices, dtype="<f8"),
    }
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("meta.json", json.dumps(head))
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.save(buf, arr)
            zf.writestr(f"{name}.npy", buf.getvalue())
    return path


def refused(path: Path, *fragments: str) -> str:
    with pytest.raises(TapeError) as info:
        load_tape(path, verify_hash=True)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    for fragment in fragments:
        assert fragment in message
    return message


@pytest.mark.parametrize(
    ("prices", "problem"),
    [
        ([0.5, float("nan")], "NaN"),
        ([0.5, float("inf")], "infinite"),
        ([0.5, 1.2], "outside [0, 1]"),
        ([-0.1, 0.5], "outside [0, 1]"),
    ],
)
def test_bad_prices(tmp_path: Path, prices: list[float], problem: str) -> None:
    refused(write_columnar(tmp_path / "t.tape", header(), [100, 200], prices), "market a", problem)


@pytest.mark.parametrize(
    ("times", "problem"), [([200, 100], "unsorted"), ([100, 100], "duplicate")]
)
def test_bad_instants(tmp_path: Path, times: list[int], problem: str) -> None:
    path = write_jsonl(
        tmp_path / "t.tape.jsonl", header(), {"market": "a", "t": times, "p": [0.1, 0.2]}
    )
    refused(path, "market a", problem)


def test_instants_may_restart_between_markets() -> None:
    markets = [MarketInfo(id=i, question="", outcomes=("Yes", "No")) for i in "ab"]
    series = {
        "a": (np.array([5, 9]), np.array([0.1, 0.2])),
        "b": (np.array([1, 2]), np.array([0.3, 0.4])),
    }
    assert Tape.from_series(markets, series, {}).n_points == 4


def test_points_for_an_unknown_market(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.tape.jsonl", header(), {"market": "a", "t": [100], "p": [0.1]},
                       {"market": "zzz", "t": [100], "p": [0.1]})  # fmt: skip
    refused(path, "market zzz", "not in the tape")


def test_resolution_naming_a_missing_outcome(tmp_path: Path) -> None:
    head = header(resolutions=[{"market": "a", "ts": 500, "winner": "Maybe"}])
    path = write_jsonl(tmp_path / "t.tape.jsonl", head, {"market": "a", "t": [100], "p": [0.1]})
    refused(path, "market a", "'Maybe'")


def test_resolution_before_the_market_opened(tmp_path: Path) -> None:
    head = header(resolutions=[{"market": "a", "ts": 50, "winner": "Yes"}])
    path = write_jsonl(tmp_path / "t.tape.jsonl", head, {"market": "a", "t": [100], "p": [0.1]})
    refused(path, "market a", "before it opened at t=100")


def test_resolution_for_an_unknown_market() -> None:
    market = MarketInfo(id="a", question="", outcomes=("Yes", "No"))
    with pytest.raises(TapeError, match="market b: resolution for a market not in the tape"):
        Tape.from_series([market], {"a": (np.array([1]), np.array([0.5]))},
                         [Resolution(market="b", ts=5, winner=None)])  # fmt: skip


def test_empty_tapes(tmp_path: Path) -> None:
    refused(write_jsonl(tmp_path / "t.tape.jsonl", header()), "empty tape")
    (tmp_path / "z.tape").write_bytes(b"")
    refused(tmp_path / "z.tape", "empty")


def test_truncated_gzip(tmp_path: Path) -> None:
    market = MarketInfo(id="a", question="A?", outcomes=("Yes", "No"))
    tape = Tape.from_series([market], {"a": (np.arange(1, 500), np.full(499, 0.5))}, {})
    save_tape(tape, tmp_path / "t.tape.jsonl.gz")
    data = (tmp_path / "t.tape.jsonl.gz").read_bytes()
    (tmp_path / "cut.tape.jsonl.gz").write_bytes(data[: len(data) // 2])
    refused(tmp_path / "cut.tape.jsonl.gz", "truncated gzip")


def test_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "t.tape.jsonl"
    path.write_text(json.dumps(header()) + '\n{"market": "a", "t": [1, 2\n')
    refused(path, "line 2")
    path.write_text("{not json\n")
    refused(path, "bad tape header")
    gz = tmp_path / "h.tape.jsonl.gz"
    gz.write_bytes(
        gzip.compress(
            b'{"format": "something-else", "version": 1, "markets": [], "resolutions": []}'
        )
    )
    refused(gz, "not an arena-tape v1 file")


def test_corrupt_zip(tmp_path: Path) -> None:
    good = write_columnar(tmp_path / "t.tape", header(), [100, 200], [0.1, 0.2])
    data = bytearray(good.read_bytes())
    (tmp_path / "cut.tape").write_bytes(bytes(data[: len(data) - 40]))
    refused(tmp_path / "cut.tape", "corrupt columnar tape")
    at = data.index(b"times.npy") + 60  # inside that member's data
    data[at] ^= 0xFF
    (tmp_path / "flip.tape").write_bytes(bytes(data))
    refused(tmp_path / "flip.tape", "corrupt")


def test_pickled_arrays_are_never_loaded(tmp_path: Path) -> None:
    path = tmp_path / "t.tape"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("meta.json", json.dumps(header()))
        for name in ("offsets", "times", "prices"):
            buf = io.BytesIO()
            np.save(buf, np.array([object()], dtype=object), allow_pickle=True)
            zf.writestr(f"{name}.npy", buf.getvalue())
    refused(path, "corrupt tape: offsets.npy is |O(1,), not 1-D <i8")


def test_recorded_hash_must_match_the_content(tmp_path: Path) -> None:
    head = {**header(), "hash": "0" * 64}
    path = write_columnar(tmp_path / "t.tape", head, [100, 200], [0.1, 0.2])
    assert load_tape(path).n_points == 2  # a plain load trusts the structure
    refused(path, "content hash mismatch")


def test_vectorised_check_finds_the_right_market_in_a_big_tape() -> None:
    markets = [MarketInfo(id=f"m{i}", question="", outcomes=("Yes", "No")) for i in range(200)]
    series = {m.id: (np.arange(1000), np.full(1000, 0.5)) for m in markets}
    series["m137"][1][999] = 1.5
    with pytest.raises(TapeError, match=r"market m137: price 1\.5 is outside"):
        Tape.from_series(markets, series, {})


# -- what fuzzing found: each was a traceback, a runaway allocation, or garbage accepted ---------


def multi_header(*outcomes: list[str]) -> dict[str, Any]:
    return header([{"id": f"m{i}", "question": "?", "outcomes": o} for i, o in enumerate(outcomes)])


@pytest.mark.parametrize(
    ("outcomes", "problem"),
    [
        ([], "needs at least two outcomes, has []"),
        (["Yes", "Yes"], "outcome 'Yes' is listed twice"),
        (["Yes", "yes", "No"], "outcome 'yes' is listed twice"),
    ],
)
def test_outcome_lists_that_broke_the_reshape(
    tmp_path: Path, outcomes: list[str], problem: str
) -> None:
    path = write_jsonl(tmp_path / "t.tape.jsonl", multi_header(outcomes),
                       {"market": "m0", "t": [100, 200, 300], "p": [0.1, 0.2, 0.3]})  # fmt: skip
    refused(path, "market m0", problem)


def test_a_flat_price_list_for_a_multi_outcome_market(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.tape.jsonl", multi_header(["A", "B", "C"]),
                       {"market": "m0", "t": [100, 200], "p": [0.1, 0.2]})  # fmt: skip
    refused(path, "market m0", "3 outcomes")
    ragged = {"market": "m0", "t": [100, 200], "p": [[0.1, 0.2, 0.7], [0.5, 0.5]]}
    refused(write_jsonl(tmp_path / "r.tape.jsonl", multi_header(["A", "B", "C"]), ragged),
            "market m0", "3 outcomes")  # fmt: skip


@pytest.mark.parametrize("instant", [2**70, 2**63, -(2**63) - 1, -5, 4_102_444_800])
def test_instants_out_of_range(tmp_path: Path, instant: int) -> None:
    path = write_jsonl(tmp_path / "t.tape.jsonl", header(),
                       {"market": "a", "t": [100, instant], "p": [0.1, 0.2]})  # fmt: skip
    refused(path, "market a", "instant", "2100-01-01")


def test_a_resolution_at_2_to_the_63(tmp_path: Path) -> None:
    """Accepted today; a replay then asked numpy for marks every hour until 2**63 (777 TiB)."""
    head = header(resolutions=[{"market": "a", "ts": 2**63, "winner": "Yes"}])
    path = write_jsonl(tmp_path / "t.tape.jsonl", head, {"market": "a", "t": [100], "p": [0.1]})
    refused(path, "market a", "resolution instant", "2100-01-01")


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("open_ts", 2**64, "open_ts t=18446744073709551616 is outside"),
        ("close_ts", -1, "close_ts t=-1 is outside"),
        ("end_ts", 2**63, "end_ts t=9223372036854775808 is outside"),
        ("covered_until", 2**70, "covered_until t=1180591620717411303424 is outside"),
        ("volume_history", [[2**63, 5.0]], "volume history instant t=9223372036854775808"),
    ],
)
def test_market_instants_out_of_range(
    tmp_path: Path, field: str, value: object, problem: str
) -> None:
    head = header([{"id": "a", "question": "A?", "outcomes": ["Yes", "No"], field: value}])
    path = write_jsonl(tmp_path / "t.tape.jsonl", head, {"market": "a", "t": [100], "p": [0.1]})
    refused(path, "market a", problem, "1970-01-01..2100-01-01")


def test_volume_must_be_a_finite_non_negative_number(tmp_path: Path) -> None:
    head = header([{"id": "a", "question": "A?", "outcomes": ["Yes", "No"], "volume": -1}])
    path = write_jsonl(tmp_path / "t.tape.jsonl", head, {"market": "a", "t": [100], "p": [0.1]})
    refused(path, "market a", "volume -1")


def test_two_resolutions_of_one_market(tmp_path: Path) -> None:
    """The second one silently won."""
    twice = [{"market": "a", "ts": 300, "winner": w} for w in ("Yes", "No")]
    path = write_jsonl(tmp_path / "t.tape.jsonl", header(resolutions=twice),
                       {"market": "a", "t": [100], "p": [0.1]})  # fmt: skip
    refused(path, "market a", "resolved twice")
    market = MarketInfo(id="a", question="", outcomes=("Yes", "No"))
    with pytest.raises(TapeError, match="market a: resolved twice"):
        Tape.from_series([market], {"a": (np.array([1]), np.array([0.5]))},
                         [Resolution(market="a", ts=5, winner="Yes")] * 2)  # fmt: skip


@pytest.mark.parametrize("price", [True, "0.5", None, [0.5]])
def test_a_price_that_is_not_a_number(tmp_path: Path, price: Any) -> None:
    """`true` was read as 1.0 and "0.5" as 0.5."""
    path = write_jsonl(tmp_path / "t.tape.jsonl", header(),
                       {"market": "a", "t": [100, 200], "p": [price, 0.2]})  # fmt: skip
    message = refused(path, "market a", "line 2")
    assert "Traceback" not in message


@pytest.mark.parametrize("instant", [True, "100", 1.5])
def test_an_instant_that_is_not_an_integer(tmp_path: Path, instant: Any) -> None:
    path = write_jsonl(tmp_path / "t.tape.jsonl", header(),
                       {"market": "a", "t": [instant, 200], "p": [0.1, 0.2]})  # fmt: skip
    refused(path, "market a", "line 2")


def write_members(path: Path, head: dict[str, Any], members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("meta.json", json.dumps(head))
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def four_markets() -> dict[str, Any]:
    return header([{"id": f"m{i}", "question": "?", "outcomes": ["Yes", "No"]} for i in range(4)])


def good_columns() -> dict[str, bytes]:
    return {
        "offsets.npy": npy(np.array([0, 1, 2, 3, 4], dtype="<i8")),
        "times.npy": npy(np.array([100, 100, 100, 100], dtype="<i8")),
        "prices.npy": npy(np.full(4, 0.5)),
    }


def with_prices(member: bytes) -> dict[str, bytes]:
    return {**good_columns(), "prices.npy": member}


def test_offsets_two_entries_short(tmp_path: Path) -> None:
    """Three offsets for four markets crashed in numpy's broadcasting."""
    members = {**good_columns(), "offsets.npy": npy(np.array([0, 2, 4], dtype="<i8"))}
    path = write_members(tmp_path / "t.tape", four_markets(), members)
    refused(path, "offsets", "3 entries", "4 markets")
    assert load_tape(write_members(tmp_path / "ok.tape", four_markets(), good_columns()))


def test_npy_header_claiming_ten_to_the_eleven_floats(tmp_path: Path) -> None:
    """numpy allocated the claimed 745 GiB before reading a byte of it."""
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        head, {"descr": "<f8", "fortran_order": False, "shape": (10**11,)}
    )
    claim = head.getvalue() + np.zeros(3).tobytes()
    path = write_members(tmp_path / "t.tape", four_markets(), with_prices(claim))
    refused(path, "prices.npy", "claims 100000000000", "holds 24 bytes")


@pytest.mark.parametrize(
    ("member", "problem"),
    [
        (npy(np.array([[0.5, 0.5], [0.5, 0.5]])), "(2, 2)"),
        (npy(np.full(4, 0.5, dtype=">f8")), ">f8"),
        (npy(np.full(4, 0.5, dtype="<f4")), "<f4"),
        (npy(np.full(4, 0.5))[:-5], "holds 27 bytes"),
        (b"\x93NUMPY\x01\x00\xff\x00{'descr'", "header"),
        (b"not an npy at all", "not a .npy"),
    ],
)
def test_corrupt_npy_members(tmp_path: Path, member: bytes, problem: str) -> None:
    path = write_members(tmp_path / "t.tape", four_markets(), with_prices(member))
    refused(path, "prices.npy", problem)


def gzip_bomb(size: int) -> bytes:
    """``size`` bytes of spaces, gzipped: about a thousand to one."""
    return gzip.compress(b" " * size, compresslevel=9)


def test_a_gzip_bomb_stops_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "bomb.tape.jsonl.gz"
    path.write_bytes(gzip.compress(json.dumps(header()).encode() + b"\n") + gzip_bomb(8 << 20))
    assert path.stat().st_size < 64 << 10
    with pytest.raises(TapeError) as info:
        load_tape(path, max_bytes=1 << 20)
    assert str(info.value) == (
        f"{path}: decompresses to more than 1.0 MiB, the limit for a tape "
        "(ARENA_TAPE_MAX_BYTES raises it)"
    )


def test_the_limit_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bomb.tape.jsonl.gz"
    path.write_bytes(gzip_bomb(3 << 20))
    monkeypatch.setenv("ARENA_TAPE_MAX_BYTES", str(2 << 20))
    refused(path, "more than 2.0 MiB")
    monkeypatch.setenv("ARENA_TAPE_MAX_BYTES", "lots")
    refused(path, "ARENA_TAPE_MAX_BYTES='lots' is not a number of bytes")


def test_a_zip_bomb_is_refused_before_it_is_inflated(tmp_path: Path) -> None:
    members = with_prices(npy(np.zeros(1 << 20)))  # 8 MiB of zeros
    path = write_members(tmp_path / "t.tape", four_markets(), members)
    assert path.stat().st_size < 64 << 10
    with pytest.raises(TapeError, match=r"prices\.npy.*more than 1\.0 MiB"):
        load_tape(path, max_bytes=1 << 20)
    bomb_meta = write_members(tmp_path / "m.tape", four_markets(), good_columns())
    with (
        pytest.warns(UserWarning, match="Duplicate name"),
        zipfile.ZipFile(bomb_meta, "a", compression=zipfile.ZIP_DEFLATED) as zf,
    ):
        zf.writestr("meta.json", b" " * (4 << 20))  # a second, huge meta.json shadows the first
    with pytest.raises(TapeError, match=r"meta\.json.*more than 1\.0 MiB"):
        load_tape(bomb_meta, max_bytes=1 << 20)


def test_a_line_break_in_a_market_id_stays_inside_one_line(tmp_path: Path) -> None:
    twice = [{"id": "a\nb", "question": "?", "outcomes": ["Yes", "No"]}] * 2
    path = write_jsonl(tmp_path / "t.tape.jsonl", header(twice))
    assert refused(path).endswith("market a\\nb: appears twice in the market list")
