"""Finding strategies by name: built-ins, installed plugins, ``module:Class`` and files.

An agent spec is ``KIND[:ARG][?key=value&...]``: ``favourite``, ``random?bets=3``,
``scripted:decisions.json``, ``mypkg.strats:Momentum?window=5`` or
``./my_strategy.py:Momentum``. Settings from the query string go through the strategy's
pydantic ``Settings``, so a typo or a wrong type is reported with the field's name.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import math
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import pydantic

from strategies.api import Strategy, StrategyError
from strategies.plugins import installed, with_plugins
from strategies.suggest import did_you_mean

ENTRY_POINT_GROUP = "arena.strategies"

BUILTINS: dict[str, str] = {
    "hold": "strategies.builtin.hold:Hold",
    "favourite": "strategies.builtin.price_side:Favourite",
    "random": "strategies.builtin.random_agent:RandomAgent",
    "scripted": "strategies.builtin.scripted:Scripted",
    "contrarian": "strategies.builtin.price_side:Contrarian",
    "extremized": "strategies.builtin.extremized:Extremized",
    "sign": "strategies.builtin.edge:Sign",
    "linear": "strategies.builtin.edge:Linear",
    "diffusion": "strategies.builtin.edge:Diffusion",
    "kelly": "strategies.builtin.kelly:Kelly",
    "llm": "strategies.llm.agent:LLMAgent",
}


@dataclass(frozen=True)
class AgentSpec:
    """A parsed agent spec: what to load, its positional argument and its settings."""

    kind: str
    arg: str
    settings: dict[str, str]

    @classmethod
    def parse(cls, spec: str) -> AgentSpec:
        body, _, query = spec.partition("?")
        settings = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=False))
        if not body:
            raise StrategyError(f"agent spec {spec!r} names no strategy")
        kind, arg = body, ""
        head, sep, tail = body.partition(":")
        if sep and (head in BUILTINS or head in _plugin_names()):
            kind, arg = head, tail
        return cls(kind=kind, arg=arg, settings=settings)


def _plugin_names() -> dict[str, str]:
    return installed(ENTRY_POINT_GROUP)


def available() -> dict[str, str]:
    """Every strategy that can be named without a path: built-ins, then installed plugins (a
    plugin cannot take a built-in's name)."""
    return with_plugins(BUILTINS, _plugin_names())


def _import_target(target: str) -> type[Strategy]:
    """``module:Class`` or ``path/to/file.py:Class`` to a Strategy subclass."""
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name:
        known = available()
        raise StrategyError(
            f"unknown strategy {target!r}{did_you_mean(target, known)}: use a built-in "
            f"({', '.join(known)}), module:Class or path/to/file.py:Class"
        )
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise StrategyError(f"strategy file {where} does not exist")
        digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
        module_name = f"arena_plugin_{digest}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise StrategyError(f"cannot load strategy file {where}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:  # SystemExit: a plugin must not end arena
            raise StrategyError(f"{where}: {type(exc).__name__}: {exc}") from None
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise StrategyError(f"cannot import {where}: {exc}") from None
        except (Exception, SystemExit) as exc:  # a plugin module that fails while it runs
            raise StrategyError(f"{where}: {type(exc).__name__}: {exc}") from None
    cls = getattr(module, name, None)
    if not (inspect.isclass(cls) and issubclass(cls, Strategy)):
        raise StrategyError(f"{target} is not a Strategy subclass")
    return cls


def strategy_class(kind: str) -> type[Strategy]:
    return _import_target(available().get(kind, kind))


def validation_summary(exc: pydantic.ValidationError, fields: Iterable[str] = ()) -> str:
    """pydantic's multi-line report as one line: ``field: message; field: message``. An
    unknown name close to one of ``fields`` (the model's) says which was meant."""
    known = list(fields)
    parts = []
    for e in exc.errors():
        where = ".".join(str(x) for x in e["loc"]) or "settings"
        hint = did_you_mean(where, known) if e["type"] == "extra_forbidden" else ""
        parts.append(f"{where}: {e['msg'].removeprefix('Value error, ')}{hint}")
    return "; ".join(parts)


def build_strategy(spec: str) -> Strategy:
    """A ready strategy from its spec, or a one-line StrategyError saying what is wrong."""
    parsed = AgentSpec.parse(spec)
    cls = strategy_class(parsed.kind)
    model = cls.settings_for(parsed.settings)
    try:
        settings = model(**parsed.settings)
    except pydantic.ValidationError as exc:
        summary = validation_summary(exc, model.model_fields)
        raise StrategyError(f"{parsed.kind}: bad settings: {summary}") from None
    for key, value in settings:
        if isinstance(value, float) and not math.isfinite(value):
            # pydantic's lax floats take 'inf', 'nan' and '1e400', which no setting's bounds
            # expect: stake=inf bet every cent, B=inf raised at every decision
            given = parsed.settings.get(key, value)
            raise StrategyError(f"{parsed.kind}: bad settings: {key}: {given!r} is not finite")
    kwargs: dict[str, Any] = {"settings": settings}
    if parsed.arg:
        if "path" not in inspect.signature(cls.__init__).parameters:
            raise StrategyError(f"{parsed.kind} takes no argument (got {parsed.arg!r})")
        kwargs["path"] = parsed.arg
    try:
        return cls(**kwargs)
    except StrategyError:
        raise
    except Exception as exc:  # a plugin's own __init__: its bug, reported as the spec's fault
        raise StrategyError(f"{parsed.kind}: {type(exc).__name__}: {exc}") from None


_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_.-]+")


