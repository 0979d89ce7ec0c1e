"""The forward as-of walk gives what a binary search per market and instant gives."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replays.asof import AsOfWalk, PriceWalk, UniverseWalk
from replays.markets import MarketInfo
from replays.tape import Tape, spans


@st.composite
def tapes_and_instants(draw: st.DrawFn) -> tuple[Tape, list[int], np.ndarray]:
    """Up to six markets (binary or three-way, some with one point), each on its own ragged
    grid in [0, 60], a chosen subset in a chosen order, and sorted instants in [-5, 70]
    (repeats allowed: a decision and a mark can share an instant)."""
    n = draw(st.integers(1, 6))
    markets, series = [], {}
    for k in range(n):
        times = sorted(draw(st.sets(st.integers(0, 60), min_size=1, max_size=25)))
        outcomes = ("Yes", "No") if draw(st.booleans()) else ("A", "B", "C")
        width = 1 if len(outcomes) == 2 else 3
        size = len(times) * width
        prices = np.array(draw(st.lists(st.integers(0, 1000), min_size=size, max_size=size)))
        prices = prices / 1000
        markets.append(MarketInfo(id=f"m{k}", question="?", outcomes=outcomes))
        series[f"m{k}"] = (np.array(times), prices if width == 1 else prices.reshape(-1, width))
    tape = Tape.from_series(markets, series, {})
    chosen = draw(st.permutations(range(n)).map(lambda p: p[: draw(st.integers(1, n))]))
    instants = np.array(sorted(draw(st.lists(st.integers(-5, 70), min_size=1, max_size=40))))
    return tape, list(chosen), instants


@settings(max_examples=300, deadline=None)
@given(tapes_and_instants())
def test_the_walk_equals_searchsorted_at_every_instant(
    case: tuple[Tape, list[int], np.ndarray],
) -> None:
    tape, chosen, instants = case
    walk = PriceWalk(tape, chosen)
    expected = np.stack([tape.asof_index(m, instants) for m in chosen], axis=1)
    for row, ts in enumerate(instants.tolist()):
        walk.advance(ts)
        assert walk.position.tolist() == expected[row].tolist()
        for j, m in enumerate(chosen):
            i = int(expected[row, j])
            want = np.nan if i < 0 else tape.yes(m)[i]
            np.testing.assert_equal(walk.yes[j], want)


def test_a_market_that_passes_many_points_catches_up_in_one_step() -> None:
    """Series a: points at 0, 1, ..., 9; b: one point at 5; c: none. Walking to 3, then 3
    again, then 100: a moves 0 -> 3 -> 9, b is -1 until 5, c never moves."""
    times = np.array([*range(10), 5])
    walk = AsOfWalk(times, starts=np.array([0, 10, 11]), ends=np.array([10, 11, 11]))
    assert list(walk.position) == [-1, -1, -1]
    assert list(walk.advance(3)) == [0]
    assert list(walk.position) == [3, -1, -1]
    assert list(walk.advance(3)) == []
    assert list(walk.advance(100)) == [0, 1]
    assert list(walk.position) == [9, 0, -1]


def test_the_walk_never_goes_back_and_hands_out_no_writable_cursor() -> None:
    walk = AsOfWalk(np.array([1, 2]), starts=np.array([0]), ends=np.array([2]))
    walk.advance(2)
    with pytest.raises(ValueError, match="went back from t=2 to t=1"):
        walk.advance(1)
    with pytest.raises(ValueError, match="read-only"):
        walk.position[0] = 0


@settings(max_examples=200, deadline=None)
@given(tapes_and_instants(), st.integers(1, 30), st.integers(-5, 70), st.integers(-5, 70))
def test_a_tapes_instants_merged_in_blocks_are_the_unique_points(
    case: tuple[Tape, list[int], np.ndarray], block: int, first: int, last: int
) -> None:
    """Whatever the block size, the instants are those of one unique() over every point."""
    tape, chosen, _ = case
    points = np.concatenate([tape.times(m) for m in chosen])
    expected = np.unique(points[(points >= first) & (points <= last)])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("replays.tape._UNION_BLOCK", block)
        found = tape.instants(chosen, first, last)
    assert found.dtype == np.int64
    assert found.tolist() == expected.tolist()


def precomputed(tape: Tape, chosen: list[int], instants: np.ndarray) -> tuple[np.ndarray, ...]:
    """The instants x markets tables the runner used to build (point, YES, volume): the
    reference the walk must reproduce row for row."""
    rows = np.empty((instants.size, len(chosen)), dtype=np.int64)
    first = np.empty_like(rows, dtype=np.float64)
    volume = np.full_like(first, np.nan)
    for j, m in enumerate(chosen):
        idx = tape.asof_index(m, instants)
        idx[instants > tape.coverage(m)] = -1
        rows[:, j] = idx
        first[:, j] = np.where(idx >= 0, tape.yes(m)[np.maximum(idx, 0)], np.nan)
        for ts, value in tape.markets[m].volume_history:
            volume[instants >= ts, j] = value
    return rows, first, volume


@st.composite
def covered_tapes(draw: st.DrawFn) -> tuple[Tape, list[int], np.ndarray]:
    """As ``tapes_and_instants``, with some markets' coverage cut short (or recorded past
    their last point) and some with a volume history."""
    tape, chosen, instants = draw(tapes_and_instants())
    markets = []
    for m, info in enumerate(tape.markets):
        first_point = int(tape.times(m)[0])
        covered = draw(st.none() | st.integers(first_point, 80))
        stamps = sorted(draw(st.sets(st.integers(0, 70), max_size=4)))
        history = tuple((t, float(draw(st.integers(0, 10**6)))) for t in stamps)
        markets.append(msgspec.structs.replace(info, covered_until=covered, volume_history=history))
    offsets, times, prices = tape.columns
    return Tape(markets, offsets, times, prices, {}), chosen, instants


@pytest.mark.slow  # 300 generated tapes
@settings(max_examples=300, deadline=None)
@given(covered_tapes())
def test_the_universe_walk_equals_the_precomputed_tables(
    case: tuple[Tape, list[int], np.ndarray],
) -> None:
    tape, chosen, instants = case
    rows, first, volume = precomputed(tape, chosen, instants)
    walk = UniverseWalk(tape, chosen)
    kept = []
    for row, ts in enumerate(instants.tolist()):
        now = walk.at(ts)
        kept.append(now)
        assert list(now.position) == list(rows[row])
        np.testing.assert_array_equal(now.yes, first[row])
        np.testing.assert_array_equal(now.volume, volume[row])
        assert not (now.position.flags.writeable or now.yes.flags.writeable)
        for k, j in enumerate(walk.multi.tolist()):  # every outcome of the non-binary markets
            width = len(tape.markets[chosen[j]].outcomes)
            i = int(rows[row, j])
            quote = tape.point(chosen[j], i) if i >= 0 else (np.nan,) * width
            np.testing.assert_array_equal(now.rows[k, :width], quote)
            assert np.isnan(now.rows[k, width:]).all()
    for row, now in enumerate(kept):  # an earlier instant's arrays still show that instant
        np.testing.assert_array_equal(now.yes, first[row])


def test_points_between_counts_come_from_the_flat_columns() -> None:
    """a (binary): points at 1, 2, 3 priced .1 .2 .3; b (three-way): points at 2, 5 priced
    (.1 .2 .7), (.3 .3 .4). a's points 1..3 and b's 0..1 are a's last two and b's first."""
    markets = [
        MarketInfo(id="a", question="?", outcomes=("Yes", "No")),
        MarketInfo(id="b", question="?", outcomes=("X", "Y", "Z")),
    ]
    series = {
        "a": (np.array([1, 2, 3]), np.array([0.1, 0.2, 0.3])),
        "b": (np.array([2, 5]), np.array([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4]])),
    }
    tape = Tape.from_series(markets, series, {})
    times, prices = tape.points(np.array([0, 1]), np.array([1, 0]), np.array([3, 1]))
    assert times.tolist() == [2, 3, 2]
    assert prices.tolist() == [0.2, 0.3, 0.1, 0.2, 0.7]
    times, prices = tape.points(np.array([1, 0]), np.array([1, 3]), np.array([2, 3]))
    assert times.tolist() == [5] and prices.tolist() == [0.3, 0.3, 0.4]
    assert spans(np.array([7, 0, 4]), np.array([1, 1, 1])).tolist() == [7, 0, 4]
    assert spans(np.array([7, 0, 4]), np.array([2, 0, 3])).tolist() == [7, 8, 4, 5, 6]
    assert spans(np.array([], dtype=np.int64), np.array([], dtype=np.int64)).tolist() == []
