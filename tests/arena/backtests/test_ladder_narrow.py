"""``arena ladder`` on the README tour's four agents, as a person reads it: at 80 columns in a
real terminal every figure whole, and on the page, in Chromium at 1400 and 1900 px, every
column in view, each step's cost with one sign in the table and the chart.

At 80 columns the four agents' P/L and costs did not fit one table, and Rich cut every figure
("-1,723…  4…  -326…  16…"); the text column and the figures were both headed "took", and the
footnote ("took: the P/L going to that rung from the one above cost") was not a sentence. On
the page the spread's cost was 41.17 in the table and -41.17 in the chart, and the footnote
named l2 and delay rungs a price tape's ladder does not have. The log is the tour's agents in
one cohort of ten markets, so the ladder's mean over cohorts is the JSON's one row per agent.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.arena.backtests.test_page import tables_cut
from tests.conftest import Arena
from tests.tmux_terminal import Tmux

AGENTS = ("--agent", "fav=favourite", "--agent", "coin=random?bets=3", "--agent", "edge=sign",
          "--agent", "idle=hold")  # fmt: skip
STEPS = (
    "cost ($) is the P/L a step took from the rung before (negative: it added): fa → mid: the "
    "midpoint; → touch (2 ticks, synthetic): the spread; → touch + fees: the fee"
)
"""The footnote, from the rungs a price tape's ladder climbs."""


