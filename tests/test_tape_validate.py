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
from replays.tape import MarketInfo, Resolution, Tape
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
    refused(path, "corrupt columnar tape")


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
