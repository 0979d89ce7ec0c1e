"""What a cohort is: its settings (``CohortConfig``) and its identity.

The cohort id is the start date and a hash of the tape and every setting that shapes the log, so
the same inputs always give the same id, from the CLI or from Python. What the cohort trades and
when (its universe and schedule) is planned from these settings in ``arena.run.plan``.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Literal

import pydantic

from ledger.errors import LedgerError
from ledger.ruleset import RULES
from replays.instants import parse_instant as parse_instant  # re-exported: commands read it here

WEEK = 7 * 86_400
_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": WEEK}
_NAMED = {"weekly": WEEK, "daily": 86_400, "hourly": 3_600}
TICK = "tick"


def cadence_seconds(cadence: str) -> int | None:
    """Seconds between instants, or None for ``tick`` (every tape point)."""
    if cadence == TICK:
        return None
    if cadence in _NAMED:
        return _NAMED[cadence]
    match = re.fullmatch(r"(\d+)([smhdw])", cadence)
    if not match or int(match.group(1)) == 0:
        raise ValueError(
            f"cadence {cadence!r} is not weekly, daily, hourly, tick or a count with a unit "
            "(e.g. 15m, 4h, 2d)"
        )
    return int(match.group(1)) * _UNITS[match.group(2)]


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC; a naive time is taken as UTC already, since tapes are all in UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def sundays(first: datetime, last: datetime) -> list[datetime]:
    """Every Sunday 00:00 UTC from ``first`` to ``last`` inclusive."""
    day = first.replace(hour=0, minute=0, second=0, microsecond=0)
    day += timedelta(days=(6 - day.weekday()) % 7)
    if day < first:
        day += timedelta(days=7)
    out = []
    while day <= last:
        out.append(day)
        day += timedelta(days=7)
    return out


MAX_CASH = 1e12
"""The most an agent may start with: the largest amount a bet may have (``boundary.MAX_AMOUNT``).
Infinity, which JSON cannot hold, was written into ``CohortOpened`` as null and left a log that
could not be read again; sums past 10¹² are past what the tables can show."""


ADDED_LATER = {
    "execution": "fa", "fees": "none", "books": None, "latency_ms": 0, "liquidity": "isolated",
    "marks_at": "price", "listing": "start", "latency": None, "latency_by_agent": None,
}  # fmt: skip
"""Settings added after cohort ids were first made, and the value every earlier cohort ran
with: left out of the id at that value, so every earlier cohort keeps its id."""


class CohortConfig(pydantic.BaseModel):
    """What a user chooses for one cohort; validated at the boundary, then frozen."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    start: datetime
    agents: dict[str, str]
    universe: int = pydantic.Field(default=500, ge=1)
    cash: float = pydantic.Field(default=10_000.0, gt=0, le=MAX_CASH)
    rules: str = pydantic.Field(default="v1", description=f"betting rules: {', '.join(RULES)}")
    decision_cadence: str = "weekly"
    mark_cadence: str = "daily"
    seed: int = pydantic.Field(default=0, ge=0)  # numpy refuses a negative seed
    execution: str = pydantic.Field(
        default="fa",
        description="execution model: fa (the tape's price, whole), mid, touch?spread_ticks=K "
        "(a synthetic spread on a price tape), l2 (a recorded book)",
    )
    fees: str | None = pydantic.Field(
        default=None,
        description="auto (Polymarket's dated schedule) or none; unset: none for fa and mid, "
        "auto for touch and l2",
    )
    books: str | None = pydantic.Field(
        default=None, description="the content hash of the order books the orders meet"
    )
    latency_ms: int = pydantic.Field(
        default=0, ge=0, le=86_400_000,
        description="milliseconds from a decision to its orders meeting the book",
    )  # fmt: skip
    latency: Literal["llm"] | None = pydantic.Field(
        default=None,
        description="llm: a decision's orders meet the book later by its model calls' "
        "recorded time too (on top of latency_ms)",
    )
    latency_by_agent: dict[str, int] | None = pydantic.Field(
        default=None,
        description="milliseconds more for each named agent's orders (--latency FILE)",
    )
    marks_at: Literal["price", "mid", "bid", "liquidation"] = pydantic.Field(
        default="price",
        description="what a mark values a position at: the tape's price, or (with books) the "
        "book's midpoint, the best bid, or liquidation: what each agent's holding fetches sold "
        "now down the bids",
    )
    listing: Literal["start", "rolling"] = pydantic.Field(
        default="start",
        description="start: the universe is the top markets open at the start; rolling: "
        "markets that list during the cohort's first week join it as they list",
    )
    liquidity: Literal["isolated", "shared"] = pydantic.Field(
        default="isolated",
        description="isolated: every agent meets the whole book (as every peer models it); "
        "shared: the cohort's agents take from one book, in the order they decide",
    )

    @pydantic.field_validator("start")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return as_utc(value)

    @pydantic.field_validator("rules")
    @classmethod
    def _rules(cls, value: str) -> str:
        """A version ``ledger.rules.RULES`` defines (where the versions are listed, once)."""
        if value not in RULES:
            raise ValueError(f"unknown rules version {value!r} (known: {', '.join(RULES)})")
        return value

    @pydantic.field_validator("decision_cadence", "mark_cadence")
    @classmethod
    def _cadence(cls, value: str) -> str:
        cadence_seconds(value)
        return value

    @pydantic.model_validator(mode="after")
    def _execution(self) -> CohortConfig:
        """A model that can run on what the cohort has (a price tape, or books too), and fees
        that model can charge; the models load only when a cohort is checked."""
        from arena.run.execution import check, check_latencies, fees_for

        try:
            check(self.execution, books=self.books is not None)
        except LedgerError as exc:
            raise ValueError(str(exc)) from None
        fees_for(self.execution, self.fees)
        check_latencies(self.latency_by_agent, self.agents)
        if self.books is None and (
            self.latency_ms or self.latency or self.latency_by_agent
            or self.liquidity != "isolated" or self.marks_at != "price"
        ):  # fmt: skip
            raise ValueError(
                "latency_ms, shared liquidity and marks at the bid need books: a price tape "
                "has one price per instant and no depth"
            )
        return self

    @pydantic.field_validator("agents")
    @classmethod
    def _agents(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("a cohort needs at least one agent")
        for name in value:
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
                raise ValueError(f"agent name {name!r} may use only letters, digits, _ . -")
        return value

    @property
    def start_ts(self) -> int:
        return int(self.start.timestamp())

    def cohort_id(self, tape_hash: str) -> str:
        """``YYYY-MM-DD-xxxxxxxx``: the start date and a hash of everything that shapes the log."""
        from arena.run.execution import fees_for

        settings = self.model_dump(mode="json")
        # the fees the cohort pays, not how they were asked for: unset is the model's default
        settings["fees"] = fees_for(self.execution, self.fees)
        for name, default in ADDED_LATER.items():
            if settings[name] == default:
                del settings[name]
        blob = json.dumps({"tape": tape_hash, **settings}, sort_keys=True).encode()
        return f"{self.start:%Y-%m-%d}-{hashlib.sha256(blob).hexdigest()[:8]}"


def iso_minute(ts: int) -> str:
    """An instant as people read it in reasons and errors: ``2024-11-12 15:01 UTC``."""
    return f"{datetime.fromtimestamp(ts, UTC):%Y-%m-%d %H:%M} UTC"


def week_of(start: int, ts: int) -> int:
    """Decision week as Forecaster Arena counts it: whole weeks between UTC midnights, plus 1."""
    return (ts // 86_400 - start // 86_400) // 7 + 1


def start_text(ts: int) -> str:
    """A cohort's start as a person names it, in a report's heading and a progress line alike:
    the day, with the time of day when the start is not a UTC midnight (``--start
    2026-09-28T08:50`` was headed "start 2026-09-28", as if the cohort had begun eight hours and
    fifty minutes earlier), seconds only when there are some."""
    at = datetime.fromtimestamp(ts, UTC)
    if ts % 86_400 == 0:
        return f"{at:%Y-%m-%d}"
    return f"{at:%Y-%m-%d %H:%M:%S} UTC" if ts % 60 else f"{at:%Y-%m-%d %H:%M} UTC"
