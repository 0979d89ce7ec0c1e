"""The equity chart's legend sits above its plot, never on the curves: a box over the plot's
top-left corner once washed out an agent's first ~45 days."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from arena.reports.charts import LEFT, PALETTE, RIGHT, TOP, WIDTH, equity_chart, legend_rows

NAMES = st.lists(
    st.text("abcdefghijklmnopqrstuvwxyz_?=", min_size=1, max_size=40), min_size=1, max_size=8,
    unique=True,
)  # fmt: skip


def colours(names: list[str]) -> dict[str, str]:
    return {name: PALETTE[k % len(PALETTE)] for k, name in enumerate(names)}


def test_four_short_names_take_one_row_above_the_plot() -> None:
    """Entries of (len + 2) × 7 px plus 12 apart: "— strategy" at 70 (10 × 7 = 70 wide),
    "— hold" from 70 + 70 + 12 = 152 (42 wide), "— favourite" from 152 + 42 + 12 = 206 (77
    wide), "— random" from 206 + 77 + 12 = 295; baselines 8 below ``TOP`` = 20."""
    names = ["strategy", "hold", "favourite", "random"]
    svg, rows = legend_rows(names, colours(names))
    assert rows == 1
    assert re.findall(r'<text x="(\d+)" y="(\d+)"', svg) == [
        ("70", "28"), ("152", "28"), ("206", "28"), ("295", "28")
    ]  # fmt: skip


@given(NAMES)
def test_the_legend_is_above_the_plot_and_inside_the_chart(names: list[str]) -> None:
    offsets = np.array([0, 86_400 * 50], dtype=np.int64)
    means = [(name, offsets, np.array([10_000.0, 10_500.0])) for name in names]
    svg = equity_chart(means, colours(names), ())
    plot_top = float(re.search(r'<rect x="70" y="([\d.]+)"', svg).group(1))  # type: ignore[union-attr]
    _, rows = legend_rows(names, colours(names))
    assert plot_top == TOP + 14 * rows
    entries = re.findall(r'<text x="(\d+)" y="(\d+)" fill="#', svg)
    assert len(entries) == len(names)
    for x, y in entries:
        assert LEFT <= int(x) < WIDTH - RIGHT
        assert int(y) < plot_top  # a baseline above the plot's frame


def test_the_tours_eleven_agents_each_draw_in_a_colour_of_their_own() -> None:
    """Two replays of the tour into one log name eleven agents; with eight colours the ninth
    to eleventh (random, contrarian, coin) drew in the first three's (extremized, linear,
    fav), and the equity chart could not tell them apart."""
    from arena.reports.html import agent_colours

    names = ["extremized", "linear", "fav", "favourite", "hold", "idle", "sign", "edge",
             "random", "contrarian", "coin"]  # fmt: skip
    drawn = agent_colours(names)
    assert len(set(drawn.values())) == len(names)
    assert "#8c959f" not in PALETTE  # the ladder's step bars keep their grey
