"""``sign`` and ``linear``: forecastbench's trading rules (origins §2.4) as agents.

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

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np
import pydantic

from ledger.metrics import TradingMode, positions
from strategies.api import Bet, Context, Decision, Sell, Strategy, Trace, View
from strategies.diffusion import DEFAULTS, ORIGINS, DiffusionConfig, T
from strategies.forecasters import DEFAULT_COLUMN, Forecaster, forecaster_from_setting
from strategies.llm.forecast import MIN_EDGE

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


DIFFUSION_FIELDS = (*(f.name for f in dataclasses.fields(DiffusionConfig)), "seed")
"""Settings that only a ``diffusion`` forecaster reads."""


class EdgeSettings(TraderSettings):
    """The rule's settings, the forecaster's name, and the settings of particular forecasters.

    The diffusion ones default to a model small enough to train in about a second;
    forecastbench's own are ``hidden=256&steps=2000&batch=256&lr=0.0002`` (depth 3, 32 sample
    steps and 16 samples are the same in both).
    """

    @pydantic.model_validator(mode="before")
    @classmethod
    def _llm_min_edge(cls, data: Any) -> Any:
        """An ``llm`` forecaster's own ``min_edge`` default (``MIN_EDGE``), unless one is set:
        a model that echoes the shown price differs from it only by rounding."""
        if isinstance(data, dict) and "min_edge" not in data:
            name = str(data.get("forecaster", ""))
            if name == "llm" or name.startswith("llm:"):
                return {**data, "min_edge": MIN_EDGE}
        return data

    forecaster: str = pydantic.Field(
        default="extremized",
        description="market | extremized | llm[:MODEL] | diffusion | file:PATH.csv "
        "| file:PATH.jsonl",
    )
    column: str = pydantic.Field(
        default=DEFAULT_COLUMN, description="probability column of a file forecaster"
    )
    show_price: bool = pydantic.Field(
        default=True, description="an llm forecaster is shown the market's current price"
    )
    hidden: int = pydantic.Field(
        default=DEFAULTS.hidden,
        ge=1,
        description=f"diffusion: hidden width (forecastbench: {ORIGINS.hidden})",
    )
    depth: int = pydantic.Field(
        default=DEFAULTS.depth,
        ge=1,
        description=f"diffusion: hidden layers (forecastbench: {ORIGINS.depth})",
    )
    steps: int = pydantic.Field(
        default=DEFAULTS.steps,
        ge=1,
        description=f"diffusion: training steps (forecastbench: {ORIGINS.steps})",
    )
    batch: int = pydantic.Field(
        default=DEFAULTS.batch,
        ge=1,
        description=f"diffusion: rows per training step (forecastbench: {ORIGINS.batch})",
    )
    lr: float = pydantic.Field(
        default=DEFAULTS.lr,
        gt=0,
        description=f"diffusion: AdamW learning rate (forecastbench: {ORIGINS.lr:g})",
    )
    sample_steps: int = pydantic.Field(
        default=DEFAULTS.sample_steps,
        ge=2,
        le=T,
        description=f"diffusion: DDIM steps per sample (forecastbench: {ORIGINS.sample_steps})",
    )
    mc: int = pydantic.Field(
        default=DEFAULTS.mc,
        ge=1,
        description=f"diffusion: samples averaged per forecast (forecastbench: {ORIGINS.mc})",
    )
    seed: int | None = pydantic.Field(
        default=None,
        ge=0,
        description="diffusion: training and sampling seed; unset = from the agent's generator",
    )

    @pydantic.model_validator(mode="after")
    def _diffusion_only(self) -> EdgeSettings:
        """A diffusion setting given to another forecaster would be silently ignored."""
        stray = [f for f in DIFFUSION_FIELDS if f in self.model_fields_set]
        if stray and self.forecaster.strip() != "diffusion":
            raise ValueError(f"{', '.join(stray)}: only for forecaster=diffusion")
        return self

    def diffusion(self) -> DiffusionConfig:
        return DiffusionConfig(**{f: getattr(self, f) for f in DIFFUSION_FIELDS if f != "seed"})


def _cents(dollars: float) -> float:
    """Down to whole cents, so a bet never exceeds its target; the slack keeps B·(0.6 − 0.5)
    = 99.99999999999999 at $100.00 rather than $99.99."""
    return math.floor(dollars * 100 + 1e-6) / 100


def _favoured(edge: float) -> str | None:
    if edge > EDGE_TOLERANCE:
        return "YES"
    if edge < -EDGE_TOLERANCE:
        return "NO"
    return None


class EdgeTrader(Strategy):
    """Trades the gap between a forecaster and the price with a forecastbench rule; subclasses
    choose the rule (``mode``) and the forecaster."""

    Settings: ClassVar[type[pydantic.BaseModel]] = TraderSettings
    mode: ClassVar[TradingMode] = "sign"
    settings: TraderSettings

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
            shortfall = _cents(abs(float(target[i])) - held.get((market, side), 0.0))
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

    def _forecast_trace(self) -> Trace | None:
        """What a model-backed forecaster asked and answered at this instant, for the log."""
        trace = getattr(self.forecaster, "trace", None)
        return trace() if callable(trace) else None


class ForecasterTrader(EdgeTrader):
    """An edge trader whose forecaster is named by its ``forecaster`` setting."""

    Settings = EdgeSettings
    settings: EdgeSettings

    def make_forecaster(self) -> Forecaster:
        s = self.settings
        return forecaster_from_setting(
            s.forecaster,
            column=s.column,
            show_price=s.show_price,
            diffusion=s.diffusion(),
            seed=s.seed,
        )


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