@pytest.fixture(scope="module")
def log(arena: Arena, tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("ladder-narrow") / "tour.db"
    done = arena("replay", "--start", "2024-09-01", "--universe", "10", *AGENTS, "--db", db)
    assert done.exit_code == 0, done.output
    return db


@pytest.fixture(scope="module")
def data(arena: Arena, log: Path) -> dict[str, Any]:
    return arena.json("ladder", log)  # type: ignore[no-any-return]


def whole(figure: str, text: str) -> bool:
    """``figure`` in ``text`` with no digit, separator or sign run on to either side."""
    return re.search(rf"(?<![\d.,+-]){re.escape(figure)}(?![\d.,])", text) is not None


def assert_read_whole(screen: str, data: dict[str, Any]) -> None:
    """Every agent's P/L on each rung and the cost of each step, as ``--json`` has them, whole
    on that rung's line(s); nothing cut, nothing wider than 80; the columns say what they are
    and the footnote names the steps this ladder took."""
    lines = screen.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80, screen
    assert "…" not in screen, screen
    assert len(data["agents"]) == 4 and len({row["cohort"] for row in data["agents"]}) == 1
    rungs = [r["name"] for r in data["rungs"]]
    on = {
        name: " | ".join(line for line in lines if line.startswith(f" {name}  ")) for name in rungs
    }
    for row in data["agents"]:
        for k, name in enumerate(rungs):
            assert whole(f"{row['pnl'][name]:+,.2f}", on[name]), (row["agent"], name, screen)
            if k:
                cost = row["took"][data["rungs"][k]["took"]]
                assert whole(f"{cost:,.2f}", on[name]), (row["agent"], name, screen)
    heads = " ".join(x for k, x in enumerate(lines) if "─" in lines[min(k + 1, len(lines) - 1)])
    assert "step" in heads and "cost ($)" in heads and "took" not in heads, heads
    said = " ".join(screen.split())
    assert STEPS in said, said
    assert "depth" not in said and "delay" not in said


def test_at_80_columns_every_figure_is_whole(arena: Arena, log: Path, data: dict[str, Any]) -> None:
    done = arena("ladder", log, env={"COLUMNS": "80"})
    assert done.exit_code == 0, done.output
    screen = done.stdout[: done.stdout.index("Forecasters")]
    assert_read_whole(screen, data)
    # the coin's spread: 61.12 of P/L, a cost in the cost column, no sign flipped
    [coin] = [row for row in data["agents"] if row["agent"] == "coin"]
    assert round(coin["took"]["the spread"], 2) == 61.12
    assert round(coin["pnl"]["fa"] - coin["pnl"]["touch (2 ticks, synthetic)"], 2) == 61.12


def test_wide_enough_an_agent_is_a_row(arena: Arena, log: Path, data: dict[str, Any]) -> None:
    """In 200 columns one table holds it all: an agent a row, a rung and a step a column."""
    out = arena("ladder", log).stdout
    out = out[: out.index("Forecasters")]
    assert out.count("agent") == 1  # one table
    [header] = [line for line in out.splitlines() if line.lstrip().startswith("agent")]
    assert "the midpoint" in header and "the spread" in header and "the fee" in header
    for row in data["agents"]:
        [line] = [x for x in out.splitlines() if x.startswith(f" {row['agent']} ")]
        assert [f"{v:+,.2f}" for v in row["pnl"].values()] + [
            f"{v:,.2f}" for v in row["took"].values()
        ] == line.split()[1:]


@pytest.mark.slow  # a real terminal: tmux
def test_in_an_80_column_terminal_every_figure_is_whole(
    tmux: Tmux, log: Path, data: dict[str, Any]
) -> None:
    """As a person sees it: ``arena ladder`` in a tmux pane 80 columns wide."""
    program = Path(sys.executable).with_name("arena")
    command = shlex.join([str(program), "ladder", str(log)])
    env = {"TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    tmux("new-session", "-d", "-s", "step", "-x", "80", "-y", "50",
         "env", *(f"{k}={v}" for k, v in env.items()),
         "sh", "-c", f"{command}; echo ladder-done; sleep 600")  # fmt: skip
    tmux.wait_for("ladder-done")
    screen = tmux("capture-pane", "-p", "-S", "-", "-t", "step")
    assert_read_whole(screen[: screen.index("Forecasters")], data)


@pytest.fixture(scope="module")
def page(arena: Arena, log: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Any]:
    out = tmp_path_factory.mktemp("ladder-page")
    done = arena("ladder", log, "--html", out)
    assert done.exit_code == 0, done.output
    return (out / "index.html").read_text(), json.loads((out / "ladder.json").read_text())


def test_a_step_s_cost_has_one_sign_in_the_table_and_the_chart(page: tuple[str, Any]) -> None:
    html, data = page
    [table] = re.findall(r'<h2 id="rungs">.*?</table>', html, re.S)
    heads = [re.sub("<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>(.*?)</th>", table)]
    steps = [r["took"] for r in data["rungs"][1:]]
    assert heads[-3:] == [f"cost\u00a0($): {s}" for s in steps]
    for row in data["agents"]:
        [cells] = [
            [re.sub("<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
            for tr in re.findall(r"<tr>(.*?)</tr>", table)
            if f'<td class="l">{row["agent"]}</td>' in tr
        ]
        costs = [f"{row['took'][s]:,.2f}" for s in steps]
        assert cells[-3:] == costs
        drawn = [
            re.search(rf"<title>{row['agent']}, {s} cost: ([^<]*)</title>", html) for s in steps
        ]
        assert [m.group(1) if m else None for m in drawn] == costs  # the chart's, as the table's
    spread = {row["agent"]: row["took"]["the spread"] for row in data["agents"]}
    assert spread["coin"] > 0 and f"-{spread['coin']:,.2f}" not in html


def test_the_page_s_footnote_names_the_steps_climbed(page: tuple[str, Any]) -> None:
    html, _ = page
    text = " ".join(re.sub("<[^>]+>", " ", html).split())
    assert STEPS[0].upper() + STEPS[1:] in text
    assert "l2" not in text and "delay" not in text and "took:" not in text


@pytest.mark.slow  # headless Chromium started
@pytest.mark.parametrize("width", [1400, 1900])
def test_every_column_of_the_ladder_page_is_in_view(
    arena: Arena, tmp_path: Path, width: int
) -> None:
    """The widest ladder: the BTC books with a latency rung, six rungs and five costs."""
    db, out = tmp_path / "btc.db", tmp_path / "page"
    done = arena("replay", "--tape", "sample-books", "--start", "2026-09-28T08:50",
                 "--decisions", "1m", "--agent", "fav=favourite", "--agent", "idle=hold",
                 "--db", db)  # fmt: skip
    assert done.exit_code == 0, done.output
    done = arena("ladder", db, "--tape", "sample-books", "--latency", "1500", "--html", out)
    assert done.exit_code == 0, done.output
    assert tables_cut((out / "index.html").read_text(), width) == []
