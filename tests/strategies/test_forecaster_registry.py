"""Forecasters by name (``strategies.forecaster_registry``): the built-ins, and a plugin package
that adds one by entry point, as a strategy plugin adds strategies."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest

from arena.run.runner import CohortRunner
from ledger.events import DecisionMade, OrderFilled
from ledger.store import EventStore
from replays.tape import Tape
from strategies import forecaster_registry
from strategies.api import StrategyError
from strategies.builtin.edge import Sign
from strategies.forecaster_registry import build_forecaster, forecaster_class, joined_settings
from strategies.forecasters import FileForecaster
from strategies.loader import build_strategy
from strategies.market_diffusion.forecaster import DiffusionForecaster
from tests.conftest import Arena, hand_config

PLUGIN = '''
import numpy as np
import pydantic

from strategies.forecaster_registry import ForecasterSettings, RegisteredForecaster


class Oracle(RegisteredForecaster):
    """Says ``p`` for every market."""

    class Settings(ForecasterSettings):
        p: float = pydantic.Field(default=0.9, ge=0, le=1, description="the one forecast")

    def __init__(self, p: float) -> None:
        self.p = p

    @classmethod
    def from_settings(cls, arg, settings):
        return cls(settings.p)

    def forecast(self, view):
        return np.full(len(view.markets.ids), self.p)


class Greedy(Oracle):
    class Settings(ForecasterSettings):
        B: float = 1.0


class NotOne:
    pass
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """What ``pip install`` of a package declaring ``arena.forecasters`` leaves: the module
    on the path and a dist-info naming its entry points."""
    (tmp_path / "oracle_fc.py").write_text(PLUGIN)
    info = tmp_path / "oracle_fc-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: oracle-fc\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[arena.forecasters]\n"
        "oracle = oracle_fc:Oracle\n"
        "greedy = oracle_fc:Greedy\n"
        "notone = oracle_fc:NotOne\n"
        "missing = no_such_module_xyz:Thing\n"
        "market = oracle_fc:Oracle\n"  # a built-in's name: the built-in keeps it
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    forecaster_class.cache_clear()
    yield tmp_path
    forecaster_class.cache_clear()


def test_a_plugin_forecaster_is_named_in_a_spec_with_its_settings(
    plugin: Path, hand_tape: Tape
) -> None:
    """``sign?forecaster=oracle&p=0.8`` on the hand tape: its top three markets trade at 0.5
    (a), 0.2 (b) and 0.5 (tie-w) at the start, so 0.8 is YES on each, $500 apiece (B, well
    under the 25% cap); later prices stay below 0.8, so it never bets again. tie-w and a
    resolve YES (1,000 shares each, $1 a share), b NO: 10,000 − 1,500 + 2,000 = $10,500."""
    agent = build_strategy("sign?forecaster=oracle&p=0.8")
    assert isinstance(agent, Sign) and type(agent.forecaster).__name__ == "Oracle"
    assert agent.forecaster.p == 0.8  # type: ignore[attr-defined]
    run = CohortRunner(hand_tape, hand_config({"o": "sign?forecaster=oracle&p=0.8"})).run()
    assert run.state.books["o"].cash == pytest.approx(10_500)
    with pytest.raises(StrategyError, match=r"sign: bad settings: p: Input should be less"):
        build_strategy("sign?forecaster=oracle&p=2")


def test_events_of_a_plugin_forecasted_cohort(
    plugin: Path, hand_tape: Tape, tmp_path: Path
) -> None:
    with EventStore.open(tmp_path / "run.db") as store:
        CohortRunner(hand_tape, hand_config({"o": "sign?forecaster=oracle"})).run(store)
        events = list(store.read())
    first = next(e for e in events if isinstance(e, DecisionMade))
    assert [(b.market, b.side, b.amount) for b in first.bets] == [  # the widest edge first
        ("b", "YES", 500.0), ("a", "YES", 500.0), ("tie-w", "YES", 500.0),
    ]  # fmt: skip
    assert sum(isinstance(e, OrderFilled) for e in events) == 3


def test_a_setting_of_another_forecaster_is_named_as_such(plugin: Path) -> None:
    with pytest.raises(StrategyError, match=r"p: only for forecaster=oracle"):
        build_strategy("sign?p=0.8")
    with pytest.raises(StrategyError, match=r"hidden: only for forecaster=diffusion"):
        build_strategy("linear?forecaster=oracle&hidden=3")


def test_broken_and_shadowing_plugins(plugin: Path) -> None:
    assert type(build_forecaster("market")).__name__ == "MarketForecaster"
    with pytest.raises(StrategyError, match=r"^forecaster missing \(no_such_module_xyz:Thing\)"):
        build_strategy("sign?forecaster=missing")
    with pytest.raises(StrategyError, match=r"notone .* is not a forecaster class"):
        build_strategy("sign?forecaster=notone")
    with pytest.raises(StrategyError, match="settings B clash with the trader's"):
        build_strategy("sign?forecaster=greedy")
    assert isinstance(build_strategy("sign?forecaster=diffusion"), Sign)  # the rest still work


def test_arena_strategies_lists_a_plugin_forecasters_settings(arena: Arena, plugin: Path) -> None:
    sign = next(e for e in arena.json("strategies") if e["name"] == "sign")
    rows = {(s["forecaster"], s["name"]): s for s in sign["settings"]}
    assert rows[("oracle", "p")]["description"] == "oracle: the one forecast"
    assert rows[("oracle", "p")]["default"] == 0.9
    assert (None, "B") in rows and ("diffusion", "hidden") in rows


def test_every_builtin_forecaster_is_registered_with_its_settings() -> None:
    assert list(forecaster_registry.BUILTINS) == [
        "market",
        "extremized",
        "llm",
        "diffusion",
        "file",
    ]
    assert forecaster_registry.usage().startswith(
        "market, extremized, llm[:MODEL], diffusion[:MODEL.npz], file:PATH.csv|.jsonl"
    )
    assert set(forecaster_class("diffusion").Settings.model_fields) == {
        "hidden", "depth", "steps", "batch", "lr", "sample_steps", "mc", "per_market", "seed",
    }  # fmt: skip
    assert set(forecaster_class("file").Settings.model_fields) == {"column"}
    assert forecaster_class("llm").trader_defaults == {"min_edge": 0.01}


def test_a_spec_validates_against_the_trader_joined_with_its_forecaster() -> None:
    agent = build_strategy("sign?forecaster=diffusion&hidden=8&seed=3&B=100")
    joined = joined_settings(Sign.Settings, DiffusionForecaster)
    assert type(agent.settings) is joined
    assert isinstance(agent.settings, Sign.Settings | DiffusionForecaster.Settings)
    assert (agent.settings.B, agent.settings.hidden, agent.settings.seed) == (100, 8, 3)  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(agent.settings)) == agent.settings  # to --isolate workers
    assert agent.settings.model_fields_set >= {"hidden", "seed", "B", "forecaster"}
    # a forecaster without settings leaves the trader's model as it is
    assert type(build_strategy("sign?forecaster=market").settings) is Sign.Settings


def test_the_file_forecaster_takes_its_path_and_column(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text("market_id,mine\na,0.25\n")
    agent = build_strategy(f"linear?forecaster=file:{path}&column=mine")
    assert isinstance(agent.forecaster, FileForecaster)
    assert (agent.forecaster.path, agent.forecaster.predictions) == (path, {"a": 0.25})
