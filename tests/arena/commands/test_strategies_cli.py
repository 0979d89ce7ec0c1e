"""``arena strategies`` lists every strategy with the settings its pydantic model accepts."""

from __future__ import annotations

import pytest
from click.testing import Result

from strategies import loader
from tests.conftest import Arena


def succeeded(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.output


def test_json_lists_every_builtin_with_its_settings(arena: Arena) -> None:
    entries = {e["name"]: e for e in arena.json("strategies")}
    assert set(loader.BUILTINS) <= set(entries)
    sign = entries["sign"]
    assert sign["source"] == "builtin" and sign["error"] is None
    settings = {s["name"]: s for s in sign["settings"]}
    assert settings["B"] == {
        "name": "B",
        "type": "float",
        "default": 500.0,
        "required": False,
        "description": "largest position per market ($)",
        "forecaster": None,
    }
    assert settings["forecaster"]["default"] == "extremized"
    assert (settings["column"]["forecaster"], settings["column"]["default"]) == (
        "file",
        "pred_prob",
    )
    assert (
        settings["show_price"]["description"]
        == "llm: the model is shown the market's current price"
    )
    assert {s["name"] for s in entries["extremized"]["settings"]} >= {"a", "spread", "min_edge"}
    assert entries["extremized"]["settings"][2]["default"] == 0.05
    assert entries["hold"]["settings"] == []
    assert entries["scripted"]["argument"] == "path"


def test_table_shows_descriptions_and_settings(arena: Arena) -> None:
    out = succeeded(arena("strategies"))
    assert "contrarian" in out and "bets on the underdog" in out
    assert "window_days" in out and "scripted:PATH" in out


def test_a_broken_plugin_is_listed_with_its_error(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loader, "_plugin_names", lambda: {"broken": "no_such_module_xyz:Thing"})
    entries = {e["name"]: e for e in arena.json("strategies")}
    assert entries["broken"]["source"] == "plugin"
    assert "no_such_module_xyz" in entries["broken"]["error"]
    assert entries["sign"]["error"] is None
    assert "cannot load" in succeeded(arena("strategies"))


def test_a_plugin_cannot_take_a_built_in_name(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed package registering ``favourite`` replaced the baseline every agent named
    so runs, in every replay; a built-in's name keeps meaning the built-in."""
    taken = {"favourite": "no_such_module_xyz:Thing", "mine": "no_such_module_xyz:Mine"}
    monkeypatch.setattr(loader, "_plugin_names", lambda: taken)
    assert loader.available()["favourite"] == loader.BUILTINS["favourite"]
    assert loader.available()["mine"] == "no_such_module_xyz:Mine"
    assert loader.strategy_class("favourite").__name__ == "Favourite"
    entries = {e["name"]: e for e in arena.json("strategies")}
    assert entries["favourite"]["error"] is None


def test_the_list_reads_at_80_columns(arena: Arena) -> None:
    """Five columns of equal width left each description 13 cells at 80 columns ("bets per" /
    "decision", "largest bet" / "in dollars"): names, types and defaults now keep their width
    and the description takes the rest, and nothing runs past the 80th column."""
    out = succeeded(arena("strategies", env={"COLUMNS": "80"}))
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    for words in ("bets per decision", "largest bet in", "never bets: the"):
        assert any(words in line for line in lines), words
    assert "settings go in an agent spec" in out
