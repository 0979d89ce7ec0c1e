"""``sign`` and ``linear``: forecastbench's trading rules (methodology §2.4) as agents.

At every decision the agent asks its forecaster for p = P(YES) and compares it with the price q
of each open binary market. The rule gives a position b in dollars:

* ``sign``:   b = B·sign(p − q)            (no trade when p == q)
* ``linear``: b = clip(B·(p − q), −B, B)

b > 0 is b dollars of YES at q; b < 0 is |b| dollars of NO at 1 − q. forecastbench charges a
transaction cost c per dollar, so a trade's expected P/L under the forecast is
|b|·(|p − q| − c). Our broker charges no fees; c therefore acts as a hurdle instead: a market is
traded only when |p − q| − c > ``min_edge``. Sizing stays forecastbench's.

b is a *target* for the dollars at stake on a side: the cost basis of a side already held
counts toward it and only the shortfall is bet (``sign`` never bets the same side twice;
``linear`` tops up when its edge grows). When the forecast comes to favour the other side of a
held position, the agent sells all of that position first (sells execute before bets) and may
bet the other side in the same decision.

Every bet must pass the broker: one below the minimum is skipped, one above the maximum is cut
to it, and the reasoning says which. The maximum is 25% of cash (``view.max_bet``) per bet,
checked against the running cash under rules v1 and against the decision's total under v2;
sell proceeds are not counted, so a cut is never too small for the broker. Markets with the
largest |p − q| get the budget first.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pydantic

from ledger.metrics import TradingMode, positions
from strategies.api import Bet, Context, Decision, Sell, Strategy, StrategyError, Trace, View
from strategies.forecaster_registry import BUILTINS as BUILTIN_FORECASTERS
from strategies.forecaster_registry import (
    Forecaster,
    build_forecaster,
    forecaster_class,
    joined_settings,
    owners,
    split,
)
from strategies.forecaster_registry import available as available_forecasters

EDGE_TOLERANCE = 1e-9
"""Prices and forecasts are compared with a tolerance (forecastbench trades float32 copies)."""


class TraderSettings(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    B: float = pydantic.Field(default=500.0, gt=0, description="largest position per market ($)")
    c: float = pydantic.Field(
        default=0.0, ge=0, lt=1, description="transaction cost per dollar: a hurdle on |p − q|"
    )
    min_edge: float = pydantic.Field(
        default=0.0, ge=0, lt=1, description="trade only when |p − q| − c exceeds this"
    )


class ForecasterChoice(pydantic.BaseModel):
    """The forecaster's name, for every trader that names one. The forecaster's own settings
    come beside it in the same spec (``sign?forecaster=diffusion&hidden=32``): the model that
    validates a spec is the trader's joined with the named forecaster's ``Settings``
    (``strategies.forecaster_registry.joined_settings``)."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    forecaster: str = pydantic.Field(
        default="extremized",
        description=f"NAME[:ARG], one of {', '.join(BUILTIN_FORECASTERS)} or a plugin's "
        "(market, extremized, llm[:MODEL], diffusion[:MODEL.npz], file:PATH.csv|.jsonl)",
    )

    @pydantic.model_validator(mode="before")
    @classmethod
    def _forecasters_own(cls, data: Any) -> Any:
        """The forecaster's defaults for trader settings the spec leaves out (the LLM's
        ``min_edge``, where the trader has one); a setting of some other forecaster is named
        as such, not merely unknown (it would be silently ignored if it were accepted)."""
        if not isinstance(data, dict):
            return data
        name = split(str(data.get("forecaster", cls.model_fields["forecaster"].default)))[0]
        kind = forecaster_class(name)
        stray = owners([k for k in data if k not in cls.model_fields])
        if stray:
            by = {" or ".join(f"forecaster={n}" for n in names) for names in stray.values()}
            raise ValueError(f"{', '.join(sorted(stray))}: only for {', '.join(sorted(by))}")
        defaults = {k: v for k, v in kind.trader_defaults.items() if k in cls.model_fields}
        return {**defaults, **data}


