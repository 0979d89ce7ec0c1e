"""The betting rules as data: Forecaster Arena's rule sets by version (methodology §1.7).

Apart from the broker (``ledger.rules``, which re-exports these) so that what only names or
sizes by a cohort's rules -- its id, a view's budget, a report -- does not import the execution
models and the fee schedule the broker needs (a thirtieth of a second at every start-up).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ledger.errors import LedgerError


class RuleSet(msgspec.Struct, frozen=True, kw_only=True):
    """One version of the betting rules; recorded by name on every cohort."""

    version: str
    min_bet: float = 50.0
    max_fraction: float = 0.25
    cap: Literal["per_bet", "per_decision"] = "per_bet"
    atomic_bets: bool = False

    def allowance(self, cash: float, spent: float = 0.0) -> float:
        """The largest next bet of a decision that started with ``cash`` and has ``spent`` on
        the bets before it (methodology §1.7): ``per_bet`` (v1), ``max_fraction`` of the cash left;
        ``per_decision`` (v2), what is left of ``max_fraction`` of the starting cash.

        The one statement of the cap: the broker judges bets by it and ``View.budget()`` sizes
        them by it, so what a strategy is told it may bet is what the broker fills."""
        if self.cap == "per_bet":
            return self.max_fraction * (cash - spent)
        return self.max_fraction * cash - spent


RULES: dict[str, RuleSet] = {
    # v1 code (Dec 2025 - Apr 2026): each bet <= 25% of the cash left when it executes.
    "v1": RuleSet(version="v1"),
    # v2 (HEAD): a decision's bets together <= 25% of its starting cash, all or none.
    "v2": RuleSet(version="v2", cap="per_decision", atomic_bets=True),
}


def rules_for(version: str) -> RuleSet:
    """The rule set called ``version``; an unknown name is a one-line error."""
    try:
        return RULES[version]
    except KeyError:
        known = ", ".join(sorted(RULES))
        raise LedgerError(f"unknown rules version {version!r} (known: {known})") from None
