"""The model-call transcript of a decision, as log events.

A strategy that asks a model hands every attempt back in its ``Trace`` (``calls``), with the
system prompts they name by digest (``prompts``); a decision that timed out, failed or was
interrupted hands back none, and the plugin boundary gives its HOLD the calls the model clients
wrote as they went (``arena.boundary.agents``, ``strategies.llm.calls``), the one in flight
kept as cut short. After the ``DecisionMade`` they belong to, the runner logs each attempt as a
``ModelCalled`` and each system prompt once per cohort as a ``PromptStored``, the first time a
call names it: a 3,000-character system prompt asked every week of a year is stored once, not
52 times.
"""

from __future__ import annotations

from ledger.events import Event, ModelCalled, PromptStored
from strategies.api import Trace


class Transcript:
    """One cohort's transcript writer: remembers which system prompts are already logged."""

    def __init__(self, cohort: str) -> None:
        self.cohort = cohort
        self.stored: set[str] = set()

    def events(self, ts: int, agent: str, week: int, trace: Trace | None) -> list[Event]:
        """The events of ``trace``'s calls, each new system prompt just before its first use."""
        if trace is None or not trace.calls:
            return []
        out: list[Event] = []
        for n, call in enumerate(trace.calls, 1):
            digest = call.system
            if digest is not None and digest not in self.stored:
                self.stored.add(digest)
                text = trace.prompts.get(digest, "")
                out.append(PromptStored(cohort=self.cohort, ts=ts, digest=digest, text=text))
            out.append(
                ModelCalled(cohort=self.cohort, ts=ts, agent=agent, week=week, n=n, call=call)
            )
        return out
