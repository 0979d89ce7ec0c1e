"""``diffusion``: the market diffusion model as a forecaster, trained at the start of each
cohort on the markets that resolved before it, or read from a file ``arena diffusion train``
wrote (``diffusion:model.npz``).

At every decision it reads each open, priced market as it is at that instant (its price path up
to the instant, time to its scheduled end, volume as of the instant, category, question) and
forecasts P(YES) (of the first outcome, for a multi-outcome market) with the network for the
market's outcome count. Markets of an outcome count it has no network for get no forecast.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import numpy as np
import pydantic

from strategies.api import Context, MarketMeta, ResolvedMarket, StrategyError, Trace, View
from strategies.diffusion import DEFAULTS, ORIGINS, DiffusionConfig, T, embed_texts
from strategies.forecaster_registry import ForecasterSettings, RegisteredForecaster
from strategies.market_diffusion.examples import PER_MARKET, ResolvedPath, training_set
from strategies.market_diffusion.features import MarketFacts, conditions, ordered
from strategies.market_diffusion.model import MarketModel, TrainingSet

MIN_TRAINING_MARKETS = 10


def _when(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def resolved_path(market: ResolvedMarket) -> ResolvedPath | None:
    """What the model learns from in a resolved market: None if it was voided or the runner
    gave no price path."""
    if market.winner is None or market.history is None:
        return None
    meta = market.meta
    times, prices = market.history
    facts = MarketFacts(meta.question, meta.category, meta.end_ts, market.volume_history)
    return ResolvedPath(
        meta.id, facts, meta.outcomes, times, prices, market.winner, market.resolved_ts
    )


class DiffusionForecaster(RegisteredForecaster):
    """P(YES) from the market diffusion model, at every decision, for every priced market.

    With no ``model`` file it trains at setup on ``context.resolved_before`` (``per_market``
    rows each), seeded by ``seed`` or else by the agent's own generator, so a cohort always
    trains the same model; with fewer than 10 resolved markets, or one outcome among them, it
    abstains and says why. A ``model`` file is used only for a cohort that starts after every
    market it was trained on resolved.
    """

    class Settings(ForecasterSettings):
        """The model's size and training (``strategies.diffusion.DiffusionConfig``), the rows
        per market, and the seed, for a model trained at setup (a model file carries its own).
        The defaults train in seconds; forecastbench's own are
        ``hidden=256&steps=2000&batch=256&lr=0.0002`` (depth 3, 32 sample steps and 16 samples
        are the same in both)."""

        hidden: int = pydantic.Field(
            default=DEFAULTS.hidden,
            ge=1,
            description=f"hidden width (forecastbench: {ORIGINS.hidden})",
        )
        depth: int = pydantic.Field(
            default=DEFAULTS.depth,
            ge=1,
            description=f"hidden layers (forecastbench: {ORIGINS.depth})",
        )
        steps: int = pydantic.Field(
            default=DEFAULTS.steps,
            ge=1,
            description=f"training steps (forecastbench: {ORIGINS.steps})",
        )
        batch: int = pydantic.Field(
            default=DEFAULTS.batch,
            ge=1,
            description=f"rows per training step (forecastbench: {ORIGINS.batch})",
        )
        lr: float = pydantic.Field(
            default=DEFAULTS.lr,
            gt=0,
            description=f"AdamW learning rate (forecastbench: {ORIGINS.lr:g})",
        )
        sample_steps: int = pydantic.Field(
            default=DEFAULTS.sample_steps,
            ge=2,
            le=T,
            description=f"DDIM steps per sample (forecastbench: {ORIGINS.sample_steps})",
        )
        mc: int = pydantic.Field(
            default=DEFAULTS.mc,
            ge=1,
            description="sampler runs per forecast: for a binary market, the precision of "
            "this many bisection steps, "
            f"samples averaged otherwise (forecastbench: {ORIGINS.mc} samples)",
        )
        per_market: int = pydantic.Field(
            default=PER_MARKET,
            ge=1,
            le=1000,
            description="rows per resolved market, at instants spread over its life",
        )
        seed: int | None = pydantic.Field(
            default=None,
            ge=0,
            description="training and sampling seed; unset = from the agent's generator",
        )

        def config(self) -> DiffusionConfig:
            return DiffusionConfig(
                hidden=self.hidden, depth=self.depth, steps=self.steps, batch=self.batch,
                lr=self.lr, sample_steps=self.sample_steps, mc=self.mc,
            )  # fmt: skip

    argument: ClassVar[str] = "[:MODEL.npz]"

    @classmethod
    def from_settings(cls, arg: str, settings: pydantic.BaseModel) -> DiffusionForecaster:
        """``diffusion`` trains at setup; ``diffusion:model.npz`` reads the file now, so a
        bad one fails when the agent is built (its training settings would be ignored, so
        giving any is an error)."""
        assert isinstance(settings, cls.Settings)
        training = settings.model_fields_set & (set(cls.Settings.model_fields) - {"seed"})
        if arg and training:
            raise StrategyError(
                f"forecaster diffusion:{arg} reads a trained model: {', '.join(sorted(training))} "
                "apply only to a model trained at setup"
            )
        return cls(settings.config(), settings.seed, arg or None, settings.per_market)

    def __init__(
        self,
        config: DiffusionConfig = DEFAULTS,
        seed: int | None = None,
        model: str | Path | None = None,
        per_market: int = PER_MARKET,
    ) -> None:
        self.config = config
        self.seed = seed
        self.path = None if model is None else Path(model)
        self.per_market = per_market
        self.model: MarketModel | None = None
        self.abstain: str | None = "not set up: it trains at the start of a cohort"
        self._text: dict[str, np.ndarray] = {}
        if self.path is not None:
            self.model = MarketModel.load(self.path)  # a bad file fails when the agent is built

    def setup(self, context: Context) -> None:
        if self.path is not None and self.model is not None:
            through = self.model.summary.trained_through
            if through >= context.start:
                raise StrategyError(
                    f"model file {self.path} learned from a market resolved at {_when(through)},"
                    f" not before the cohort's start {_when(context.start)}: it would know "
                    "outcomes from the future of its forecasts"
                )
            self.abstain = None
            return
        seed = self.seed if self.seed is not None else int(context.rng.integers(2**31))
        self.fit(context.resolved_before, context.start, seed)

    def fit(self, resolved: Sequence[ResolvedMarket], start: int, seed: int) -> None:
        """Trains on the markets of ``resolved`` that resolved strictly before ``start``."""
        paths = [p for m in resolved if (p := resolved_path(m)) is not None]
        data = training_set(paths, start, self.per_market)
        binary = data.markets.get(2, 0)
        self.model = None
        if sum(data.markets.values()) < MIN_TRAINING_MARKETS or not _both_outcomes(data):
            self.abstain = (
                f"diffusion has nothing to learn from: {sum(data.markets.values())} market(s) "
                f"with a price path resolved before the cohort ({binary} binary); it needs "
                f"{MIN_TRAINING_MARKETS} or more, not all resolved the same way"
            )
            return
        self.model = MarketModel.fit(data, self.config, seed)
        self.abstain = None

    def forecast(self, view: View) -> np.ndarray:
        markets = view.markets
        p = np.full(len(markets), np.nan)
        if self.model is None:
            return p
        groups: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = defaultdict(list)
        for i in np.flatnonzero(markets.open & np.isfinite(markets.yes)):
            meta = markets.meta_at(int(i))
            m = len(meta.outcomes)
            if m not in self.model.denoisers:
                continue
            times, values = markets.history(meta.id)
            if times.size == 0:
                continue
            prices = np.asarray(values, dtype=np.float64)[:, ordered(meta.outcomes)]
            row = conditions(
                self._facts(meta, markets.ts, float(markets.volume[i])),
                times,
                prices,
                np.array([markets.ts]),
                self._embedding(meta),
            )
            groups[m].append((int(i), row[0], prices[-1]))
        for m, entries in groups.items():
            index = [i for i, _, _ in entries]
            rows = np.array([row for _, row, _ in entries])
            now = np.array([price for _, _, price in entries])
            p[index] = self.model.forecast(m, rows, now)[:, 0]
        return p

    @staticmethod
    def _facts(meta: MarketMeta, ts: int, volume: float) -> MarketFacts:
        """A universe market's facts, with the view's volume as of now where it knows one."""
        known = ((ts, volume),) if np.isfinite(volume) else ()
        return MarketFacts(meta.question, meta.category, meta.end_ts, known)

    def _embedding(self, meta: MarketMeta) -> np.ndarray:
        if meta.id not in self._text:
            self._text[meta.id] = embed_texts([meta.question])[0]
        return self._text[meta.id]

    def trace(self) -> Trace | None:
        """The model, named for the log (None when there is none)."""
        return None if self.model is None else Trace(model=self.model.summary.line())


def _both_outcomes(data: TrainingSet) -> bool:
    """Some training market resolved otherwise than the others: there is a difference to
    learn. Every market's rows share its label, so distinct targets mean distinct outcomes."""
    return any(np.unique(t, axis=0).shape[0] > 1 for t in data.targets.values())
