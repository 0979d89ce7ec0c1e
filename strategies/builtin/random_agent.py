"""``random``: the seeded coin-flipper that shows what luck alone scores."""

from __future__ import annotations

import numpy as np
import pydantic

from strategies.api import Bet, Decision, Strategy, View


class RandomSettings(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    bets: int = pydantic.Field(default=2, ge=0, description="bets per decision")
    max_amount: float = pydantic.Field(default=200.0, gt=0, description="largest bet in dollars")


class RandomAgent(Strategy):
    """Picks open markets, sides and amounts uniformly with the cohort's seeded generator, so
    a rerun makes the very same choices."""

    Settings = RandomSettings
    description = "random markets, sides and amounts from the cohort's seeded generator"
    settings: RandomSettings

    def decide(self, view: View) -> Decision:
        markets = view.markets
        tradable = np.flatnonzero(markets.open & markets.binary & ~np.isnan(markets.yes))
        count = min(self.settings.bets, tradable.size)
        if count == 0 or view.max_bet < view.min_bet:
            return Decision.hold("nothing to trade")
        picks = self.rng.choice(tradable, size=count, replace=False)
        high = max(min(self.settings.max_amount, view.max_bet), view.min_bet)
        budget = view.budget()
        bets = []
        for i in picks:
            side = "YES" if self.rng.random() < 0.5 else "NO"
            amount = budget.take(round(float(self.rng.uniform(view.min_bet, high)), 2))
            if amount:
                bets.append(Bet(market=markets.ids[int(i)], side=side, amount=amount))
        return Decision(bets=bets, reasoning="random picks")
