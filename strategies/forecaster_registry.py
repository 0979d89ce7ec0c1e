"""Forecasters by name: the built-ins and those installed plugins add, each with its settings.

A trader's ``forecaster`` setting is ``NAME[:ARG]`` (``market``, ``llm:gpt-4o``,
``file:preds.csv``, ``diffusion``); the name finds a forecaster class here, the argument and
the agent spec's other settings build it. A forecaster class has

- ``Settings``: a :class:`ForecasterSettings` model of its own settings, which an agent spec
  gives beside the trader's (``sign?forecaster=diffusion&hidden=32``): the trader's settings
  model and the forecaster's are joined into one for that spec (``joined_settings``), so a
  typo or a wrong type is reported with the field's name, and a setting of another forecaster
  is reported as such;
- ``from_settings(arg, settings)``: the ready forecaster (``arg`` is what follows ``NAME:``);
- ``argument``: how the argument reads in help and errors (``""`` when it takes none,
  ``[:MODEL]`` when optional, ``:PATH`` when required);
- ``trader_defaults``: defaults it changes in the trader's settings, unless the spec sets
  them (the LLM forecaster's ``min_edge``).

:class:`RegisteredForecaster` gives all four for a forecaster without settings. A new
built-in is one module plus one line in :data:`BUILTINS`; a plugin package declares its
forecasters as entry points of the group ``arena.forecasters``, as it declares strategies in
``arena.strategies`` (``strategies.loader``)::

    [project.entry-points."arena.forecasters"]
    momentum = "mypkg.forecasters:Momentum"
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Collection, Mapping
from typing import Any, ClassVar, Protocol, cast

import numpy as np
import pydantic

from strategies.api import StrategyError, View
from strategies.plugins import installed, with_plugins
from strategies.suggest import did_you_mean

ENTRY_POINT_GROUP = "arena.forecasters"

BUILTINS: dict[str, str] = {
    "market": "strategies.forecasters:MarketForecaster",
    "extremized": "strategies.forecasters:ExtremizedForecaster",
    "llm": "strategies.llm.forecast:LLMForecaster",
    "diffusion": "strategies.market_diffusion.forecaster:DiffusionForecaster",
    "file": "strategies.forecasters:FileForecaster",
}


class ForecasterSettings(pydantic.BaseModel):
    """The base of every forecaster's settings: unknown names and wrong types are errors."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


class Forecaster(Protocol):
    """P(YES) per universe market at the view's instant (NaN where there is no forecast).

    A forecaster may also have ``setup(context)``, called once per cohort before the first
    decision (where one that learns, learns); ``trace()``, what it did for this decision, for
    the log; and ``abstain``, why it gives no forecast at all (None when it does).
    """

    def forecast(self, view: View) -> np.ndarray: ...


class ForecasterKind(Protocol):
    """What the registry finds by name: a forecaster class (see the module's docstring)."""

    Settings: ClassVar[type[ForecasterSettings]]
    argument: ClassVar[str]
    trader_defaults: ClassVar[Mapping[str, Any]]

    @classmethod
    def from_settings(cls, arg: str, settings: pydantic.BaseModel) -> Forecaster: ...


class RegisteredForecaster:
    """A forecaster without settings or argument; subclasses override what they need."""

    Settings: ClassVar[type[ForecasterSettings]] = ForecasterSettings
    argument: ClassVar[str] = ""
    trader_defaults: ClassVar[Mapping[str, Any]] = {}

    @classmethod
    def from_settings(cls, arg: str, settings: pydantic.BaseModel) -> Forecaster:
        if arg:
            raise StrategyError(f"forecaster {cls.__name__} takes no argument (got {arg!r})")
        return cls()

    def forecast(self, view: View) -> np.ndarray:
        raise NotImplementedError


def available() -> dict[str, str]:
    """Every forecaster a spec can name: built-ins, then installed plugins (a plugin cannot
    take a built-in's name)."""
    return with_plugins(BUILTINS, installed(ENTRY_POINT_GROUP))


