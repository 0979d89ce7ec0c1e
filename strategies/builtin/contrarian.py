"""``contrarian``: the mirror of ``favourite`` — back the side the crowd does not.

Where the prices are most lopsided it buys the underdog (the side priced below 50%), ``stake ×
price`` dollars but never less than the minimum bet. Against ``favourite`` on the same tape it
shows which way the favourite-longshot bias ran.
"""

from __future__ import annotations

import numpy as np
import pydantic

from strategies.api import Bet, Decision, Strategy, View


class ContrarianSettings(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    markets: int = pydantic.Field(default=3, ge=1, description="new markets entered per decision")
    stake: float = pydantic.Field(default=400.0, gt=0, description="dollars at a certain price")


class Contrarian(Strategy):
    """Bets on the side priced below 50% in the open binary markets it does not hold yet with
    the most lopsided prices; a 50/50 market has no underdog and is left alone."""

    Settings = ContrarianSettings
    description = "bets on the underdog the market does not favour, sized by its price"
    settings: ContrarianSettings

    def decide(self, view: View) -> Decision:
        if view.max_bet < view.min_bet:
            return Decision.hold("cash is below what the minimum bet needs")
        markets = view.markets
        held = {p.market for p in view.positions}
        yes = np.asarray(markets.yes, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            candidates = markets.open & (yes > 0) & (yes < 1) & (yes != 0.5)
        lopsided = np.abs(np.where(candidates, yes, 0.5) - 0.5)
        bets: list[Bet] = []
        for i in np.argsort(-lopsided, kind="stable"):
            if len(bets) == self.settings.markets or not candidates[i]:
                break
            market = markets.ids[i]
            if market in held or not markets.meta(market).is_binary:
                continue
            side, price = ("YES", float(yes[i])) if yes[i] < 0.5 else ("NO", 1.0 - float(yes[i]))
            amount = min(max(view.min_bet, round(self.settings.stake * price, 2)), view.max_bet)
            bets.append(Bet(market=market, side=side, amount=amount, belief=price))
        if not bets:
            return Decision.hold("no new underdogs")
        return Decision(bets=bets, reasoning="backing the underdogs")
