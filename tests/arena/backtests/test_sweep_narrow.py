"""``arena sweep``'s table at 80 columns, the width a newcomer's terminal opens at: every figure
of every row whole.

In one table of seven columns Rich squeezed them all ("+3.10 ±28…", "0.580 ±0.…", a bets
column of "…") and cut the settings to "B=10…e…"; now the paired differences go in a table
of their own under the figures where one table does not fit. The sweep is the docs' grid on
the embedded sample, ``--universe 10`` and three Sundays.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from arena.backtests.sweep import settings_table
from tests.conftest import Arena
from tests.tmux_terminal import Tmux

SWEEP = ("sweep", "sign", "--grid", "B=100,500;min_edge=0,0.02", "--universe", "10",
         "--starts", "2024-09-01..2024-09-15", "--against", "hold,favourite")  # fmt: skip


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("narrow") / "sweep.db"


@pytest.fixture(scope="module")
def data(arena: Arena, db: Path) -> dict[str, Any]:
    return arena.json(*SWEEP, "--jobs", "1", "--db", db)  # type: ignore[no-any-return]


def cells_by_row(screen: str) -> dict[str, list[str]]:
    """Each table row's cells after its first, gathered under that first cell (a setting, its ★
    dropped, or a comparison agent) over every table it appears in."""
    rows: dict[str, list[str]] = {}
    for line in screen.splitlines():
        if line.startswith("│"):
            label, *cells = (cell.strip() for cell in line.strip().strip("│").split("│"))
            rows.setdefault(label.removesuffix(" ★"), []).extend(cells)
    return rows


def assert_every_figure_whole(screen: str, data: dict[str, Any], width: int = 80) -> None:
    """Every setting's return, Brier (each as mean ± half its 95% interval), win rate, bets and
    paired difference to each comparison agent, each a cell of the setting's rows as written
    here from the JSON; the settings named whole; nothing wider than ``width``."""
    assert max(map(len, screen.splitlines())) <= width, screen
    rows = cells_by_row(screen)
    assert len(data["settings"]) == 4
    for row in data["settings"]:
        label = " ".join(f"{k}={v}" for k, v in row["values"].items())
        assert label in rows, f"{label!r} not whole in\n{screen}"
        half_return = (row["return_ci_high"] - row["return_ci_low"]) / 2
        half_brier = (row["brier_ci_high"] - row["brier_ci_low"]) / 2
        expected = [
            f"{row['return_mean']:+.2f} ±{half_return:.2f}",
            f"{row['brier_mean']:.3f} ±{half_brier:.3f}",
            f"{row['win_rate']:.1%}",
            str(row["n_bets"]),
        ]
        for name, pair in row["paired"].items():
            half, mark = (pair["ci_high"] - pair["ci_low"]) / 2, "✓" if pair["significant"] else "·"
            expected.append(f"{pair['mean']:+.2f} ±{half:.2f} {mark}")
            assert f"− {name}" in screen
        assert len(expected) == 6
        for figure in expected:
            assert figure in rows[label], f"{label}: {figure!r} not whole in {rows[label]}"
    assert "…" not in screen, screen


def test_at_80_columns_every_figure_of_every_setting_is_whole(data: dict[str, Any]) -> None:
    console = Console(width=80, record=True, color_system=None)
    console.print(settings_table(data, 80))
    assert_every_figure_whole(console.export_text(), data)


def test_wide_enough_the_sweep_stays_one_table(data: dict[str, Any]) -> None:
    """In 120 columns the figures and the paired differences share one table, as before."""
    console = Console(width=120, record=True, color_system=None)
    console.print(settings_table(data, 120))
    screen = console.export_text()
    assert screen.count("┏") == 1
    assert_every_figure_whole(screen, data, 120)


@pytest.mark.slow  # a real terminal: tmux
def test_in_an_80_column_terminal_the_sweep_shows_every_figure_whole(
    arena: Arena, tmux: Tmux, tmp_path: Path
) -> None:
    """As a person sees it: ``arena sweep`` in a terminal 80 columns wide (the progress bar on
    stderr, the table on stdout), then the same command's ``--json`` on the same log, which
    runs nothing again, for the figures."""
    db = tmp_path / "sweep.db"
    program = Path(sys.executable).with_name("arena")
    command = shlex.join([str(program), *SWEEP, "--jobs", "1", "--db", str(db)])
    env = {"TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    tmux("new-session", "-d", "-s", "step", "-x", "80", "-y", "60",
         "env", *(f"{k}={v}" for k, v in env.items()),
         "sh", "-c", f"{command}; echo sweep-done; sleep 600")  # fmt: skip
    tmux.wait_for("sweep-done")
    screen = tmux("capture-pane", "-p", "-S", "-", "-t", "step")
    assert "digest" in screen, screen
    data = arena.json(*SWEEP, "--db", db)
    assert data["reused"] == data["cohort_runs"] == 15
    table = screen[: screen.index("best mean return")]
    assert_every_figure_whole(table, data)
