"""ISO-8601 instants as the command line and the importers' options give them.

One parser for both (``arena replay --start``, ``arena tapes record --start``, the recorder's
checkpoints): ``replays`` is the lower package, so ``arena`` imports it from here.
"""

from __future__ import annotations

from datetime import UTC, datetime


def parse_instant(text: str) -> datetime:
    """An ISO-8601 date or instant as an aware UTC datetime; a date, or a time without an
    offset, is taken as UTC (tapes are all in UTC). Surrounding blanks and a ``Z`` suffix are
    accepted (Python's own parser refuses ``2024-05-12Z``); anything else is a one-line
    ValueError."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO-8601 date or instant") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
