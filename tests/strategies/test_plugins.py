"""What a user installed must not change what arena does with its own names, nor the tests:
the walkthrough's ``pip install -e ./cheapskate`` once made ``arena strategy new cheapskate``
(and the five tests built on it) fail with "would shadow the module"."""

from __future__ import annotations

from pathlib import Path

import pytest

from strategies.plugins import plugin_packages
from tests.conftest import Arena


@pytest.fixture
def installed_cheapskate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """What ``pip install -e ./cheapskate`` leaves: the package importable and a dist-info
    declaring its entry point."""
    site = tmp_path / "site"
    package = site / "cheapskate"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "strategy.py").write_text("")
    info = site / "cheapskate-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cheapskate\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        "[arena.strategies]\ncheapskate = cheapskate.strategy:Cheapskate\n"
    )
    monkeypatch.syspath_prepend(str(site))
    return site


def test_plugin_packages_are_the_top_level_modules_of_entry_points(
    installed_cheapskate: Path,
) -> None:
    assert "cheapskate" in plugin_packages()
    assert "numpy" not in plugin_packages()


def test_a_plugin_of_an_installed_plugins_name_can_be_generated(
    installed_cheapskate: Path, tmp_path: Path, arena: Arena
) -> None:
    result = arena("strategy", "new", "cheapskate", "--dir", tmp_path / "again", "--json")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "again" / "cheapskate" / "strategy.py").is_file()


def test_a_module_arena_needs_is_still_not_shadowed(tmp_path: Path, arena: Arena) -> None:
    result = arena("strategy", "new", "numpy", "--dir", tmp_path / "numpy")
    assert result.exit_code == 1
    assert "would shadow the module" in result.output
