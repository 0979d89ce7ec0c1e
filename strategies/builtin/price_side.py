"""``favourite`` and ``contrarian``: back the side the crowd backs, or the one it doubts.

Both enter the open binary markets they do not hold yet whose prices are the most lopsided,
a few per decision, betting ``stake × price of the chosen side`` dollars (at least the minimum
bet, at most the rules' maximum) and stating that price as their belief. A 50/50 market has
no favourite and no underdog, so both leave it alone.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pydantic

from strategies.api import Bet, Decision, Strategy, View


class PriceSideSettings(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    markets: int = pydantic.Field(default=3, ge=1, description="new markets entered per decision")
    stake: float = pydantic.Field(default=400.0, gt=0, description="dollars at a certain price")


class PriceSide(Strategy):
    """Shared by both: ``underdog`` says which side of a lopsided market to take."""

    Settings = PriceSideSettings
    settings: PriceSideSettings
    underdog: ClassVar[bool]
    noun: ClassVar[str]

    def decide(self, view: View) -> Decision:
        if view.max_bet < view.min_bet:
            return Decision.hold("cash is below what the minimum bet needs")
        markets = view.markets
        held = {p.market for p in view.positions}
        yes = markets.yes
        with np.errstate(invalid="ignore"):
            candidates = markets.open & markets.binary & (yes > 0) & (yes < 1) & (yes != 0.5)
        lopsided = np.abs(np.where(candidates, yes, 0.5) - 0.5)
        bets: list[Bet] = []
        budget = view.budget()
        for i in np.argsort(-lopsided, kind="stable"):
            if len(bets) == self.settings.markets or not candidates[i]:
                break
            market = markets.ids[i]
            if market in held:
                continue
            yes_side = (yes[i] > 0.5) != self.underdog
            side, price = ("YES", float(yes[i])) if yes_side else ("NO", 1.0 - float(yes[i]))
            amount = budget.take(max(view.min_bet, round(self.settings.stake * price, 2)))
            if not amount:
                break
            bets.append(Bet(market=market, side=side, amount=amount, belief=price))
        if not bets:
            return Decision.hold(f"no new {self.noun}s")
        return Decision(bets=bets, reasoning=f"backing the {self.noun}s")


class Favourite(PriceSide):
    """Bets on the side priced above 50%, in the markets with the most lopsided prices."""

    description = "bets on the side the market favours, sized by its price"
    underdog = False
    noun = "favourite"


class Contrarian(PriceSide):
    """Bets on the side priced below 50%, in the markets with the most lopsided prices."""

    description = "bets on the underdog the market does not favour, sized by its price"
    underdog = True
    noun = "underdog"
