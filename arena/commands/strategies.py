"""``arena strategies``: every strategy that can be named in an agent spec, and its settings.

The settings come straight from each strategy's pydantic ``Settings`` model, so this listing
cannot drift from what ``NAME=KIND?key=value`` actually accepts.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import click
import pydantic
from rich import box
from rich.console import Console
from rich.table import Table

from arena.console import make_console
from strategies.api import Strategy
from strategies.loader import BUILTINS, available, strategy_class


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _plain(value: Any) -> Any:
    """A default as JSON can carry it (anything exotic as its text)."""
    return value if isinstance(value, str | int | float | bool | None) else str(value)


def settings_rows(model: type[pydantic.BaseModel]) -> list[dict[str, Any]]:
    """name, type, default and description of every field of a Settings model."""
    rows = []
    for name, field in model.model_fields.items():
        required = field.is_required()
        rows.append(
            {
                "name": name,
                "type": _type_name(field.annotation),
                "default": None
                if required
                else _plain(field.get_default(call_default_factory=True)),
                "required": required,
                "description": field.description or "",
            }
        )
    return rows


def listed_rows(cls: type[Strategy]) -> list[dict[str, Any]]:
    """The strategy's own settings, then those of each forecaster it may use (``sign``,
    ``linear``), each described as that forecaster's and naming it under ``forecaster``."""
    return [
        {**row, "forecaster": owner or None,
         "description": f"{owner}: {row['description']}" if owner else row["description"]}
        for owner, model in cls.listed_settings().items()
        for row in settings_rows(model)
    ]  # fmt: skip


def _summary(cls: type[Strategy]) -> str:
    doc = inspect.getdoc(cls) or ""
    return cls.description or doc.split("\n\n")[0].replace("\n", " ")


def catalogue() -> list[dict[str, Any]]:
    """One entry per available strategy. A plugin that fails to import is listed with its error
    instead of breaking the list: the listing is where a user goes to find out why."""
    entries = []
    for name, target in available().items():
        entry: dict[str, Any] = {
            "name": name,
            "target": target,
            "source": "builtin" if BUILTINS.get(name) == target else "plugin",
            "description": "",
            "argument": None,
            "settings": [],
            "error": None,
        }
        try:
            cls = strategy_class(name)
        except Exception as exc:  # a broken plugin must not hide the others
            entry["error"] = f"{type(exc).__name__}: {exc}"
        else:
            entry["description"] = _summary(cls)
            if "path" in inspect.signature(cls.__init__).parameters:
                entry["argument"] = "path"
            entry["settings"] = listed_rows(cls)
        entries.append(entry)
    return entries


def _show(console: Console, entries: list[dict[str, Any]]) -> None:
    table = Table(
        title="strategies", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
        caption="settings go in an agent spec: --agent NAME=STRATEGY?setting=value&…",
        caption_justify="left",
    )  # fmt: skip
    # names, types and defaults keep their width and the description takes what is left: at
    # 80 columns five equal columns wrapped every description to 13 cells
    table.add_column("strategy", no_wrap=True)
    table.add_column("setting", no_wrap=True)
    for column in ("type", "default"):  # a long Literal[...] folds
        table.add_column(column, overflow="fold", max_width=10)
    table.add_column("description", ratio=1, min_width=16, overflow="fold")
    for entry in entries:
        name = entry["name"] + (":PATH" if entry["argument"] else "")
        if entry["error"]:
            table.add_row(f"[bold]{name}[/]", "", "", "", f"[red]cannot load: {entry['error']}[/]")
        else:
            table.add_row(f"[bold]{name}[/]", "", "", "", entry["description"])
        for s in entry["settings"]:
            default = "required" if s["required"] else repr(s["default"])
            table.add_row("", s["name"], s["type"], default, s["description"])
        table.add_section()
    console.print(table)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def strategies(as_json: bool) -> None:
    """List the built-in and installed strategies with their settings.

    Settings go in an agent spec's query string: NAME=KIND?key=value&key=value.

    \b
    Examples:
      arena strategies
      arena strategies --json
      arena replay --agent 's=sign?B=1000&forecaster=file:preds.csv'
    """
    entries = catalogue()
    console = make_console()
    if as_json:
        console.out(json.dumps(entries, ensure_ascii=False), highlight=False)
        return
    _show(console, entries)
