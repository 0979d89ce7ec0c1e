"""Every figure says what it is (issue #28): the leaderboard's heading counts the log's cohorts
and says when its agents ran in different ones, an implied-confidence Brier that the results
deny is marked, the bootstrap over markets names the t interval over cohorts where it is far
wider, and "Brier (impl.)" says which it is ("pooled" here, "mean of cohorts" in a sweep) in
every heading, at 80 columns too.

The numbers are the sample's (``arena replay``, one cohort, the built-in agents) and the tour's
(26 weekly cohorts), as ``arena report`` printed them."""

from __future__ import annotations

import io
from typing import Any

import msgspec
import pytest
from msgspec.structs import replace
from rich.console import Console, RenderableType

from arena.backtests.sweep import settings_table
from arena.reports.model import (
    MARK_LEGEND,
    board_heading,
    interval_hint,
    misleading_briers,
    returns_by_agent,
)
from arena.reports.terminal import categories_table, leaderboard_table, standings_table
from ledger.leaderboard import AgentStanding, CategoryRow, LeaderboardRow


def printed(renderable: RenderableType, width: int = 80) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    return out.getvalue()


def joined(text: str) -> str:
    """The text with its wrapping undone: captions wrap at the table's width."""
    return " ".join(text.split())


# -- the heading counts the log's cohorts ----------------------------------------------------


def test_the_heading_counts_the_logs_cohorts_not_one_agents() -> None:
    """The default run and then ``--agent fav=favourite --agent coin=random`` in one log: two
    cohorts of one agent each. The title said "across 1 cohort(s)" over ``fav`` and
    ``favourite`` ranked side by side."""
    title, mixed = board_heading([1] * 9, 2)
    assert title == "Leaderboard across 2 cohort(s), by mean return (each agent in 1 of them)"
    assert mixed is not None and mixed.startswith("agents ran in different cohorts")
    # the tour's 26 cohorts plus a one-agent run: 27, agents in 26 or 27 of them
    assert board_heading([27, 26, 26, 26], 27)[0] == (
        "Leaderboard across 27 cohort(s), by mean return (agents in 26 to 27 of them)"
    )
    # every agent in every cohort: the count alone, and no warning
    assert board_heading([26, 26, 26, 26], 26) == (
        "Leaderboard across 26 cohort(s), by mean return",
        None,
    )


# -- the mark on an implied Brier the results deny -------------------------------------------

SAMPLE = {  # agent: (Brier (impl.), return %, win rate), the sample's standings
    "extremized": (0.253, 9.94, 0.92),
    "linear": (0.842, 6.78, 0.93),
    "favourite": (0.385, 0.92, 1.0),
    "hold": (None, 0.0, None),
    "sign": (0.237, -0.06, 0.86),
    "random": (0.404, -12.73, 0.45),
    "contrarian": (0.000, -16.50, 0.0),
}


def test_the_mark_falls_on_a_good_implied_brier_beside_the_worst_return() -> None:
    """The median of the six Briers is (0.253 + 0.385) / 2 = 0.319. ``contrarian`` (0.000) is
    below it with the worst return and no bet won: marked. ``sign`` (0.237) and ``extremized``
    (0.253) are below it too, but neither is the worst nor won nothing: not marked."""
    flags = dict(zip(SAMPLE, misleading_briers(list(SAMPLE.values())), strict=True))
    assert [agent for agent, flag in flags.items() if flag] == ["contrarian"]


def test_either_half_of_the_rule_marks_alone() -> None:
    # no bet won, though another lost more: marked
    assert misleading_briers([(0.1, -2.0, 0.0), (0.5, -5.0, 0.5), (0.3, 1.0, 0.9)]) == [
        True, False, False,
    ]  # fmt: skip
    # the worst return with a Brier above the median (the tour's coin, 0.482 and −17.23%), or
    # at it: not marked
    tour = [(0.425, 1.78, 1.0), (None, 0.0, None), (0.225, -1.66, 0.87), (0.482, -17.23, 0.57)]
    assert misleading_briers(tour) == [False] * 4
    assert misleading_briers([(0.3, -1.0, 0.5)]) == [False]  # alone, it is its own median
    assert misleading_briers([(None, 0.0, None)] * 2) == [False, False]


