"""The one ISO-8601 parser that ``arena replay --start`` and ``arena tapes record`` share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.run.cohort import parse_instant as cohort_parse
from replays.errors import TapeError
from replays.instants import parse_instant
from replays.recorder import parse_instant as recorder_parse


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-12", datetime(2024, 5, 12, tzinfo=UTC)),
        (" 2024-05-12 ", datetime(2024, 5, 12, tzinfo=UTC)),  # the recorder took blanks
        ("2024-05-12Z", datetime(2024, 5, 12, tzinfo=UTC)),  # replay took a bare date's Z
        ("2024-05-12 10:00", datetime(2024, 5, 12, 10, tzinfo=UTC)),
        ("2024-05-12T10:00:00.5Z", datetime(2024, 5, 12, 10, 0, 0, 500_000, tzinfo=UTC)),
        ("2024-05-12T12:00+02:00", datetime(2024, 5, 12, 10, tzinfo=UTC)),
    ],
)
def test_what_either_former_parser_took_is_taken(text: str, expected: datetime) -> None:
    got = parse_instant(text)
    assert got == expected and got.tzinfo is UTC


def test_the_errors_name_the_text_and_where_it_came_from() -> None:
    with pytest.raises(ValueError, match=r"^'soon' is not an ISO-8601 date or instant$"):
        parse_instant("soon")
    with pytest.raises(TapeError, match=r"^--end: 'soon' is not an ISO-8601 date or instant$"):
        recorder_parse("soon", "--end")


def test_arena_and_the_recorder_share_the_one_parser() -> None:
    assert cohort_parse is parse_instant


@given(
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2099, 1, 1)),
    st.integers(min_value=-12 * 60, max_value=14 * 60),
)
def test_any_written_instant_reads_back_as_the_same_moment(moment: datetime, minutes: int) -> None:
    aware = moment.replace(tzinfo=timezone(timedelta(minutes=minutes)))
    assert parse_instant(aware.isoformat()) == aware
    assert parse_instant(aware.isoformat()).tzinfo is UTC
