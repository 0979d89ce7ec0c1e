"""``hold``: the do-nothing baseline every other agent has to beat."""

from __future__ import annotations

from strategies.api import Decision, Strategy, View


class Hold(Strategy):
    """Never bets; keeps its $10,000 (the zero line of every leaderboard)."""

    description = "never bets: the zero-P/L baseline"

    def decide(self, view: View) -> Decision:
        return Decision.hold("holding by design")
