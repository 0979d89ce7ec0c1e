"""A forecaster's edge at the price it was shown, and what is left of it once its bets meet
the market: what the ladder prints beside the Brier score.

A bet that states a belief ``q`` for its side, filled at ``p`` a share, expects ``q − p`` per
share: its edge, in probability points. At the tape's price (the ladder's ``fa`` rung) that is
the edge the forecast shows; on the ladder's last rung a share costs what the book and the fee
made it cost (the amount plus a fee in dollars, over the shares kept), and the edge left is
what execution did not take. A forecast can score a good Brier and keep no edge: that is what
this puts side by side. Each is the dollar-weighted mean over the agent's filled bets with a
belief; ``kept`` is the share of the ``fa`` rung's dollars the last rung still spent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ledger.events import OrderFilled


@dataclass(frozen=True)
class AgentEdge:
    """One agent of one cohort: its bets with a belief, its Brier at the tape's price, the
    edge at the price shown and after execution, and the share of dollars still spent."""

    cohort: str
    agent: str
    bets: int
    brier: float | None
    shown: float
    executed: float | None
    kept: float


def paid_per_share(fill: OrderFilled) -> float:
    """What a share a buy kept cost: its amount, plus a fee in dollars, over the shares kept
    (a fee in shares is already out of them)."""
    fee = fill.fee if fill.fee and fill.fee_currency == "usdc" else 0.0
    return (fill.amount + fee) / fill.shares


def _weighted(fills: Iterable[OrderFilled]) -> tuple[float | None, float, int]:
    """The dollar-weighted mean edge of ``fills``' buys with a belief, their dollars, count."""
    dollars = total = 0.0
    n = 0
    for fill in fills:
        if fill.kind != "buy" or fill.belief is None or fill.shares <= 0.0:
            continue
        dollars += fill.amount
        total += fill.amount * (fill.belief - paid_per_share(fill))
        n += 1
    return (total / dollars if dollars else None), dollars, n


def agent_edges(
    cohort: str,
    shown: dict[str, list[OrderFilled]],
    executed: dict[str, list[OrderFilled]],
    brier: dict[str, float | None],
) -> list[AgentEdge]:
    """Per agent with a belief on any bet: ``shown`` are its fills on the ``fa`` rung (at the
    tape's price), ``executed`` on the ladder's last rung."""
    out = []
    for agent, fills in shown.items():
        edge, dollars, n = _weighted(fills)
        if edge is None:
            continue  # no belief stated: not a forecaster
        after, spent, _ = _weighted(executed.get(agent, ()))
        out.append(AgentEdge(cohort, agent, n, brier.get(agent), edge, after, spent / dollars))
    return out
