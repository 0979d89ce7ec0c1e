"""``favourite`` and ``contrarian``: back the side the crowd backs, or the one it doubts.

Both enter the open two-sided markets they do not hold yet whose prices are the most
lopsided, a few per decision, betting ``stake × price of the chosen side`` dollars (at least the
minimum bet, at most the rules' maximum) and stating that price as their belief. A 50/50 market
has no favourite and no underdog, so both leave it alone. Two-sided is a binary YES/NO market,
or any market of exactly two outcomes (Up/Down, a team against a team), whose sides they name
by its own outcome labels.
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
        two_sided = markets.binary.copy()
        for i in np.flatnonzero(~markets.binary):  # none on a tape of YES/NO markets
            two_sided[i] = len(markets.meta_at(int(i)).outcomes) == 2
        with np.errstate(invalid="ignore"):
            candidates = markets.open & two_sided & (yes > 0) & (yes < 1) & (yes != 0.5)
        lopsided = np.abs(np.where(candidates, yes, 0.5) - 0.5)
        bets: list[Bet] = []
        budget = view.budget()
        for i in np.argsort(-lopsided, kind="stable"):
            if len(bets) == self.settings.markets or not candidates[i]:
                break
            market = markets.ids[i]
            if market in held:
                continue
            first = (yes[i] > 0.5) != self.underdog
            side, price = ("YES", float(yes[i])) if first else ("NO", 1.0 - float(yes[i]))
            if not markets.binary[i]:  # the market's own labels, and its second side's price
                outcomes = markets.meta_at(i).outcomes
                quoted = markets.prices(market) or (float(yes[i]), 1.0 - float(yes[i]))
                side, price = (outcomes[0], quoted[0]) if first else (outcomes[1], quoted[1])
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