class EdgeSettings(ForecasterChoice, TraderSettings):
    """The rule's settings (B, c, min_edge) and the forecaster's name."""


def cents(dollars: float) -> float:
    """Down to whole cents, so a bet never exceeds its target; the slack keeps B·(0.6 − 0.5)
    = 99.99999999999999 at $100.00 rather than $99.99."""
    return math.floor(dollars * 100 + 1e-6) / 100


def _favoured(edge: float) -> str | None:
    if edge > EDGE_TOLERANCE:
        return "YES"
    if edge < -EDGE_TOLERANCE:
        return "NO"
    return None


class Forecasting(Strategy):
    """A strategy that trades a forecaster's probabilities: it builds the forecaster with the
    agent, lets it learn at setup, and hands on what it asked a model, for the log."""

    def __init__(self, settings: pydantic.BaseModel | None = None, **values: Any) -> None:
        super().__init__(settings, **values)
        self.forecaster = self.make_forecaster()

    def make_forecaster(self) -> Forecaster:
        raise NotImplementedError

    def setup(self, context: Context) -> None:
        """Keeps the seeded generator, and lets a forecaster that learns (``diffusion``) train
        on the markets that resolved before the cohort."""
        super().setup(context)
        setup = getattr(self.forecaster, "setup", None)
        if callable(setup):
            setup(context)

    def _forecast_trace(self) -> Trace | None:
        """What a model-backed forecaster asked and answered at this instant, for the log."""
        trace = getattr(self.forecaster, "trace", None)
        return trace() if callable(trace) else None


class NamedForecaster(Forecasting):
    """A forecasting strategy whose forecaster is named by its ``forecaster`` setting (its
    ``Settings`` is a :class:`ForecasterChoice`)."""

    settings: ForecasterChoice

    @classmethod
    def settings_for(cls, values: Mapping[str, Any]) -> type[pydantic.BaseModel]:
        """``Settings`` joined with the named forecaster's own (an unknown name is a
        StrategyError that lists the known ones)."""
        default = cls.Settings.model_fields["forecaster"].default
        kind = forecaster_class(split(str(values.get("forecaster", default)))[0])
        return joined_settings(cls.Settings, kind)

    @classmethod
    def listed_settings(cls) -> dict[str, type[pydantic.BaseModel]]:
        listed: dict[str, type[pydantic.BaseModel]] = {"": cls.Settings}
        for name in available_forecasters():
            with contextlib.suppress(StrategyError):  # a broken plugin: named when asked for
                listed[name] = forecaster_class(name).Settings
        return listed

    def make_forecaster(self) -> Forecaster:
        return build_forecaster(self.settings.forecaster, self.settings)


