"""A tape whose markets share one series of instants keeps it once: the same content, the same
hash and the same answers as the flat layout, for a fraction of the memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replays.asof import PriceWalk
from replays.errors import TapeError
from replays.markets import MarketInfo, Resolution
from replays.synthetic import anchored_walk_tape
from replays.tape import Tape
from replays.tapefile import load_tape, save_tape

YES_NO = ("Yes", "No")


def binary(k: int) -> MarketInfo:
    return MarketInfo(id=f"g{k}", question=f"G{k}?", outcomes=YES_NO)


def held_flat(tape: Tape, monkeypatch: pytest.MonkeyPatch) -> Tape:
    """The same content as ``tape`` in the flat layout (one instant per point)."""
    offsets, times, prices = tape.columns
    with monkeypatch.context() as patch:
        patch.setattr("replays.tape._shared_grid", lambda offsets, times: None)
        return Tape(tape.markets, offsets, times, prices, tape.resolutions)


def test_a_grid_is_kept_once_and_counted_by_hand() -> None:
    """3 markets x 4 instants: the grid's 4 instants (32 B), 12 prices (96 B), offsets and
    price offsets (4 each, 64 B) and where each market's instants start (3, 24 B): 216 bytes,
    where one instant per point would hold 8 more instants (64 B) for 280."""
    grid = np.array([10, 20, 30, 40])
    prices = np.linspace(0.1, 0.9, 12)
    tape = Tape.on_grid([binary(k) for k in range(3)], grid, prices, {})
    assert tape.nbytes == 216
    assert tape.n_points == 12
    offsets, times, stored = tape.columns
    assert offsets.tolist() == [0, 4, 8, 12]
    assert times.tolist() == [10, 20, 30, 40] * 3
    assert np.array_equal(stored, prices)
    assert tape.times(2).tolist() == [10, 20, 30, 40]
    assert not tape.times(2).flags.writeable
    assert tape.point(1, 2) == (prices[6], 1.0 - prices[6])
    assert tape.span() == (10, 40)


def test_flat_columns_that_share_a_grid_are_kept_as_one(monkeypatch: pytest.MonkeyPatch) -> None:
    tape = anchored_walk_tape(30, 50, seed=3)
    flat = held_flat(tape, monkeypatch)
    assert flat.nbytes - tape.nbytes == 29 * 50 * 8  # 29 copies of the 50 instants
    offsets, times, prices = tape.columns
    assert Tape(tape.markets, offsets, times, prices, tape.resolutions).nbytes == tape.nbytes


def test_markets_with_other_instants_stay_flat() -> None:
    markets = [binary(0), binary(1)]
    series = {"g0": ([1, 2, 3], [0.1, 0.2, 0.3]), "g1": ([1, 2, 4], [0.4, 0.5, 0.6])}
    tape = Tape.from_series(markets, series, {})
    assert tape.nbytes == 6 * 8 + 6 * 8 + 3 * 8 + 3 * 8 + 2 * 8  # instants, prices, offsets x2
    assert tape.times(1).tolist() == [1, 2, 4]


@st.composite
def grid_tapes(draw: st.DrawFn) -> Tape:
    n_markets = draw(st.integers(1, 5))
    steps = draw(st.lists(st.integers(1, 1_000), min_size=1, max_size=8))
    grid = 1_700_000_000 + np.cumsum(steps)
    multi = draw(st.lists(st.booleans(), min_size=n_markets, max_size=n_markets))
    markets = [
        MarketInfo(id=f"g{k}", question="?", outcomes=("A", "B", "C") if m else ("No", "Yes"))
        for k, m in enumerate(multi)
    ]
    size = st.floats(0.0, 1.0)
    column = np.concatenate(
        [
            draw(st.lists(size, min_size=m.stored_columns * grid.size,
                          max_size=m.stored_columns * grid.size))
            for m in markets
        ]
    )  # market after market, a point's stored prices together  # fmt: skip
    resolutions = {"g0": Resolution(market="g0", ts=int(grid[-1]) + 1, winner=None)}
    return Tape.on_grid(markets, grid, column, resolutions)


@settings(max_examples=60, deadline=None)
@given(tape=grid_tapes(), data=st.data())
def test_a_grid_answers_as_the_flat_layout_does(tape: Tape, data: st.DataObject) -> None:
    with pytest.MonkeyPatch.context() as patch:
        flat = held_flat(tape, patch)
    assert tape.hash == flat.hash
    n = len(tape.markets)
    first, last = tape.span()
    lo = data.draw(st.integers(first - 5, last + 5))
    hi = data.draw(st.integers(lo, last + 5))
    chosen = data.draw(st.lists(st.integers(0, n - 1), max_size=n, unique=True))
    assert np.array_equal(tape.instants(chosen, lo, hi), flat.instants(chosen, lo, hi))
    for m in range(n):
        assert np.array_equal(tape.times(m), flat.times(m))
        for got, want in zip(tape.history(m, hi), flat.history(m, hi), strict=True):
            assert np.array_equal(got, want)
    markets = np.arange(n)
    points = tape.times(0).size
    since = np.asarray(data.draw(st.lists(st.integers(0, points), min_size=n, max_size=n)))
    until = np.maximum(since, data.draw(st.integers(0, points)))
    for got, want in zip(
        tape.points(markets, since, until), flat.points(markets, since, until), strict=True
    ):
        assert np.array_equal(got, want)
    walks = PriceWalk(tape, markets), PriceWalk(flat, markets)
    for ts in sorted({lo, hi, first, last}):
        for walk in walks:
            walk.advance(ts)
        assert np.array_equal(walks[0].position, walks[1].position)
        assert np.array_equal(walks[0].yes, walks[1].yes, equal_nan=True)


def test_a_grid_tape_round_trips_through_both_forms(tmp_path: Path) -> None:
    tape = anchored_walk_tape(4, 20, seed=1)
    for name in ("g.tape", "g.tape.jsonl.gz"):
        save_tape(tape, tmp_path / name)
        loaded = load_tape(tmp_path / name, verify_hash=True)
        assert loaded.hash == tape.hash
        assert loaded.nbytes == tape.nbytes  # the loaded columns are kept as the grid again


def test_a_grid_that_does_not_fit_the_offsets_is_refused() -> None:
    grid = np.array([1, 2, 3])
    with pytest.raises(TapeError, match="corrupt tape: a market's points do not fit the grid"):
        Tape([binary(0), binary(1)], np.array([0, 2, 6]), grid, np.full(6, 0.5), {}, grid=True)


def test_a_grid_with_a_repeated_instant_names_the_first_market() -> None:
    with pytest.raises(TapeError, match="market g0: duplicate instants at t=2"):
        Tape.on_grid([binary(0), binary(1)], np.array([1, 2, 2]), np.full(6, 0.5), {})
