"""An agent as the loop sees it: asked for a decision on a view, answering a checked decision and
its error. ``InProcess`` runs the strategy in the replay's own process under the ``Sandbox``;
``arena.boundary.isolated`` runs it in a worker process of its own.

Each decision in process has a ``CallLog`` of its own (``strategies.llm.calls``), into which
the model clients write every attempt as it goes. A decision that returns keeps the calls of
its trace (or, if it kept none, those of its log); one that times out, fails or is interrupted
returns none, and its HOLD then carries the calls of its log instead (answered, failed, and cut
short with the reason), so what the log says was asked is what was sent, and a replay from it
ends that decision the same way.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Protocol

from strategies.api import (
    Context,
    Decision,
    RunStopped,
    Strategy,
    View,
)
from strategies.llm.calls import CallLog, first_line, recording

if TYPE_CHECKING:
    pass

from arena.boundary.checks import checked
from arena.boundary.sandbox import INTERRUPTED, RunInterrupted, Sandbox


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
        log = CallLog()
        try:
            with recording(log):
                outcome, error = self.sandbox.call(decide_checked, self.strategy, view)
        except RunInterrupted as exc:
            exc.recorded = cut_short(log, INTERRUPTED)
            raise
        except RunStopped:
            log.close("the run stopped")
            raise
        if error is None:
            calls = log.close("the decision ended")  # its stray threads send nothing more
            decision, note = outcome
            if not calls and decision.trace is None and note is None:
                return decision, None  # no model asked, nothing noted: as recorded() gives it
            return recorded(with_calls(outcome, log) if calls else outcome, None)
        return cut_short(log, error or "the decision ended")

    def close(self) -> None:
        pass


def with_calls(outcome: tuple[Decision, str | None], log: CallLog) -> tuple[Decision, str | None]:
    """A decision that returned, with the calls of ``log`` if its trace carries none (a plugin
    that asked a model and kept no trace): every call made is in the log either way."""
    decision, note = outcome
    if decision.trace is not None and decision.trace.calls:
        return outcome
    trace = log.trace(None)
    if trace is None:
        return outcome
    if decision.trace is not None:
        trace = dataclasses.replace(decision.trace, calls=trace.calls, prompts=trace.prompts)
    decision, more = checked(dataclasses.replace(decision, trace=trace))
    return decision, "; ".join(x for x in (note, more) if x) or None


def cut_short(log: CallLog, error: str) -> tuple[Decision, str | None]:
    """What the log records of a decision that ended without its decision: HOLD and the error,
    and the calls ``log`` holds. With calls, a decision ended by the time limit or a Ctrl-C
    (the log was stopped, see ``CallLog.stop``) has that reason in one line as its error, as a
    replay of the cut calls gives it; otherwise the error is the sandbox's text (with the
    traceback of where the strategy was)."""
    stopped = log.reason
    log.close(stopped or first_line(error), mark_last=stopped is not None)
    trace = log.trace(stopped or error)
    if trace is None:
        return Decision.hold(), error
    return recorded(checked(Decision(trace=trace)), None)
