"""``arena backtest``'s tables at 80 columns, the width a terminal opens at: every figure of
the summary, its paired differences and each cohort whole.

In one summary table Rich cut the interval ends and the paired difference, the point of a
backtest, to "[-22.4…" and "[-23.9…", and its header to "strate… − agent"; with the default
three comparison agents the per-cohort table did not fit either. Now the columns go in as many
tables as keep every figure whole. The backtests are README's tour (``sign --against
hold,favourite``) and the default comparison agents, each on ten markets and three Sundays.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from arena.commands.backtest import cohort_table, summary_table
from tests.conftest import Arena
from tests.tmux_terminal import Tmux

SMALL = ("--universe", "10", "--starts", "2024-09-01..2024-09-15", "--jobs", "1")
TOUR = ("backtest", "sign", "--against", "hold,favourite", *SMALL)


@pytest.fixture(scope="module")
def four(arena: Arena, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``sign`` against the default hold, favourite and random: four agents."""
    db = tmp_path_factory.mktemp("backtest-narrow") / "four.db"
    return arena.json("backtest", "sign", *SMALL, "--db", db)  # type: ignore[no-any-return]


def whole(figure: str, text: str) -> bool:
    """``figure`` in ``text`` with no digit, separator or sign run on to either side."""
    return re.search(rf"(?<![\d.,+-]){re.escape(figure)}(?![\d.,%])", text) is not None


def rows_of(screen: str, label: str) -> str:
    """Every line of ``screen`` that is a row of ``label`` (an agent, a start), in any table."""
    return " | ".join(x for x in screen.splitlines() if x.startswith(f" {label} "))


def pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.2f}%"


def num(x: float | None, fmt: str) -> str:
    return "—" if x is None else fmt.format(x)


def assert_every_figure_whole(screen: str, data: dict[str, Any], width: int = 80) -> None:
    """Each agent's mean return and its interval, both Briers, both skill scores, win rate;
    each comparison agent's paired difference, its interval and mark; each cohort's return,
    Brier and win rate of every agent: as ``--json`` has them, whole on that agent's or that
    start's lines. Nothing cut, nothing wider than ``width``."""
    assert max(len(line.rstrip()) for line in screen.splitlines()) <= width, screen
    assert "…" not in screen, screen
    for name, s in data["summary"].items():
        expected = [
            pct(s["return_mean"]), f"[{s['return_ci_low']:+.2f}, {s['return_ci_high']:+.2f}]",
            num(s["brier"], "{:.4f}"), num(s["brier_paid"], "{:.4f}"),
            num(s["bss"], "{:+.3f}"), num(s["bss_market"], "{:+.3f}"),
            num(s["win_rate"], "{:.1%}"),
        ]  # fmt: skip
        if pair := data["paired"].get(name):
            expected += [pct(pair["mean"]), f"[{pair['ci_low']:+.2f}, {pair['ci_high']:+.2f}]"]
            mark = "✓" if pair["significant"] else "·"
            assert re.search(rf"\]\s+{mark}\s*$", rows_of(screen, name).split(" | ")[-1])
        for figure in expected:
            assert figure == "—" or whole(figure, rows_of(screen, name)), (name, figure, screen)
    for cohort in data["cohorts"]:
        line = rows_of(screen, cohort["start"][:10])
        for name, a in cohort["agents"].items():
            cell = (f"{pct(a['return_pct'])} {num(a['brier'], '{:.3f}')} "
                    f"{num(a['win_rate'], '{:.0%}')}")  # fmt: skip
            assert cell in line, (cohort["start"], name, cell, screen)


def tables(screen: str) -> dict[str, int]:
    """How many tables of cohorts (headed "start") and of agents (headed "agent")."""
    heads = [
        line.split()[0] for line in screen.splitlines() if line.startswith((" start", " agent"))
    ]
    return {head: heads.count(head) for head in ("start", "agent")}


def rendered(data: dict[str, Any], width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(cohort_table(data, width))
    console.print(summary_table(data, width))
    return console.export_text()


def test_at_80_columns_four_agents_figures_are_whole(four: dict[str, Any]) -> None:
    screen = rendered(four, 80)
    assert_every_figure_whole(screen, four)
    # the per-cohort table in two, the summary's paired differences in a table of their own
    assert tables(screen) == {"start": 2, "agent": 2}
    assert "strategy first, then the agents it is compared with" in " ".join(screen.split())


def test_wide_enough_each_is_one_table(four: dict[str, Any]) -> None:
    screen = rendered(four, 200)
    assert_every_figure_whole(screen, four, 200)
    assert tables(screen) == {"start": 1, "agent": 1}


@pytest.mark.slow  # a real terminal: tmux
def test_in_an_80_column_terminal_the_tour_s_backtest_is_whole(
    arena: Arena, tmux: Tmux, tmp_path: Path
) -> None:
    """As a person sees it: the tour's ``arena backtest`` in a tmux pane 80 columns wide, then
    the same command's ``--json`` on its log, which replays nothing, for the figures."""
    db = tmp_path / "tour.db"
    program = Path(sys.executable).with_name("arena")
    command = shlex.join([str(program), *TOUR, "--db", str(db)])
    env = {"TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    tmux("new-session", "-d", "-s", "step", "-x", "80", "-y", "50",
         "env", *(f"{k}={v}" for k, v in env.items()),
         "sh", "-c", f"{command}; echo backtest-done; sleep 600")  # fmt: skip
    tmux.wait_for("backtest-done")
    screen = tmux("capture-pane", "-p", "-S", "-", "-t", "step")
    data = arena.json(*TOUR, "--db", db)
    assert list(data["summary"]) == ["strategy", "hold", "favourite"]
    assert_every_figure_whole(screen[: screen.index("Stated beliefs")], data)
