"""``arena step`` in half of 80 columns: the markets panel keeps the question, which says what
a market is. At 80 columns each top panel is 36 cells wide and once showed ids, changes and
sparklines only ("255151  -0.035 ▄▄▄▄▄▄▄▄   0.460 ▆"): every question of the sample begins
"Will a Democrat win", so the panel leaves those words out ("…") and says which in its
heading."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.step.panels import WIDE, leaderboard, market_line
from arena.step.view import MarketRow, common_start
from ledger.leaderboard import AgentStanding
from tests.arena.reports.test_terminal import standing
from tests.conftest import Arena
from tests.tmux_terminal import Tmux

PA = "Will a Democrat win Pennsylvania Presidential Election?"


def row(market: str = "255151", question: str = PA) -> MarketRow:
    return MarketRow(
        market=market, question=question, outcomes=["Yes", "No"], prices=[0.46, 0.54],
        changes=[-0.035, None], sparks=["▄▄▄▄▄▄▄▄", ""], held="",
    )  # fmt: skip


def test_the_words_most_questions_begin_with() -> None:
    questions = [PA, "Will a Democrat win Ohio US Senate Election?", "Will Trump win?"]
    assert common_start(questions) == "Will a Democrat win "
    # one question alone, or none shared by half, leaves nothing out
    assert common_start([PA]) == ""
    assert common_start([PA, "Who wins?", "Is it?"]) == ""
    # a question that is all of the start is not cut to nothing
    assert common_start(["Will it rain?", "Will it rain?"]) == "Will it "


@given(st.lists(st.text("ab ", max_size=12), max_size=8))
def test_the_start_is_whole_words_that_half_the_questions_go_on_after(
    questions: list[str],
) -> None:
    start = common_start(questions)
    if start:
        going_on = [q for q in questions if q.startswith(start) and len(q) > len(start)]
        assert len(going_on) >= max(2, (len(questions) + 1) // 2)
        assert start.endswith(" ")
        assert all(q.split(" ")[: start.count(" ")] == start.split(" ")[:-1] for q in going_on)


def test_a_narrow_panel_gives_the_question_the_room_of_the_history() -> None:
    start = "Will a Democrat win "
    wide = market_line(row(), 6, width=6 + WIDE).plain
    assert wide == f"255151 -0.035 ▄▄▄▄▄▄▄▄   0.460 · {PA}"
    narrow = market_line(row(), 12, width=36, start=start).plain
    assert narrow == "255151  0.460 · …Pennsylvania Presidential Election?"
    assert narrow[:36] == "255151  0.460 · …Pennsylvania Presid"
    heading = market_line(None, 12, width=36, start=start).plain
    assert heading == "market  price · … = Will a Democrat win"
    # a question without the start is shown whole; a long id is cut to 7 cells
    other = market_line(row("election2024-president", "Who wins?"), 12, width=36, start=start)
    assert other.plain == "electi… 0.460 · Who wins?"


@pytest.mark.slow  # a real terminal: tmux
def test_at_80_columns_arena_step_names_the_sample_markets(
    arena: Arena, tmux: Tmux, tmp_path: Path
) -> None:
    db = tmp_path / "sample.db"
    assert arena("replay", "--tape", "sample", "--db", db).exit_code == 0
    program = Path(sys.executable).with_name("arena")
    command = f"{shlex.quote(str(program))} step {shlex.quote(str(db))} --agent favourite"
    env = {"TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    tmux("new-session", "-d", "-s", "step", "-x", "80", "-y", "24",
         "env", *(f"{k}={v}" for k, v in env.items()), "sh", "-c", command)  # fmt: skip
    tmux.wait_for("after favourite's decision")
    screen = tmux.wait_for("… = Will a Democrat")  # the heading (cut), once the panel is drawn
    tmux("send-keys", "-t", "step", "q")
    # the panels' titles whole in 38 cells (it read "favourite's portfolio at this ins…")
    assert "favourite's portfolio now" in screen and "leaderboard (Brier, n resolved)" in screen
    for state in ("Pennsylvania", "Michigan", "Arizona"):
        assert f"…{state}" in screen, screen


def test_the_leaderboard_panel_shows_the_paid_brier_where_it_has_room() -> None:
    """Two agents (−$6.50 is −0.065%, shown −0.07%): in 50 cells, cents, four decimals and the
    paid Brier 0.054; in the 38 of half of 80 columns the paid Brier gives way, then the cents;
    in 36 the long name is cut. The return column has room for −99.99% throughout."""
    rows = [standing("extremized", 10_993.5, 0.253, -3.71), standing("sign", 9_993.5, 0.237, None)]
    view = SimpleNamespace(standings=rows, agent="sign")
    heading, lines = leaderboard(view, 50)  # type: ignore[arg-type]
    assert heading.plain.split() == ["agent", "total", "return", "impl.", "(n)", "paid"]
    assert [line.plain for line in lines] == [
        "  extremized $10,993.50  +9.94% 0.2530 (43) 0.0540",
        "▶ sign        $9,993.50  -0.07% 0.2370 (43) 0.0540",
    ]
    heading, lines = leaderboard(view, 38)  # type: ignore[arg-type]
    assert heading.plain.split() == ["agent", "total", "return", "impl.", "(n)"]
    assert [line.plain for line in lines] == [
        " extremized $10,994  +9.94% 0.253 (43)",
        "▶sign        $9,994  -0.07% 0.237 (43)",
    ]
    heading, lines = leaderboard(view, 36)  # type: ignore[arg-type]
    assert [line.plain for line in lines] == [
        " extremi… $10,994  +9.94% 0.253 (43)",
        "▶sign      $9,994  -0.07% 0.237 (43)",
    ]


def test_one_agent_at_its_starting_cash_gets_no_column_it_cannot_fill() -> None:
    """Live, one agent: at $10,000.00 the paid column's heading was cut to "pai" with nothing
    under it (the panel was a cell short), and at $9,998.33 it fitted; now both lay out alike."""
    for total in (10_000.0, 9_998.33):
        one = standing("fav", total, 0.25, None)
        view = SimpleNamespace(standings=[one], agent="fav")
        heading, [line] = leaderboard(view, 38)  # type: ignore[arg-type]
        assert heading.plain == "agent      total  return   impl. (n)"
        assert line.plain.split() == ["▶", "fav", f"${total:,.2f}", f"{(total - 1e4) / 100:+.2f}%",
                                      "0.2500", "(43)"]  # fmt: skip


agents = st.lists(
    st.tuples(
        st.text("abcdefghijkl-", min_size=1, max_size=12),
        st.floats(1.0, 999_999.0),
        st.none() | st.floats(0.0, 1.0),
        st.integers(0, 99),
        st.none() | st.floats(0.0, 1.0),
    ),
    min_size=1, max_size=7, unique_by=lambda a: a[0],
)  # fmt: skip


@given(agents, st.integers(36, 120))
def test_the_leaderboard_never_cuts_a_heading_or_a_figure(
    drawn: list[tuple[str, float, float | None, int, float | None]], width: int
) -> None:
    """At any total up to a million dollars, in any panel from 36 cells (half of 80 columns,
    less a scrollbar) up: every heading and figure whole, no line past the panel; and while
    each total stays within a doubling of its $10,000, the columns are the ones it had at the
    start (the layout does not jump as the totals move)."""
    view = SimpleNamespace(standings=[ranked(*a) for a in drawn], agent=drawn[0][0])
    heading, lines = leaderboard(view, width)  # type: ignore[arg-type]
    names = heading.plain.split()
    assert names in (["agent", "total", "return", "impl.", "(n)", "paid"][:n] for n in (5, 6))
    assert all(line.cell_len <= width for line in (heading, *lines))
    for s, line in zip(view.standings, lines, strict=True):
        words = line.plain.replace("▶", " ").split()
        precise = "." in words[1]  # cents, and four decimals
        assert words[1] == (f"${s.total_value:,.2f}" if precise else f"${s.total_value:,.0f}")
        assert words[2] == f"{s.return_pct:+.2f}%"
        digits = 4 if precise else 3
        brier = "—" if s.brier is None else f"{s.brier:.{digits}f}"
        paid = "—" if s.brier_paid is None else f"{s.brier_paid:.{digits}f}"
        assert words[3:] == [brier, f"({s.n_resolved})", *([paid] if "paid" in names else [])]
    if all(1.0 <= s.total_value < 19_999.0 for s in view.standings):
        at_start = [ranked(name, 10_000.0, None, 0, None) for name, *_ in drawn]
        start = SimpleNamespace(standings=at_start, agent=drawn[0][0])
        assert leaderboard(start, width)[0].plain == heading.plain  # type: ignore[arg-type]


def ranked(
    agent: str, total: float, brier: float | None, n: int, paid: float | None
) -> AgentStanding:
    """An agent that started with $10,000, at ``total``."""
    return msgspec.structs.replace(
        standing(agent, total, 0.0, None), brier=brier, brier_paid=paid, n_resolved=n
    )


@pytest.mark.slow  # a real terminal: tmux
def test_in_tmux_live_with_one_agent_the_leaderboard_keeps_its_columns_whole(
    tmux: Tmux, tmp_path: Path
) -> None:
    """``arena step --db live.db --agent fav=favourite`` at 80×24: before its first decision
    (fav at $10,000.00) and after it, the leaderboard's heading is whole and the same."""
    program = Path(sys.executable).with_name("arena")
    command = (f"{shlex.quote(str(program))} step --db {shlex.quote(str(tmp_path / 'live.db'))}"
               " --agent fav=favourite")  # fmt: skip
    env = {"TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    tmux("new-session", "-d", "-s", "step", "-x", "80", "-y", "24",
         "env", *(f"{k}={v}" for k, v in env.items()), "sh", "-c", command)  # fmt: skip
    before = tmux.wait_for("fav has not decided yet")
    tmux("send-keys", "-t", "step", "n")
    after = tmux.wait_for("after fav's decision")
    tmux("send-keys", "-t", "step", "q")
    for screen in (before, after):
        board = [line.split("│")[-2] for line in screen.splitlines() if line.count("│") == 4]
        heading = next(row for row in board if row.startswith("agent"))
        assert heading.split() == ["agent", "total", "return", "impl.", "(n)"], screen
        [fav] = [row.split() for row in board if row.startswith("▶ fav")]
        assert fav[2].startswith("$") and fav[3].endswith("%") and fav[-1].startswith("("), fav
    assert "$10,000.00" in before
    # the first screen says why it lists no market yet, not "markets 0/0" (an empty universe)
    assert "markets 0/0" not in before and "markets:" in before, before
