"""``arena strategies``: every strategy that can be named in an agent spec, and its settings.

The settings come straight from each strategy's pydantic ``Settings`` model, so this listing
cannot drift from what ``NAME=KIND?key=value`` actually accepts.
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from typing import Any

import click
import pydantic
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from arena.console import make_console
from strategies.api import Strategy
from strategies.loader import BUILTINS, available, strategy_class


def _type_name(annotation: Any) -> str:
    """A setting's type as a person reads it: ``'minimal' | 'low' | None`` rather than
    ``Optional[Literal['minimal', 'low']]``, which the 80-column list cut mid-word."""
    if annotation is type(None):
        return "None"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):  # Optional[X] and X | None alike
        return " | ".join(_type_name(a) for a in args)
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


CAPTION = "settings go in an agent spec: --agent NAME=STRATEGY?setting=value&…"

DESCRIPTION_MIN = 50
"""The fewest cells the table leaves its description; a narrower terminal gets the list
(``_show_list``): at 80 columns the table's description had 16 cells, a word or two a line,
and the listing ran to 410 lines (152 as a list; at 120 columns the table takes 142)."""

WRAPPED_AT = 10
"""Cells past which a type or a default wraps in the table, between its words: its column is
never narrower than its longest word (at 10 cells, ``'extremized'`` was cut in two)."""

GAP = 3
"""Cells between two of the table's columns: a space of padding either side of the box's blank
divider."""


def _heading(entry: dict[str, Any]) -> tuple[str, str]:
    """A strategy's name as an agent spec gives it, and its description or why it cannot load."""
    name = entry["name"] + (":PATH" if entry["argument"] else "")
    return name, (f"cannot load: {entry['error']}" if entry["error"] else entry["description"])


def _default(setting: dict[str, Any]) -> str:
    return "required" if setting["required"] else repr(setting["default"])


def _show(console: Console, entries: list[dict[str, Any]]) -> None:
    """The table where its description gets ``DESCRIPTION_MIN`` cells, else the list."""
    settings = [s for e in entries for s in e["settings"]]
    texts = {
        "strategy": [_heading(e)[0] for e in entries],
        "setting": [s["name"] for s in settings],
        "type": [s["type"] for s in settings],
        "default": [_default(s) for s in settings],
    }
    widths = {}
    for column, cells in texts.items():
        widest = max(map(len, [column, *cells]))
        if column in ("type", "default"):
            longest_word = max(len(word) for text in [column, *cells] for word in text.split())
            widest = min(widest, max(WRAPPED_AT, longest_word))
        widths[column] = widest
    if sum(widths.values()) + GAP * len(widths) + DESCRIPTION_MIN <= console.width:
        _show_table(console, entries, widths)
    else:
        _show_list(console, entries)


def _show_table(console: Console, entries: list[dict[str, Any]], widths: dict[str, int]) -> None:
    """A row per strategy and per setting: names, types and defaults keep their ``widths`` (a
    type or a default wraps between its words) and the description takes the rest."""
    table = Table(
        title="strategies", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
        pad_edge=False, caption=CAPTION, caption_justify="left",
    )  # fmt: skip
    for column, width in widths.items():
        table.add_column(column, max_width=width)
    table.add_column("description", ratio=1, min_width=DESCRIPTION_MIN)
    for entry in entries:
        name, description = _heading(entry)
        said = Text(description, style="red" if entry["error"] else "")
        table.add_row(Text(name, style="bold"), "", "", "", said)
        for s in entry["settings"]:
            cells = (s["name"], s["type"], _default(s), s["description"])
            table.add_row("", *map(Text, cells))
        table.add_section()
    console.print(table)


def _show_list(console: Console, entries: list[dict[str, Any]]) -> None:
    """A line per strategy and one per setting, ``name (type, default): description``,
    wrapped between words under a hanging indent: what a narrow terminal reads down."""
    console.print(Text.assemble(("strategies", "bold"), f" · {CAPTION}"))
    for entry in entries:
        name, description = _heading(entry)
        said = (description, "red" if entry["error"] else "")
        console.print()
        console.print(_hanging(console, Text.assemble((name, "bold"), " — ", said), 0, 4))
        for s in entry["settings"]:
            default = "required" if s["required"] else f"default {_default(s)}"
            line = Text.assemble(
                (s["name"], "bold"), f" ({s['type']}, {default}): {s['description']}"
            )
            console.print(_hanging(console, line, 2, 6))


def _hanging(console: Console, text: Text, first: int, rest: int) -> Text:
    """``text`` wrapped between words to the console's width, its first line indented
    ``first`` cells and the lines after it ``rest``."""
    lines = text.wrap(console, max(console.width - rest, 1))
    for line in lines:
        line.rstrip()
    return Text("\n").join(
        Text(" " * (rest if k else first)) + line for k, line in enumerate(lines)
    )


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