def sample_standing(agent: str) -> AgentStanding:
    brier, ret, win = SAMPLE[agent]
    pnl = ret * 100.0
    return AgentStanding(
        cohort="c", agent=agent, cash=10_000.0 + pnl, positions_value=0.0,
        total_value=10_000.0 + pnl, pnl=pnl, return_pct=ret, realized_pnl=pnl,
        unrealized_pnl=0.0, brier=brier, brier_paid=None if brier is None else 0.05,
        bss=None if brier is None else 1 - brier / 0.25, bss_market=None, n_resolved=33,
        win_rate=win, n_bets=33, n_sells=0, n_rejected=0, n_decisions=10, n_errors=0,
        initial_cash=10_000.0,
    )  # fmt: skip


def test_the_first_screen_marks_the_contrarian_and_says_why_in_80_columns() -> None:
    """The standings ``arena replay`` opens with: ``contrarian`` lost 33 of 33 bets and showed
    Brier (impl.) 0.000 and BSS +1.00 with only a footnote to explain."""
    text = printed(standings_table("t", [sample_standing(a) for a in SAMPLE]))
    assert max(map(len, text.splitlines())) <= 80 and "…" not in text
    contrarian = next(line for line in text.splitlines() if line.startswith(" contrarian"))
    assert contrarian.split()[3:6] == ["-16.50%", "0.000†", "0.050"]
    # the others' Briers keep their decimals under the marked one
    sign = next(line for line in text.splitlines() if line.startswith(" sign"))
    assert sign.index("0.237") == contrarian.index("0.000†")
    assert MARK_LEGEND in joined(text)
    # favourite's 0.385, under the median of 0.385 and 0.404, won every bet and did not do
    # worst: nothing marked, and no legend line
    plain = printed(standings_table("t", [sample_standing(a) for a in ("favourite", "random")]))
    assert "†" not in plain


# -- the t interval over cohorts beside a far wider bootstrap ---------------------------------


def test_a_bootstrap_far_wider_than_t_over_cohorts_names_the_t_interval() -> None:
    """Returns 1, 2, 3 over three cohorts: mean 2, s = 1, t(2) = 4.303, so t gives 2 ± 4.303 /
    √3 = −0.48..+4.48 (4.97 wide). A bootstrap of −20..+24 (44 wide) is 8.9 times that: named.
    One of −5..+9 (14 wide, under 3 × 4.97 = 14.9): not."""
    returns = returns_by_agent([("edge", 1.0), ("fav", 1.0), ("edge", 2.0), ("edge", 3.0)])
    assert returns == {"edge": [1.0, 2.0, 3.0], "fav": [1.0]}
    assert interval_hint([("edge", -20.0, 24.0), ("fav", -9.0, 9.0)], returns) == (
        "by Student's t over cohorts (--interval cohorts): edge -0.48..+4.48, 9× narrower: the "
        "cohorts share their markets' outcomes, which t cannot vary, and a few markets carry "
        "the result"
    )
    assert interval_hint([("edge", -5.0, 9.0)], returns) is None
    assert interval_hint([("edge", None, None)], returns) is None  # one cohort: no interval
    # every cohort alike: t has no width at all
    assert "idle +0.00..+0.00, every cohort alike" in str(
        interval_hint([("idle", -1.0, 1.0)], {"idle": [0.0, 0.0]})
    )


def board_row(agent: str, mean: float, low: float, high: float, brier: float) -> LeaderboardRow:
    return LeaderboardRow(
        agent=agent, cohorts=26, total_pnl=mean * 2600, pnl_pct=mean, brier=brier,
        brier_paid=0.05, win_rate=0.87, n_resolved=700, n_bets=798, bss=1 - brier / 0.25,
        bss_market=-3.37, return_mean=mean, return_ci_low=low, return_ci_high=high,
        brier_mean=brier, brier_ci_low=None, brier_ci_high=None, interval="markets",
    )  # fmt: skip


TOUR_INFO = {
    "text": "95% interval: bootstrap over the 101 markets the cohorts share",
    "method": "markets",
    "cohorts": 26,
}


