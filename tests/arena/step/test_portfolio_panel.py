"""``arena step``'s portfolio shows both Briers the report shows, under the report's labels: the
implied-confidence one alone ranks a loser of small bets first (docs/reports.md)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from arena.step.frames import Portfolio
from arena.step.panels import portfolio
from tests.conftest import Arena
from tests.tmux_terminal import Tmux

# one resolved buy: $1,000 of $10,000 is confidence 0.4 on a winner, (0.4 - 1)^2 = 0.36; its
# price paid, 0.5, scores (0.5 - 1)^2 = 0.25
WON = Portfolio(10_750.0, 0.0, 10_750.0, 0.36, 0.25, 1, ())


def test_the_panel_shows_the_implied_and_the_paid_brier_in_its_34_cells() -> None:
    count, line = portfolio(SimpleNamespace(portfolio=WON))  # type: ignore[arg-type]
    assert [line(k).plain for k in range(count)] == [
        "cash                    $10,750.00",
        "positions (marked)           $0.00",
        "total                   $10,750.00",
        "Brier (impl.)           0.3600 (1)",
        "Brier (paid)                0.2500",
    ]


def test_before_any_bet_resolved_both_are_a_dash() -> None:
    nothing = Portfolio(10_000.0, 0.0, 10_000.0, None, None, 0, ())
    _, line = portfolio(SimpleNamespace(portfolio=nothing))  # type: ignore[arg-type]
    assert [line(k).plain.split() for k in (3, 4)] == [
        ["Brier", "(impl.)", "—", "(0)"],
        ["Brier", "(paid)", "—"],
    ]


@pytest.mark.slow  # a real terminal: tmux
def test_at_80_columns_both_briers_fit_the_panel(arena: Arena, tmux: Tmux, tmp_path: Path) -> None:
    """favourite at the end of the sample: 32 resolved bets, its implied Brier 0.3847 and the
    Brier of the prices it paid (near 1 on winners) 0.0001, each whole inside the panel."""
    db = tmp_path / "sample.db"
    assert arena("replay", "--tape", "sample", "--db", db).exit_code == 0
    program = shlex.quote(str(Path(sys.executable).with_name("arena")))
    command = f"TERM=xterm-256color {program} step {shlex.quote(str(db))} --agent favourite"
    tmux("new-session", "-d", "-s", "step", "-x", "80", "-y", "24", "sh", "-c", command)
    tmux.wait_for("favourite's decision")
    tmux("send-keys", "-t", "step", "e")  # to the end of the log
    screen = tmux.wait_for("0.3847 (32)")
    tmux("send-keys", "-t", "step", "q")
    rows = [line for line in screen.splitlines() if line.startswith("│Brier")]
    assert [row[:40].split() for row in rows] == [
        ["│Brier", "(impl.)", "0.3847", "(32)", "│"],
        ["│Brier", "(paid)", "0.0001", "│"],
    ]


CONDITION = "0x5f65177b394277fd294cd75650044e32ba009a95022d88a0c1d565897d72f8f1"


def test_a_position_line_fits_the_panel_at_80_columns() -> None:
    """At 80 columns the panel has 37 cells: the sample's "335 YES 255148: $221.32 (cost
    $269.59)" is 38 and lost its ")" , so it is shown in whole dollars; a condition id of 66
    characters is cut at its end to fit; a wider panel keeps the cents."""
    held = Portfolio(9_000.0, 1_455.88, 10_455.88, None, None, 0, (
        ("255148", "YES", 335.0, 269.59, 221.32),
        ("255060", "NO", 12.0, 5.0, 6.5),
        (CONDITION, "NO", 1_200.0, 1_000.0, 1_234.56),
    ))  # fmt: skip
    count, line = portfolio(SimpleNamespace(portfolio=held))  # type: ignore[arg-type]
    positions = [line(k).plain for k in range(5, count)]
    assert positions == [
        "335 YES 255148: $221 (cost $270)",
        "12 NO 255060: $6.50 (cost $5.00)",
        "1,200 NO 0x5f6…: $1,235 (cost $1,000)",
    ]
    assert max(len(p) for p in positions) <= 37
    _, wide = portfolio(SimpleNamespace(portfolio=held), 110)  # type: ignore[arg-type]
    assert wide(5).plain == "335 YES 255148: $221.32 (cost $269.59)"
    assert wide(7).plain == f"1,200 NO {CONDITION}: $1,234.56 (cost $1,000.00)"
