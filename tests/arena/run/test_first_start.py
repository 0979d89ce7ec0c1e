"""The default start on any tape: the first instant a cohort there decides something; on the
embedded sample, its documented 2024-09-01 (the digest the README quotes)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from arena.run.cohort import CohortConfig
from arena.run.first_start import first_start, tradable_from
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from replays.tapefile import save_tape
from tests.conftest import Arena

T0 = 1_790_000_000  # 2026-09-21 14:13:20 UTC, not a whole minute
MINUTE = 60


def tape() -> Tape:
    """gone: priced at T0 + 10 s, closed at T0 + 30 s, before the whole minute T0 + 40 s.
    later: opens at T0 + 100 s (priced since T0), a whole minute: tradable from then.
    last: priced at T0 + 1 h. All resolve at T0 + 1 day."""
    markets = [
        MarketInfo(id="gone", question="?", outcomes=("Yes", "No"), volume=3.0, close_ts=T0 + 30),
        MarketInfo(id="later", question="?", outcomes=("Yes", "No"), volume=2.0, open_ts=T0 + 100),
        MarketInfo(id="last", question="?", outcomes=("Yes", "No"), volume=1.0),
    ]
    series = {
        "gone": (np.array([T0 + 10]), np.array([0.5])),
        "later": (np.array([T0, T0 + 3_000]), np.array([0.4, 0.6])),
        "last": (np.array([T0 + 3_600, T0 + 7_200]), np.array([0.3, 0.2])),
    }
    resolutions = [Resolution(market=m.id, ts=T0 + 86_400, winner="Yes") for m in markets]
    return Tape.from_series(markets, series, resolutions, source="first-start")


def config() -> CohortConfig:
    return CohortConfig(start=datetime(2020, 1, 1, tzinfo=UTC), agents={"h": "hold"})


def test_tradable_instants_are_first_prices_or_openings_rounded_up_to_a_minute() -> None:
    # T0 = ...:13:20, so T0 + 10 s rounds up to T0 + 40 s (14:14); T0 + 100 s is 14:15 itself
    assert tradable_from(tape()).tolist() == [T0 + 40, T0 + 100, T0 + 3_640]
    assert all(t % MINUTE == 0 for t in tradable_from(tape()).tolist())


def test_the_first_start_skips_an_instant_with_nothing_open() -> None:
    """At T0 + 40 s gone has closed and later has not opened: nothing to decide."""
    assert first_start(tape(), config()) == T0 + 100


def test_no_start_when_the_tape_covers_nothing_open() -> None:
    cut = tape()
    gone_only = Tape.from_series(
        [cut.markets[0]], {"gone": (np.array([T0 + 10]), np.array([0.5]))}, [], source="x"
    )
    assert first_start(gone_only, config()) is None


@pytest.fixture
def tape_file(tmp_path: Path) -> Path:
    path = tmp_path / "any.tape"
    save_tape(tape(), path)
    return path


def test_a_replay_without_a_start_begins_at_the_tapes_first(
    arena: Arena, tape_file: Path, tmp_path: Path
) -> None:
    data = arena.json("replay", "--tape", tape_file, "--agent", "h=hold", "--db", tmp_path / "a")
    [cohort] = data["cohorts"]
    assert cohort["start"] == "2026-09-21T14:15:00Z"  # T0 + 100 s


def test_an_empty_start_names_the_tapes_range(
    arena: Arena, tape_file: Path, tmp_path: Path
) -> None:
    result = arena("replay", "--tape", tape_file, "--start", "2024-09-01", "--db", tmp_path / "b")
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert line.endswith(
        "open with a price at 2024-09-01 00:00 UTC: "
        "the tape runs 2026-09-21 14:13 UTC to 2026-09-21 16:13 UTC"
    ), line


def test_a_tape_with_nothing_to_decide_is_one_line(arena: Arena, tmp_path: Path) -> None:
    path = tmp_path / "gone.tape"
    only = tape()
    save_tape(
        Tape.from_series(
            [only.markets[0]], {"gone": (np.array([T0 + 10]), np.array([0.5]))}, [], source="x"
        ),
        path,
    )
    result = arena("replay", "--tape", path, "--db", tmp_path / "c")
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert "has an open, priced market it covers and a decision to make" in line


def test_the_sample_keeps_its_documented_start(arena: Arena, tmp_path: Path) -> None:
    """The sample's first tradable instant is months earlier; its default stays 2024-09-01, the
    cohort the README's digest is of."""
    data = arena.json("replay", "--universe", "3", "--agent", "h=hold", "--db", tmp_path / "s")
    assert data["cohorts"][0]["start"] == "2024-09-01T00:00:00Z"
