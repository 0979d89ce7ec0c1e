"""Names that installed packages add through entry points, beside the built-in ones.

Strategies (``arena.strategies``) and forecasters (``arena.forecasters``) are found the same
way. A plugin cannot take a built-in's name: ``favourite`` must be the same baseline in every
run whatever else is installed, or one package registering ``favourite`` would change the
results of every agent named so.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points


def installed(group: str) -> dict[str, str]:
    """``name -> module:attr`` of every entry point in ``group``."""
    return {ep.name: ep.value for ep in entry_points(group=group)}


def with_plugins(builtins: Mapping[str, str], plugins: Mapping[str, str]) -> dict[str, str]:
    """The built-ins, then every plugin whose name is not a built-in's."""
    return {**builtins, **{k: v for k, v in plugins.items() if k not in builtins}}
