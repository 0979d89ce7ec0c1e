"""A market's facts and how it ended: ``MarketInfo`` and ``Resolution``, the records a tape is
made of besides its price columns.

They live apart from ``replays.tape`` so that ``replays.validate`` can check them without
importing the tape it validates: ``validate`` imports this module, ``tape`` imports both, and
no import goes round in a circle.
"""

from __future__ import annotations

import msgspec

_YES_NO = {"yes", "no"}


class MarketInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A market's facts besides its prices. Some are knowable only afterwards and must never
    reach an agent: ``close_ts`` (when trading actually stopped: Gamma ``closedTime``) and
    ``volume`` (the volume when the tape was made, final for a closed market). What an agent
    may see instead is ``end_ts`` (the scheduled end, Gamma ``endDate``, known from the
    market's creation) and ``volume_history`` as of its instant.

    ``covered_until`` is how far the recording reaches for this market: up to that instant
    (inclusive) the latest point is the price; after it the tape knows nothing. None on tapes
    made before coverage was recorded; ``Tape.coverage`` gives the documented default.
    """

    id: str
    question: str
    outcomes: tuple[str, ...]
    description: str = ""
    category: str | None = None
    tags: tuple[str, ...] = ()
    volume: float = 0.0
    open_ts: int | None = None
    close_ts: int | None = None
    clob_token_ids: tuple[str, ...] = ()
    end_ts: int | None = None
    covered_until: int | None = None
    volume_history: tuple[tuple[int, float], ...] = ()

    @property
    def is_binary(self) -> bool:
        """Exactly a YES and a NO outcome (methodology §1.4); "Over"/"Under" is not binary."""
        outcomes = self.outcomes
        return len(outcomes) == 2 and {outcomes[0].lower(), outcomes[1].lower()} == _YES_NO

    @property
    def yes_column(self) -> int:
        """Which outcome column holds YES (binary markets may list NO first)."""
        return [o.lower() for o in self.outcomes].index("yes") if self.is_binary else 0

    @property
    def stored_columns(self) -> int:
        """How many price columns the tape stores: one (YES) for binary markets."""
        return 1 if self.is_binary else len(self.outcomes)


class Resolution(msgspec.Struct, frozen=True, kw_only=True):
    """How a market ended; ``winner`` is one of its outcome labels, or None when voided."""

    market: str
    ts: int
    winner: str | None
