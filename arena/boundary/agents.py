"""An agent as the loop sees it: asked for a decision on a view, answering a checked decision and
its error. ``InProcess`` runs the strategy in the replay's own process under the ``Sandbox``;
``arena.boundary.isolated`` runs it in a worker process of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from strategies.api import (
    Context,
    Decision,
    Strategy,
    View,
)

if TYPE_CHECKING:
    pass

from arena.boundary.checks import checked
from arena.boundary.sandbox import Sandbox


class Agent(Protocol):
    """Where an agent's code runs: here (``InProcess``) or in a worker (``Isolated``)."""

    def setup(self, context: Context) -> str | None:
        """None, or why the agent cannot take part in the cohort."""

    def decide(self, view: View) -> tuple[Decision, str | None]:
        """The checked decision (HOLD if it failed) and the error or note to record."""

    def close(self) -> None:
        """Let go of whatever the agent's code ran in."""


def decide_checked(strategy: Strategy, view: View) -> tuple[Decision, str | None]:
    return checked(strategy.decide(view))


def recorded(
    outcome: tuple[Decision, str | None] | None, error: str | None
) -> tuple[Decision, str | None]:
    """What the log records of a decision: HOLD and the error if it failed; else the decision
    and its trace's error, with any truncation noted after it."""
    if outcome is None or error is not None:
        return Decision.hold(), error
    decision, note = outcome
    noted = decision.trace.error if decision.trace else None
    return decision, "; ".join(x for x in (noted, note) if x) or None


class InProcess:
    """An agent whose code runs in this process, inside the run's sandbox."""

    def __init__(self, strategy: Strategy, sandbox: Sandbox) -> None:
        self.strategy = strategy
        self.sandbox = sandbox

    def setup(self, context: Context) -> str | None:
        return self.sandbox.call(self.strategy.setup, context)[1]

    def decide(self, view: View) -> tuple[Decision, str | None]:
        return recorded(*self.sandbox.call(decide_checked, self.strategy, view))

    def close(self) -> None:
        pass
