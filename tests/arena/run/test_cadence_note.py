"""The note a replay prints when its decisions come less often than its markets trade.

The BTC books sample's markets each trade for under half an hour; under the default weekly
cadence a cohort on it decides once, on the one market open at its start, and a newcomer sees
an agent with one bet. Worked from the tape: the default start is 08:46 (the first market's
first price, 08:45:13, rounded up to a minute), whose recording ends at 09:13:01, so it trades
27 minutes in the cohort; the other 11 markets list after the start. With rolling listing the
longest is 0xdb317d…'s, 09:30:16 to 09:59:18, 29 minutes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from arena.run.cohort import CohortConfig
from arena.run.plan import cadence_note, plan_cohorts
from replays.samples import sample_books_paths
from replays.tapefile import load_tape
from tests.conftest import Arena

NOTE = (
    "note: decisions come weekly, but no market here trades that long (the longest, 27 min), "
    "so each is decided once at most: --decisions 1m decides through their lives, and "
    "--listing rolling takes in the 11 markets listed after the start"
)


def words(text: str) -> str:
    """The output as one line: Rich wraps a long note at the terminal's width."""
    return " ".join(text.split())


def test_the_books_sample_with_defaults_says_why_it_trades_once(
    arena: Arena, tmp_path: Path
) -> None:
    done = arena("replay", "--tape", "sample-books", "--agent", "fav=favourite",
                 "--db", tmp_path / "a.db")  # fmt: skip
    assert done.exit_code == 0, done.output
    assert NOTE in words(done.stdout)


def test_following_the_note_decides_every_market(arena: Arena, tmp_path: Path) -> None:
    """``--decisions 1m --listing rolling``: no note, and favourite, which bets once on each
    market it decides, bets on all 12 (once, under the defaults)."""
    args = ("replay", "--tape", "sample-books", "--agent", "fav=favourite")
    once = arena.json(*args, "--db", tmp_path / "once.db")
    every = arena(*args, "--decisions", "1m", "--listing", "rolling", "--db", tmp_path / "b.db")
    assert every.exit_code == 0, every.output
    assert "note:" not in every.stdout
    again = arena.json(*args, "--decisions", "1m", "--listing", "rolling",
                       "--db", tmp_path / "b.db")  # fmt: skip
    assert [a["n_bets"] for a in once["leaderboard"]] == [1]
    assert [a["n_bets"] for a in again["leaderboard"]] == [12]


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, NOTE),
        ({"listing": "rolling"}, "(the longest, 29 min)"),  # every market, none told to roll
        ({"decision_cadence": "6h"}, "note: decisions come every 6h, but no market"),
        ({"decision_cadence": "30m"}, "--decisions 1m decides through their lives"),
        ({"decision_cadence": "1m"}, None),  # 28 decisions, 08:46 to 09:13
        ({"decision_cadence": "tick"}, None),
    ],
)
def test_the_note_names_the_longest_life_and_a_cadence_inside_it(
    settings: dict[str, str], expected: str | None
) -> None:
    tape = load_tape(sample_books_paths()[0])
    start = datetime(2026, 9, 28, 8, 46, tzinfo=UTC)
    config = CohortConfig(start=start, agents={"fav": "favourite"}, **settings)  # type: ignore[arg-type]
    planned, _ = plan_cohorts(tape, [config])
    note = cadence_note(tape, planned)
    if expected is None:
        assert note is None
    else:
        assert note is not None and expected in note
        assert ("--listing rolling" in note) == ("listing" not in settings)


def test_the_election_sample_has_no_note(arena: Arena, tmp_path: Path) -> None:
    """Its markets trade for months: a weekly decision meets each many times."""
    done = arena("replay", "--db", tmp_path / "s.db")
    assert done.exit_code == 0, done.output
    assert "note:" not in done.stdout
    assert "digest c890b6c510ee6c3dffef419d83a2599cddc15f9af968a50396e0f063b89d7c3b" in done.stdout