def test_the_tour_board_at_80_columns_says_which_interval_and_which_brier() -> None:
    """The tour's ``edge``: −1.66%, −22.49..+19.16 by the bootstrap over markets, though every
    one of its 26 cohorts' returns lay within −4.87..+5.50; by t over them −2.66..−0.66, 21
    times narrower (the returns here are made to give that interval: 13 either side of the
    mean −1.66, s = √26 / t(25) = 2.476)."""
    rows = [
        board_row("fav", 1.78, 1.27, 2.28, 0.425),
        board_row("edge", -1.66, -22.49, 19.16, 0.225),
        replace(board_row("coin", -17.23, -26.13, -8.34, 0.482), win_rate=0.57),
    ]
    spread = (26**0.5 / 2.059539) * (25 / 26) ** 0.5
    edge = [-1.66 - spread] * 13 + [-1.66 + spread] * 13
    text = printed(leaderboard_table(rows, TOUR_INFO, 80, {"edge": edge}))
    assert max(map(len, text.splitlines())) <= 80 and "…" not in text
    _, _, brier, interval, names = text.splitlines()[:5]
    assert brier.split() == ["Brier"]
    assert interval.split()[:5] == ["mean", "95%", "CI", "(impl.,", "Brier"]
    assert names.split()[5:9] == ["return", "(markets)", "pooled)", "(paid)"]
    said = joined(text)
    assert said.startswith("Leaderboard across 26 cohort(s), by mean return Brier")
    assert (
        "by Student's t over cohorts (--interval cohorts): edge -2.66..-0.66, 21× narrower: "
        "the cohorts share their markets' outcomes"
    ) in said
    assert "†" not in said  # coin is the worst, but its Brier is the worst too
    # without the hint's returns, or where t is not far narrower, no such line
    assert "Student's t" not in joined(printed(leaderboard_table(rows, TOUR_INFO, 80)))


@pytest.mark.parametrize("width", [80, 200])
def test_every_brier_heading_of_the_report_says_pooled(width: int) -> None:
    category = CategoryRow(
        agent="coin", category="Politics", labels=("Elections",), markets=19, n_bets=22,
        n_resolved=22, pnl=-771.8, return_pp=-7.72, brier=0.492,
    )  # fmt: skip
    tables = [
        categories_table("c", [category]),
        standings_table("s", [sample_standing("random")]),
        leaderboard_table([board_row("fav", 1.78, 1.27, 2.28, 0.425)], TOUR_INFO, width),
    ]
    for table in tables:
        text = printed(table, width)
        heading = [line.split() for line in text.splitlines()[2:5]]
        assert any("(impl.," in line for line in heading) and any(
            "pooled)" in line for line in heading
        ), text
        assert "(impl.)" not in " ".join(" ".join(line) for line in heading)


def sweep_row(agent: str, values: dict[str, object], brier: float | None) -> dict[str, Any]:
    paired = {"mean": 2.26, "ci_low": -2.51, "ci_high": 7.03, "significant": False}
    return {
        "agent": agent, "values": values, "return_mean": 2.26, "return_ci_low": -2.51,
        "return_ci_high": 7.03, "brier": brier, "brier_mean": brier, "brier_ci_low": 0.456,
        "brier_ci_high": 0.956, "win_rate": 0.769, "n_bets": 39,
        "paired": {"hold": paired, "favourite": paired},
    }  # fmt: skip


def test_the_sweeps_brier_says_mean_of_cohorts_at_80_columns() -> None:
    """The same favourite over the tour's 26 cohorts is 0.425 in ``arena report`` (pooled) and
    0.457 in ``arena sweep`` (the mean of the cohorts' Briers): the sweep's heading says which,
    at 80 columns with two comparison agents (the paired differences in a table of their own)
    as wide as before."""
    data = {
        "plan": {"against": ["hold", "favourite"], "starts": ["2024-09-01"] * 3},
        "interval": {"text": "95% interval: bootstrap over the 10 markets the cohorts share"},
        "settings": [
            sweep_row("sign-B_100-min_edge_0.02", {"B": 100, "min_edge": 0.02}, 0.706),
            sweep_row("sign-B_500-min_edge_0.02", {"B": 500, "min_edge": 0.02}, 0.426),
        ],
        "comparison": [sweep_row("hold", {}, None), sweep_row("favourite", {}, 0.516)],
        "selection": {"best": "sign-B_500-min_edge_0.02"},
    }
    text = printed(settings_table(data, 80))
    assert max(map(len, text.splitlines())) <= 80 and "…" not in text
    heading = [line.split("┃")[3].strip() for line in text.splitlines()[2:5]]
    assert heading == ["Brier (impl.,", "mean of", "cohorts)"]
    assert "0.706 ±0.250" in text
    assert "Brier (impl., mean of cohorts): the mean over cohorts" in joined(text)


def test_counts_in_the_standings_have_their_thousands_separated() -> None:
    """1,131 bets, as the leaderboard and the HTML page write them (the standings said 1131)."""
    many = msgspec.structs.replace(
        sample_standing("favourite"), n_bets=1131, n_resolved=1100, n_rejected=1200
    )
    row = next(line for line in printed(standings_table("t", [many])).splitlines() if "fav" in line)
    assert "1,131" in row and "1,100" in row and "1,200" in row, row
