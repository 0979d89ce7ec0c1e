"""``arena strategies`` lists every strategy with the settings its pydantic model accepts."""

from __future__ import annotations

from typing import Literal, Optional

import pytest
from click.testing import Result

from arena.commands.strategies import _type_name
from strategies import loader
from strategies.loader import strategy_class
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


def test_at_80_columns_each_setting_is_a_line_with_every_value_whole(arena: Arena) -> None:
    """The table left its description 16 cells at 80 columns (410 lines, a word or two a line)
    and cut values mid-word ("'extremize" / "d'", "Optional[L" / "iteral['mi"): now a line per
    setting, ``name (type, default): description``, wrapped between words."""
    entries = arena.json("strategies")
    out = succeeded(arena("strategies", env={"COLUMNS": "80"}))
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    settings = [s for e in entries for s in e["settings"]]
    begun = [line for line in lines if line.startswith("  ") and not line.startswith("   ")]
    assert len(begun) == len(settings)  # each setting begins a line of its own
    text = " ".join(out.split())  # the wrapped lines joined again
    for s in settings:
        default = "required" if s["required"] else f"default {s['default']!r}"
        said = " ".join(s["description"].split())
        assert f"{s['name']} ({s['type']}, {default}): {said}" in text, s
    for e in entries:
        assert f"{e['name']}{':PATH' if e['argument'] else ''} — {e['description']}" in text
    assert "forecaster (str, default 'extremized'): NAME[:ARG]" in text
    assert "settings go in an agent spec" in out
    assert len(lines) < 200  # 410 before


def test_in_the_wide_table_no_type_or_default_is_cut_in_a_word(arena: Arena) -> None:
    """At 120 columns the table's type and default columns, 10 cells wide, cut "'extremized'"
    and "'pred_prob'" in two; they wrap between words now, never in one."""
    entries = arena.json("strategies")
    out = succeeded(arena("strategies", env={"COLUMNS": "120"}))
    assert out.splitlines()[1].split() == ["strategy", "setting", "type", "default",
                                           "description"]  # fmt: skip
    words = set(out.split())
    for s in (s for e in entries for s in e["settings"]):
        shown = f"{s['type']} {'required' if s['required'] else repr(s['default'])}"
        assert set(shown.split()) <= words, s


def test_a_type_reads_as_python_writes_it_today() -> None:
    """``Optional[Literal['minimal', …]]`` is the union a person reads: its values, then None."""
    reasoning = strategy_class("llm").listed_settings()[""].model_fields["reasoning_effort"]
    assert _type_name(reasoning.annotation) == "'minimal' | 'low' | 'medium' | 'high' | None"
    assert _type_name(Optional[int]) == "int | None"  # noqa: UP045 (the old spelling, read)
    assert _type_name(float | None) == "float | None"
    assert _type_name(Literal[3]) == "3"
    assert _type_name(list[str]) == "list[str]"
