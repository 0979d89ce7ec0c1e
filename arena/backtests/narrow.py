"""Tables for a narrow terminal: where one table is wider than the terminal, its columns go in
tables of their own, one under another, as many to a table as fit, each keeping the column
that names its rows. In one table Rich squeezed every column and cut its figures ("-1,723…",
"[-22.4…") at 80 columns, the width a terminal opens at.

``arena sweep``'s results table (``arena.backtests.sweep.settings_table``) splits its paired
differences with ``runs_that_fit`` and ``stacked`` too, under a figures table of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from arena.reports.terminal import table_width

T = TypeVar("T")


def runs_that_fit(items: Sequence[T], fits: Callable[[Sequence[T]], bool]) -> list[list[T]]:
    """``items`` in order, cut into runs each as long as ``fits`` allows (at least one item a
    run, even where one alone does not fit)."""
    runs: list[list[T]] = [[]]
    for item in items:
        if runs[-1] and not fits([*runs[-1], item]):
            runs.append([])
        runs[-1].append(item)
    return runs


def stacked(tables: Sequence[RenderableType]) -> RenderableType:
    """Tables one under another, a blank line after each whose box draws a bottom edge (the
    house style's ends in a blank line of its own)."""
    parts: list[RenderableType] = []
    for table in tables:
        if parts and isinstance(last := parts[-1], Table) and last.box and last.box.bottom.strip():
            parts.append("")
        parts.append(table)
    return Group(*parts)


def split_to_fit(
    build: Callable[[Sequence[T]], Table], items: Sequence[T], width: int | None
) -> RenderableType:
    """The table ``build`` lays out with every one of ``items`` (its column groups: agents,
    rungs, kinds of figure); where that is wider than ``width`` cells, one table per run of
    items that fits, the title over the first and the caption under them all, as wide as the
    terminal (under the narrowest table, a legend ran to a dozen lines)."""
    whole = build(items)
    if width is None or table_width(whole) <= width:
        return whole
    tables: list[RenderableType] = []
    for run in runs_that_fit(items, lambda r: table_width(build(r)) <= width):
        table = build(run)
        table.title = table.title if not tables else None
        caption, table.caption = table.caption, None
        tables.append(table)
    if isinstance(caption, str):
        tables.append(Text.from_markup(caption, style="table.caption"))
    elif caption is not None:
        tables.append(caption)
    return stacked(tables)
