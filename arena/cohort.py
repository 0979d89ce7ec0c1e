"""A cohort's settings, its identity, its universe and its timeline.

Everything here is decided before the first event is written, from the tape and the settings
alone, so the same inputs always give the same cohort id, the same universe and the same order
of instants.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

import numpy as np
import pydantic

from replays.tape import Tape

WEEK = 7 * 86_400
_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": WEEK}
_NAMED = {"weekly": WEEK, "daily": 86_400, "hourly": 3_600}
TICK = "tick"

# Instants that coincide are taken in this order: a market that resolves at t can no longer be
# traded at t, and a decision at t sees the mark taken at t.
RESOLUTION, MARK, DECISION = 0, 1, 2


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


def parse_instant(text: str) -> datetime:
    """An ISO-8601 instant; a date or a naive time is taken as UTC."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO-8601 date or instant") from None
    return as_utc(value)


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


class CohortConfig(pydantic.BaseModel):
    """What a user chooses for one cohort; validated at the boundary, then frozen."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    start: datetime
    agents: dict[str, str]
    universe: int = pydantic.Field(default=500, ge=1)
    cash: float = pydantic.Field(default=10_000.0, gt=0)
    rules: Literal["v1", "v2"] = "v1"
    decision_cadence: str = "weekly"
    mark_cadence: str = "daily"
    seed: int = 0

    @pydantic.field_validator("start")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return as_utc(value)

    @pydantic.field_validator("decision_cadence", "mark_cadence")
    @classmethod
    def _cadence(cls, value: str) -> str:
        cadence_seconds(value)
        return value

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
        blob = json.dumps(
            {"tape": tape_hash, **self.model_dump(mode="json")}, sort_keys=True
        ).encode()
        return f"{self.start:%Y-%m-%d}-{hashlib.sha256(blob).hexdigest()[:8]}"


def split_starts(
    tape: Tape, starts: Sequence[datetime], size: int
) -> tuple[list[datetime], list[datetime]]:
    """``starts`` on which a cohort has at least one open, priced market, and those without.

    A range of Sundays over a tape of short-lived markets (daily BTC ranges, say) can hold
    weeks when nothing trades at 00:00; those are skipped and named rather than ending a run
    half-way through.
    """
    kept: list[datetime] = []
    empty: list[datetime] = []
    for start in starts:
        (kept if select_universe(tape, int(start.timestamp()), size) else empty).append(start)
    return kept, empty


def select_universe(tape: Tape, start: int, size: int) -> list[int]:
    """Top ``size`` markets by volume that are open at ``start`` and already have a price.

    Ties in volume break on market id, so the choice never depends on tape order.
    """
    chosen = []
    for m, info in enumerate(tape.markets):
        resolution = tape.resolutions.get(info.id)
        if info.open_ts is not None and info.open_ts > start:
            continue
        if info.close_ts is not None and info.close_ts <= start:
            continue
        if resolution is not None and resolution.ts <= start:
            continue
        times = tape.times(m)
        if times.size == 0 or times[0] > start:
            continue
        chosen.append(m)
    chosen.sort(key=lambda m: (-tape.markets[m].volume, tape.markets[m].id))
    return chosen[:size]


@dataclass(frozen=True)
class Timeline:
    """The cohort's instants in processing order, and the arrays the runner indexes by them."""

    instants: np.ndarray  # int64, one per decision or mark instant (sorted, unique)
    steps: list[tuple[int, int, int]]  # (ts, kind, payload): payload = instant row or market
    close: np.ndarray  # int64 per universe market: when trading stops (close or resolution)
    end: int


def build_timeline(tape: Tape, universe: list[int], config: CohortConfig) -> Timeline:
    """Merge decision, mark and resolution instants in one deterministic order."""
    start = config.start_ts
    never = np.iinfo(np.int64).max
    last = tape.span()[1]
    close = np.full(len(universe), never, dtype=np.int64)
    resolutions: list[tuple[int, int]] = []
    for j, m in enumerate(universe):
        info = tape.markets[m]
        resolution = tape.resolutions.get(info.id)
        if info.close_ts is not None:
            close[j] = info.close_ts
        if resolution is not None:
            close[j] = min(close[j], resolution.ts)
            resolutions.append((resolution.ts, j))
    trading_ends = min(int(close.max()), last + 1)
    end = max([trading_ends, *(ts for ts, _ in resolutions)])

    decision_step = cadence_seconds(config.decision_cadence)
    if decision_step is None:
        points = np.concatenate([tape.times(m) for m in universe])
        decisions = np.unique(points[(points >= start) & (points < trading_ends)])
    else:
        decisions = np.arange(start, trading_ends, decision_step, dtype=np.int64)
    mark_step = cadence_seconds(config.mark_cadence)
    if mark_step is None:
        points = np.concatenate([tape.times(m) for m in universe])
        marks = np.unique(points[(points >= start) & (points <= end)])
    else:
        marks = np.arange(start, end + 1, mark_step, dtype=np.int64)
    instants = np.union1d(decisions, marks)
    row = {int(t): i for i, t in enumerate(instants)}
    steps = [(int(t), MARK, row[int(t)]) for t in marks]
    steps += [(int(t), DECISION, row[int(t)]) for t in decisions]
    steps += [(ts, RESOLUTION, j) for ts, j in resolutions]
    steps.sort()
    return Timeline(instants=instants, steps=steps, close=close, end=end)


def week_of(start: int, ts: int) -> int:
    """Decision week as Forecaster Arena counts it: whole weeks between UTC midnights, plus 1."""
    return (ts // 86_400 - start // 86_400) // 7 + 1
