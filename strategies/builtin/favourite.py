"""``favourite``: back whatever the crowd backs, a little more when it is surer."""

from __future__ import annotations

import numpy as np
import pydantic

from strategies.api import Bet, Decision, Strategy, View


class FavouriteSettings(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    markets: int = pydantic.Field(default=3, ge=1, description="new markets entered per decision")
    stake: float = pydantic.Field(default=400.0, gt=0, description="dollars at a certain price")


class Favourite(Strategy):
    """Bets on the side priced above 50%, ``stake × price`` dollars, in the markets it does not
    hold yet with the most lopsided prices (never below the minimum bet)."""

    Settings = FavouriteSettings
    description = "bets on the side the market favours, sized by its price"
    settings: FavouriteSettings

    def decide(self, view: View) -> Decision:
        if view.max_bet < view.min_bet:
            return Decision.hold("cash is below what the minimum bet needs")
        markets = view.markets
        held = {p.market for p in view.positions}
        yes = markets.yes
        candidates = markets.open & ~np.isnan(yes)
        candidates &= np.array([m not in held for m in markets.ids]) if held else True
        order = np.argsort(-np.abs(np.where(candidates, yes, 0.5) - 0.5), kind="stable")
        bets = []
        for i in order[: self.settings.markets]:
            if not candidates[i]:
                break
            price = float(yes[i])
            side, side_price = ("YES", price) if price >= 0.5 else ("NO", 1.0 - price)
            amount = min(
                max(view.min_bet, round(self.settings.stake * side_price, 2)), view.max_bet
            )
            bets.append(Bet(market=markets.ids[i], side=side, amount=amount, belief=side_price))
        if not bets:
            return Decision.hold("no new favourites")
        return Decision(bets=bets, reasoning="backing the favourites")