def split(text: str) -> tuple[str, str]:
    """``NAME[:ARG]`` to ``(NAME, ARG)``."""
    name, _, arg = text.strip().partition(":")
    return name, arg


@functools.cache
def forecaster_class(name: str) -> type[ForecasterKind]:
    """The forecaster class called ``name``; an unknown name or a broken plugin is a one-line
    StrategyError."""
    target = available().get(name)
    if target is None:
        hint = did_you_mean(name, available())
        raise StrategyError(f"unknown forecaster {name!r}{hint}: use {usage()}")
    module_name, _, attr = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (Exception, SystemExit) as exc:  # a plugin module that fails while it loads
        raise StrategyError(f"forecaster {name} ({target}): {type(exc).__name__}: {exc}") from None
    settings = getattr(cls, "Settings", None)
    if not (
        inspect.isclass(cls)
        and callable(getattr(cls, "from_settings", None))
        and inspect.isclass(settings)
        and issubclass(settings, ForecasterSettings)
    ):
        raise StrategyError(
            f"forecaster {name} ({target}) is not a forecaster class: it needs Settings "
            "(a ForecasterSettings) and from_settings; see strategies.forecaster_registry"
        )
    return cast("type[ForecasterKind]", cls)


def usage() -> str:
    """The names a spec may use, each with its argument: ``market, llm[:MODEL], file:PATH``."""
    names = []
    for name in available():
        try:
            names.append(name + forecaster_class(name).argument)
        except StrategyError:
            continue  # a broken plugin is named when it is asked for, not in every error
    return ", ".join(names)


def build_forecaster(text: str, settings: pydantic.BaseModel | None = None) -> Forecaster:
    """The forecaster ``NAME[:ARG]`` with ``settings``: an instance of its ``Settings``, or of
    a model joined with it (it reads only its own fields); None for its defaults."""
    name, arg = split(text)
    kind = forecaster_class(name)
    if settings is None:
        settings = kind.Settings()
    if kind.argument.startswith(":") and not arg:
        raise StrategyError(f"forecaster {name} needs an argument: {name}{kind.argument}")
    return kind.from_settings(arg, settings)


def owners(keys: Collection[str]) -> dict[str, list[str]]:
    """For settings that belong to no model at hand, the forecasters that have them:
    ``{"seed": ["diffusion"]}`` (keys no forecaster has are left out)."""
    found: dict[str, list[str]] = {}
    for name in available():
        try:
            fields = forecaster_class(name).Settings.model_fields
        except StrategyError:
            continue
        for key in keys:
            if key in fields:
                found.setdefault(key, []).append(name)
    return found


@functools.cache
def joined_settings(
    base: type[pydantic.BaseModel], kind: type[ForecasterKind]
) -> type[pydantic.BaseModel]:
    """One settings model with ``base``'s fields and the forecaster's: an instance of both, so
    the trader reads its own and hands the same object to the forecaster. A forecaster field
    that would shadow one of the trader's is refused (the spec could not say whose it is)."""
    clash = sorted(set(base.model_fields) & set(kind.Settings.model_fields))
    if clash:
        raise StrategyError(
            f"forecaster {kind.__name__}'s settings {', '.join(clash)} clash with the trader's"
        )
    if kind.Settings is ForecasterSettings:
        return base

    own = kind.Settings

    class Joined(base, own):  # type: ignore[valid-type, misc]
        def __reduce__(self) -> tuple[Any, ...]:
            """Pickled as what it is joined from (a class made here cannot be found by its
            name), for an agent sent whole to an ``--isolate`` worker."""
            return _rejoined, (base, kind, self.model_dump())

    Joined.__name__ = Joined.__qualname__ = f"{base.__name__}+{kind.__name__}"
    return Joined


def _rejoined(
    base: type[pydantic.BaseModel], kind: type[ForecasterKind], values: dict[str, Any]
) -> pydantic.BaseModel:
    return joined_settings(base, kind)(**values)
