"""What asking models cost, per cohort and agent, read from the log's ``ModelCalled`` events.

A read model apart from the fold: the transcript never changes cash or positions, so the
rebuild skips it, and only reports that show usage read it, through the log's partial index of
model calls (``events_model_calls`` in ``ledger.schema``, kept at append): a log with few calls,
or none, costs what it holds of them, not a scan of every event (0.11 CPU-s of a 1 M-event
report before). A log written before the index is read by that scan, with the same figures.

The figures, per agent and cohort:

* ``calls``: HTTP attempts made (a 503 then a 200 is two); ``questions``: questions asked
  (each asking of a market's question, or of a decision, or a re-ask of it, once);
* ``reasks``: questions that were asked again after an unusable answer;
* ``failures``: attempts that gave no answer (HTTP errors, timeouts, dropped connections,
  cut-off answers); ``rejected``: answers the parser could not use;
* ``tokens_in`` / ``tokens_out`` and ``cost`` (dollars) as the server reported them, summed
  over every attempt; ``cost`` is None when no attempt reported one (local servers don't);
* ``latency_median_ms`` / ``latency_p95_ms``: over attempts, as measured when answered (a
  replay from a cassette shows the recording's).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from ledger.events import ModelCalled
from ledger.store import EventStore


@dataclass
class ModelUsage:
    """The usage of one agent in one cohort (or summed over several)."""

    calls: int = 0
    questions: int = 0
    reasks: int = 0
    failures: int = 0
    rejected: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float | None = None
    latencies: list[float] = field(default_factory=list, repr=False)
    errors: Counter[str] = field(default_factory=Counter, repr=False)  # each error's text

    def add(self, e: ModelCalled) -> None:
        c = e.call
        self.calls += 1
        if c.attempt == 1:
            self.questions += 1
            self.reasks += c.reask > 0
        self.failures += c.error is not None
        if c.error is not None:
            self.errors[c.error] += 1
        self.rejected += c.rejected is not None
        self.tokens_in += c.tokens_in or 0
        self.tokens_out += c.tokens_out or 0
        if c.cost is not None:
            self.cost = (self.cost or 0.0) + c.cost
        if c.latency_ms is not None:
            self.latencies.append(c.latency_ms)

    def merge(self, other: ModelUsage) -> None:
        for name in ("calls", "questions", "reasks", "failures", "rejected"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        if other.cost is not None:
            self.cost = (self.cost or 0.0) + other.cost
        self.latencies += other.latencies
        self.errors.update(other.errors)

    def copy(self) -> ModelUsage:
        out = ModelUsage()
        out.merge(self)
        return out

    def summary(self) -> str:
        """One line for people: calls, re-asks, failures, tokens, dollars, latency."""
        cost = "cost not reported" if self.cost is None else f"${self.cost:,.4f}"
        median = percentile(self.latencies, 50)
        latency = "" if median is None else f", median latency {median / 1000:.2f} s a call"
        return (
            f"{self.calls} model calls ({self.reasks} re-asks, {self.failures} failed), "
            f"tokens {self.tokens_in:,} in / {self.tokens_out:,} out, {cost}{latency}"
        )

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k not in ("latencies", "errors")}
        out["latency_median_ms"] = percentile(self.latencies, 50)
        out["latency_p95_ms"] = percentile(self.latencies, 95)
        return out


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q``-th percentile by the nearest-rank method (an observed value), or None."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def model_usage(
    store: EventStore, cohorts: Iterable[str] | None = None
) -> dict[str, dict[str, ModelUsage]]:
    """``{cohort: {agent: usage}}`` for every cohort (or those given) whose agents asked a
    model; cohorts and agents in sorted order."""
    wanted = None if cohorts is None else set(cohorts)
    found: dict[str, dict[str, ModelUsage]] = {}
    for stream, event in store.read_types(["ModelCalled"]):
        if wanted is not None and stream not in wanted:
            continue
        assert isinstance(event, ModelCalled)
        found.setdefault(stream, {}).setdefault(event.agent, ModelUsage()).add(event)
    return {c: dict(sorted(agents.items())) for c, agents in sorted(found.items())}


def total_usage(usage: dict[str, dict[str, ModelUsage]]) -> ModelUsage:
    """Everything summed: a run's calls, tokens and dollars."""
    out = ModelUsage()
    for agents in usage.values():
        for u in agents.values():
            out.merge(u)
    return out