def derived_name(spec: str, keys: Iterable[str] | None = None) -> str:
    """An agent name made from a spec's kind, argument and settings: ``sign?B=100&min_edge=0``
    is ``sign-B_100-min_edge_0`` (settings sorted by key, so their order in the spec does not
    matter; ``keys`` keeps only those settings). A path's kind is its class name."""
    parsed = AgentSpec.parse(spec)
    parts = [parsed.kind.rpartition(":")[2] or parsed.kind]
    if parsed.arg:
        parts.append(Path(parsed.arg).name)
    wanted = parsed.settings.keys() if keys is None else keys
    parts += [f"{k}_{parsed.settings[k]}" for k in sorted(wanted) if k in parsed.settings]
    return "-".join(_NOT_IN_NAMES.sub("_", part).strip("_") or "_" for part in parts)


def name_specs(items: Sequence[str], taken: Iterable[str] = ()) -> dict[str, str]:
    """``{name: spec}`` for agent specs given without names, or as ``NAME=SPEC``.

    An unnamed spec is named by its kind, as it always was, unless two specs share that kind
    (``sign?B=100`` beside ``sign?B=500``) or the kind is a path: then it is named by its
    settings (:func:`derived_name`). ``taken`` are names already in use (a backtest's ``strategy``).
    Two specs that still end up with one name raise StrategyError, saying to name them."""
    named: list[tuple[str | None, str]] = []
    for item in items:
        head, sep, spec = item.partition("=")
        if sep and head and spec and "?" not in head:  # NAME=SPEC; a bare spec's '=' is after '?'
            named.append((head, spec))
        else:
            named.append((None, item))
    kinds = [AgentSpec.parse(spec).kind for name, spec in named if name is None]
    agents: dict[str, str] = {}
    used = set(taken)
    for name, spec in named:
        if name is None:
            kind = AgentSpec.parse(spec).kind
            unique = kinds.count(kind) == 1 and _NOT_IN_NAMES.search(kind) is None
            name = kind if unique else derived_name(spec)
        if name in used or name in agents:
            raise StrategyError(f"two agents are named {name!r}: name them, e.g. {name}2={spec}")
        agents[name] = spec
    return agents
