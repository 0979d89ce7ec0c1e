"""The in-memory tape, both file forms, the content hash and the synthetic generator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replays.errors import TapeError
from replays.markets import MarketInfo, Resolution
from replays.samples import SAMPLE_HASH, sample_path
from replays.synthetic import random_walk_tape
from replays.tape import Tape
from replays.tapefile import load_tape, save_tape

YES_NO = ("Yes", "No")


def small_tape() -> Tape:
    """One binary market (NO listed first) and one three-way market, hand-sized."""
    binary = MarketInfo(id="b", question="B?", outcomes=("No", "Yes"), volume=10.0)
    multi = MarketInfo(id="m", question="M?", outcomes=("A", "B", "C"), open_ts=50)
    series = {
        "b": (np.array([100, 200, 300]), np.array([[0.8, 0.2], [0.6, 0.4], [0.1, 0.9]])),
        "m": (np.array([150, 250]), np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])),
    }
    resolutions = [
        Resolution(market="m", ts=400, winner="C"),
        Resolution(market="b", ts=350, winner=None),
    ]
    return Tape.from_series([binary, multi], series, resolutions)


def test_is_binary_needs_exactly_yes_and_no() -> None:
    assert MarketInfo(id="x", question="", outcomes=("YES", "no")).is_binary
    assert not MarketInfo(id="x", question="", outcomes=("Over", "Under")).is_binary
    assert not MarketInfo(id="x", question="", outcomes=("Yes", "No", "Maybe")).is_binary


def test_binary_stores_yes_and_derives_no_in_outcome_order() -> None:
    tape = small_tape()
    assert tape.yes(0).tolist() == [0.2, 0.4, 0.9]
    np.testing.assert_allclose(tape.values(0), [[0.8, 0.2], [0.6, 0.4], [0.1, 0.9]])
    assert tape.price_at("b", 250) == pytest.approx((0.6, 0.4))
    assert tape.price_at("m", 250) == (0.1, 0.1, 0.8)
    assert tape.price_at("b", 99) is None


def test_asof_index_and_history_never_look_ahead() -> None:
    tape = small_tape()
    assert tape.asof_index(0, np.array([99, 100, 199, 200, 10_000])).tolist() == [-1, 0, 0, 1, 2]
    times, values = tape.history(0, 250)
    assert times.tolist() == [100, 200]
    assert values.shape == (2, 2)
    assert tape.history(0, 50)[0].size == 0


def test_views_are_read_only_and_facts_add_up() -> None:
    tape = small_tape()
    with pytest.raises(ValueError):
        tape.yes(0)[0] = 0.5
    assert np.shares_memory(tape.times(0), tape.columns[1])
    assert tape.n_points == 5
    assert tape.span() == (100, 300)
    assert tape.index == {"b": 0, "m": 1}


@pytest.mark.parametrize("name", ["t.tape", "t.tape.jsonl.gz", "t.tape.jsonl"])
def test_both_forms_round_trip_with_the_same_hash(tmp_path: Path, name: str) -> None:
    tape = small_tape()
    save_tape(tape, tmp_path / name)
    loaded = load_tape(tmp_path / name, verify_hash=True)
    assert loaded.hash == tape.hash
    assert loaded.markets == tape.markets
    assert loaded.resolutions == tape.resolutions
    assert loaded.values(1).tolist() == tape.values(1).tolist()


def test_saving_twice_gives_identical_bytes(tmp_path: Path) -> None:
    tape = small_tape()
    for name in ("a.tape", "b.tape", "a.tape.jsonl.gz", "b.tape.jsonl.gz"):
        save_tape(tape, tmp_path / name)
    assert (tmp_path / "a.tape").read_bytes() == (tmp_path / "b.tape").read_bytes()
    assert (tmp_path / "a.tape.jsonl.gz").read_bytes() == (
        tmp_path / "b.tape.jsonl.gz"
    ).read_bytes()


def test_hash_is_the_same_however_the_prices_are_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Prices are hashed a block at a time; any block size gives the one-block digest (the
    digest every stored cohort id is built on), and -0.0 hashes as 0.0 in every block."""
    tape = random_walk_tape(20, 300, seed=7, step_seconds=60)
    assert tape.hash == "d0bf674dea476a9cb5a134e7139eef5df5a24edf5b99b1640e4fe992efd8214a"
    offsets, times, prices = tape.columns
    for block in (1, 7, 6_000):
        monkeypatch.setattr("replays.tape._HASH_BLOCK", block)
        assert random_walk_tape(20, 300, seed=7, step_seconds=60).hash == tape.hash
        signed = Tape(tape.markets, offsets, times, prices * -0.0, {})
        assert signed.hash == Tape(tape.markets, offsets, times, prices * 0.0, {}).hash


