"""What an experiment returns: its configuration, each model's metrics, and its checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from arena.forecasting.lab.checks import Check


@dataclass(frozen=True)
class LabResult:
    """``models`` maps a model's name to its metrics (``n`` is how many rows it was scored
    on); ``extra`` holds what one experiment alone reports (groupstress's ranking of J)."""

    experiment: str
    config: dict[str, Any]
    models: dict[str, dict[str, float]]
    checks: list[Check]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def as_json(self) -> dict[str, Any]:
        return {
            "experiment": self.experiment,
            "config": self.config,
            "models": self.models,
            "checks": [check.as_json() for check in self.checks],
            **self.extra,
        }