class EdgeTrader(Forecasting):
    """Trades the gap between a forecaster and the price with a forecastbench rule; subclasses
    choose the rule (``mode``) and the forecaster."""

    Settings: ClassVar[type[pydantic.BaseModel]] = TraderSettings
    mode: ClassVar[TradingMode] = "sign"
    settings: TraderSettings

    def decide(self, view: View) -> Decision:
        markets = view.markets
        s = self.settings
        q = np.asarray(markets.yes, dtype=np.float64)
        p = np.asarray(self.forecaster.forecast(view), dtype=np.float64)
        with np.errstate(invalid="ignore"):
            tradable = markets.open & markets.binary & (q > 0) & (q < 1)
        tradable &= np.isfinite(p)
        edge = np.where(tradable, p - q, 0.0)
        target = np.where(tradable, positions(np.where(tradable, p, q), q, s.B, self.mode), 0.0)
        wanted = (np.abs(edge) - s.c > s.min_edge + EDGE_TOLERANCE) & (target != 0)

        notes: list[str] = []
        sells: list[Sell] = []
        held: dict[tuple[str, str], float] = {}
        for position in view.positions:
            i = markets.index(position.market)
            favoured = _favoured(float(edge[i])) if tradable[i] else None
            if (
                favoured is not None
                and position.side in ("YES", "NO")
                and position.side != favoured
            ):
                sells.append(Sell(percentage=100.0, position_id=position.id))
                notes.append(
                    f"sold all {position.side} on {position.market}: forecast {p[i]:.3f} "
                    f"now favours {favoured} at price {q[i]:.3f}"
                )
            else:
                held[(position.market, position.side)] = position.cost

        budget = view.budget()
        bets: list[Bet] = []
        small: list[str] = []
        candidates = np.flatnonzero(wanted)
        for i in candidates[np.argsort(-np.abs(edge[candidates]), kind="stable")]:
            market = markets.ids[i]
            side = "YES" if target[i] > 0 else "NO"
            shortfall = cents(abs(float(target[i])) - held.get((market, side), 0.0))
            if shortfall < view.min_bet:
                if shortfall > 0:
                    small.append(f"{market} {side} ${shortfall:.2f}")
                continue
            cap = budget.room()
            if cap < view.min_bet:
                notes.append(f"no room left under the maximum bet for {market} {side}")
                break
            amount = budget.take(shortfall)
            belief = float(p[i]) if side == "YES" else 1.0 - float(p[i])
            bets.append(Bet(market=market, side=side, amount=amount, belief=belief))
            cut = (
                f", cut from ${shortfall:.2f} to the ${cap:.2f} maximum"
                if amount < shortfall
                else ""
            )
            notes.append(
                f"{side} ${amount:.2f} on {market} (forecast {p[i]:.3f} vs price {q[i]:.3f}{cut})"
            )
        if small:
            notes.append(f"skipped below the ${view.min_bet:.2f} minimum: {', '.join(small)}")
        if not notes:
            abstain = getattr(self.forecaster, "abstain", None)
            notes.append(
                f"no forecast: {abstain}"
                if abstain
                else f"no market with |p − q| − c above {s.min_edge:g}"
            )
        return Decision(
            bets=bets, sells=sells, reasoning="; ".join(notes), trace=self._forecast_trace()
        )


class ForecasterTrader(NamedForecaster, EdgeTrader):
    """An edge trader whose forecaster is named by its ``forecaster`` setting."""

    Settings = EdgeSettings
    settings: EdgeSettings


class Sign(ForecasterTrader):
    """Stakes B dollars on whichever side the forecast favours (forecastbench ``sign``)."""

    mode = "sign"
    description = "forecastbench sign rule: B dollars on the side the forecaster favours"


class Linear(ForecasterTrader):
    """Stakes B·|p − q| dollars, at most B, on the side the forecast favours (``linear``)."""

    mode = "linear"
    description = "forecastbench linear rule: B·(p − q) dollars, capped at B"


class DiffusionSettings(EdgeSettings):
    forecaster: str = pydantic.Field(
        default="diffusion", description="always diffusion (use sign or linear for others)"
    )

    @pydantic.field_validator("forecaster")
    @classmethod
    def _only_diffusion(cls, value: str) -> str:
        if value.strip() != "diffusion":
            raise ValueError("the diffusion agent's forecaster is diffusion; use sign or linear")
        return value


class Diffusion(Sign):
    """``diffusion``: the sign rule over the diffusion forecaster, the built-in DESIGN names;
    the same agent as ``sign?forecaster=diffusion``, under its own name."""

    Settings = DiffusionSettings
    description = (
        "forecastbench's logit diffusion forecaster, trained on the markets resolved before the "
        "cohort, traded with the sign rule"
    )

    @classmethod
    def listed_settings(cls) -> dict[str, type[pydantic.BaseModel]]:
        return {"": cls.Settings, "diffusion": forecaster_class("diffusion").Settings}