def test_hash_changes_with_content() -> None:
    base = small_tape()
    other = Tape.from_series(
        base.markets,
        {"b": (base.times(0), base.yes(0) + 0.01), "m": (base.times(1), base.values(1))},
        base.resolutions,
    )
    assert other.hash != base.hash


def test_unknown_extension_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TapeError, match="unknown tape extension"):
        save_tape(small_tape(), tmp_path / "t.csv")


@pytest.mark.parametrize("name", ["t.tape", "t.tape.jsonl", "t.tape.jsonl.gz"])
def test_a_tape_that_cannot_be_written_is_one_line_and_leaves_nothing(
    tmp_path: Path, name: str
) -> None:
    """``arena tapes import ... --out missing/x.tape`` ended in a FileNotFoundError traceback."""
    missing = tmp_path / "missing" / name
    with pytest.raises(TapeError) as caught:
        save_tape(small_tape(), missing)
    assert str(caught.value) == f"{missing}: cannot write: No such file or directory"
    taken = tmp_path / name
    taken.mkdir()  # the tape is written in full, then cannot take the place of a folder
    with pytest.raises(TapeError, match=f"^{taken}: cannot write: "):
        save_tape(small_tape(), taken)
    assert [p.name for p in tmp_path.iterdir()] == [name] and taken.is_dir()
    save_tape(small_tape(), tmp_path / f"x{name}")
    assert load_tape(tmp_path / f"x{name}").hash == small_tape().hash


prices = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(st.integers(min_value=1, max_value=10**6), min_size=1, max_size=30),
    data=st.data(),
)
def test_round_trip_preserves_content_and_hash(
    tmp_path_factory: pytest.TempPathFactory, steps: list[int], data: st.DataObject
) -> None:
    times = np.cumsum(np.array(steps, dtype=np.int64))
    yes = np.array(data.draw(st.lists(prices, min_size=len(steps), max_size=len(steps))))
    market = MarketInfo(id="p", question="P?", outcomes=YES_NO, volume=data.draw(prices))
    tape = Tape.from_series([market], {"p": (times, yes)}, {})
    folder = tmp_path_factory.mktemp("rt")
    for name in ("p.tape", "p.tape.jsonl.gz"):
        save_tape(tape, folder / name)
        loaded = load_tape(folder / name, verify_hash=True)
        assert loaded.hash == tape.hash
        assert loaded.times(0).tolist() == times.tolist()
        assert loaded.yes(0).tolist() == yes.tolist()


def test_random_walk_is_seeded_bounded_and_resolved() -> None:
    a = random_walk_tape(20, 300, seed=7, step_seconds=60)
    assert a.hash == random_walk_tape(20, 300, seed=7, step_seconds=60).hash
    assert a.hash != random_walk_tape(20, 300, seed=8, step_seconds=60).hash
    assert a.n_points == 6000
    assert all(np.array_equal(a.times(m), a.times(0)) for m in range(20))
    all_yes = np.concatenate([a.yes(m) for m in range(20)])
    assert all_yes.min() >= 0.02 and all_yes.max() <= 0.98
    assert np.allclose(all_yes, np.round(all_yes, 3))
    last = int(a.times(0)[-1])
    assert {r.ts for r in a.resolutions.values()} == {last + 60}
    assert {r.winner for r in a.resolutions.values()} <= {"Yes", "No"}
    assert a.markets[0].open_ts == 1_704_067_200 and a.markets[0].close_ts == last


def test_embedded_sample_loads_with_the_documented_facts() -> None:
    tape = load_tape(sample_path(), verify_hash=True)
    assert tape.hash == SAMPLE_HASH  # reports name it 'sample' by this hash
    assert len(tape.markets) == 101
    assert tape.n_points == 44_502
    assert all(m.is_binary for m in tape.markets)
    winners = [r.winner for mid, r in tape.resolutions.items() if not mid.startswith("election")]
    assert (winners.count("Yes"), winners.count("No")) == (44, 56)
    sundays = np.arange(1_715_472_000, 1_730_592_000 + 1, 7 * 86_400)  # 2024-05-12..11-03
    assert len(sundays) == 26
    for m in range(len(tape.markets)):
        idx = tape.asof_index(m, sundays + 2)
        assert (idx >= 0).all()
        assert (tape.times(m)[idx] > sundays - 86_400).all()  # a fresh point, not a stale one
    assert sample_path().stat().st_size < 1_000_000
