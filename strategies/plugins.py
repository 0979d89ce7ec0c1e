"""Names that installed packages add through entry points, beside the built-in ones.

Strategies (``arena.strategies``) and forecasters (``arena.forecasters``) are found the same
way. A plugin cannot take a built-in's name: ``favourite`` must be the same baseline in every
run whatever else is installed, or one package registering ``favourite`` would change the
results of every agent named so.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points

GROUPS = ("arena.strategies", "arena.forecasters")
"""The entry-point groups plugins register names in (strategies, forecasters)."""


def installed(group: str) -> dict[str, str]:
    """``name -> module:attr`` of every entry point in ``group``."""
    return {ep.name: ep.value for ep in entry_points(group=group)}


def plugin_packages(groups: tuple[str, ...] = GROUPS) -> set[str]:
    """The top-level packages installed plugins' entry points live in (``cheapskate`` for
    ``cheapskate.strategy:Cheapskate``): a plugin a user installed, not a module arena needs,
    so generating another plugin of that name elsewhere hides nothing arena or its tests use."""
    return {
        value.partition(":")[0].partition(".")[0]
        for group in groups
        for value in installed(group).values()
    }


def with_plugins(builtins: Mapping[str, str], plugins: Mapping[str, str]) -> dict[str, str]:
    """The built-ins, then every plugin whose name is not a built-in's."""
    return {**builtins, **{k: v for k, v in plugins.items() if k not in builtins}}
