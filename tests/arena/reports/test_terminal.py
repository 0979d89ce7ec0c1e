"""``arena report``'s terminal tables and lines, as a person reads them: in the order things
happened, and the sample's standings within 80 columns."""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace
from rich.console import Console

from arena.reports.model import cohort_status, common_failure, failure_reason, usage_dict
from arena.reports.terminal import (
    leaderboard_table,
    short_names,
    standings_table,
    usage_table,
)
from arena.run.cohort import start_text
from ledger.events import CohortClosed, CohortOpened, DecisionsStopped, ModelCall, ModelCalled
from ledger.leaderboard import AgentStanding, LeaderboardRow
from ledger.projection import CohortState, Ledger
from ledger.usage import ModelUsage
from tests.conftest import Arena

RUNNER_REASON = (
    "every market settled; no decision after 2024-11-12 15:01 UTC, where the tape's "
    "recording ends with 2 market(s) still open"
)


def cohort(*events: object) -> CohortState:
    ledger = Ledger()
    opened = CohortOpened(
        cohort="c", ts=0, start=0, rules="v1", cash=10_000.0, agents=["a", "b"],
        decision_cadence="weekly", mark_cadence="daily",
    )  # fmt: skip
    for event in (opened, *events):
        ledger.apply(event)  # type: ignore[arg-type]
    return ledger.cohorts["c"]


def test_an_early_stop_is_told_before_the_settlements() -> None:
    stopped = DecisionsStopped(cohort="c", ts=5, reason="the recording ends", markets=["m"])
    state = cohort(stopped, CohortClosed(cohort="c", ts=9, reason=RUNNER_REASON))
    assert cohort_status(state) == (
        "no decision after 2024-11-12 15:01 UTC, where the tape's recording ends with 2 "
        "market(s) still open; after that, every market settled"
    )


def test_a_plain_close_and_an_open_cohort_say_what_they_are() -> None:
    plain = cohort(CohortClosed(cohort="c", ts=9, reason="every market settled"))
    assert cohort_status(plain) == "every market settled"
    stopped = DecisionsStopped(cohort="c", ts=5, reason="the recording ends", markets=["m"])
    assert cohort_status(cohort(stopped)) == "still open; no more decisions: the recording ends"
    assert cohort_status(cohort()) == "still open"


def standing(agent: str, total: float, brier: float, market: float | None) -> AgentStanding:
    pnl = total - 10_000.0
    return AgentStanding(
        cohort="c", agent=agent, cash=total, positions_value=0.0, total_value=total, pnl=pnl,
        return_pct=pnl / 100.0, realized_pnl=pnl, unrealized_pnl=0.0, brier=brier,
        brier_paid=0.054, bss=1 - brier / 0.25, bss_market=market, n_resolved=43,
        win_rate=0.93, n_bets=143, n_sells=0, n_rejected=0, n_decisions=10, n_errors=0,
        initial_cash=10_000.0,
    )  # fmt: skip


def test_standings_of_the_sample_fit_80_columns() -> None:
    """The sample's widest cells (a ten-letter name, −1,650.00, −16.50%, −10.98), all shown
    in 80 columns with no cell cut; cash, equal to the total when nothing is open, left out."""
    rows = [
        standing("extremized", 10_993.5, 0.253, -3.71),
        standing("contrarian", 8_350.0, 0.842, -10.98),
        standing("random", 8_726.56, 0.404, None),
    ]
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(standings_table("t", rows))
    text = out.getvalue()
    assert "…" not in text, text
    assert max(map(len, text.splitlines())) <= 80
    lines = text.splitlines()
    assert "cash" not in lines[1] + lines[2]
    assert " contrarian  8,350 -1,650.00 -16.50%   0.842  0.054 -2.37 -10.98   43 93%  143" in text


def called(error: str | None) -> ModelCalled:
    call = ModelCall(model="m", question="decision", request="r", error=error)
    return ModelCalled(cohort="c", ts=0, agent="llm", week=1, n=1, call=call)


def test_the_most_common_failure_is_named_with_its_count() -> None:
    """Three context-length 400s with different details count as one reason; two timeouts as
    another; a success counts for neither: "HTTP 400 … (3 of 5 failed)"."""
    usage = ModelUsage()
    for error in (
        "HTTP 400: the prompt is longer than the model's context (8780 > 8192): show fewer",
        "HTTP 400: the prompt is longer than the model's context (8790 > 8192): show fewer",
        "HTTP 400: the prompt is longer than the model's context (9001 > 8192): show fewer",
        "aborted: the decision passed its 3 s limit | after: HTTP 503",
        "aborted: the decision passed its 3 s limit | after: nothing",
        None,
    ):
        usage.add(called(error))
    reason = "HTTP 400: the prompt is longer than the model's context"
    assert failure_reason("aborted: the decision passed its 3 s limit | after: x") == (
        "aborted: the decision passed its 3 s limit"
    )
    assert common_failure(usage) == f"{reason} (3 of 5 failed)"
    assert usage_dict(usage)["common_failure"] == f"{reason} (3 of 5 failed)"
    assert common_failure(ModelUsage()) is None
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(usage_table("calls", {"llm": usage}))
    # the caption wraps at the table's width
    assert f"llm failed most with: {reason} (3 of 5 failed)" in " ".join(out.getvalue().split())


def test_a_tie_names_the_same_reason_every_time() -> None:
    one, other = ModelUsage(), ModelUsage()
    for usage, errors in ((one, ("b", "a")), (other, ("a", "b"))):
        for error in errors:
            usage.add(called(error))
    assert common_failure(one) == common_failure(other) == "a (1 of 2 failed)"


SWEEP = ["sign-B_500-min_edge_0.02", "sign-B_500-min_edge_0", "sign-B_100-min_edge_0.02",
         "sign-B_100-min_edge_0", "favourite"]  # fmt: skip


def test_sweep_settings_stay_told_apart_when_cut() -> None:
    """Cut at the end, all four settings read "sign-B_500-min…" or "sign-B_100-min…"; split 8
    + "…" + 7 they differ in B and in min_edge."""
    assert short_names(SWEEP, 16) == {
        "sign-B_500-min_edge_0.02": "sign-B_5…ge_0.02",
        "sign-B_500-min_edge_0": "sign-B_5…_edge_0",
        "sign-B_100-min_edge_0.02": "sign-B_1…ge_0.02",
        "sign-B_100-min_edge_0": "sign-B_1…_edge_0",
        "favourite": "favourite",
    }


@given(st.lists(st.text("ab_-.", min_size=1, max_size=30), unique=True, max_size=8))
def test_cut_names_fit_and_stay_distinct(names: list[str]) -> None:
    cut = short_names(names, 10)
    if len(set(cut.values())) == len(names) and all(len(c) <= 10 for c in cut.values()):
        return  # the usual case: every name fits and all differ
    assert cut == {n: n for n in names}  # no split tells them apart: left whole


def board_row(agent: str, mean: float) -> LeaderboardRow:
    return LeaderboardRow(
        agent=agent, cohorts=3, total_pnl=mean * 300, pnl_pct=mean, brier=0.426,
        brier_paid=0.177, win_rate=0.769, n_resolved=39, n_bets=39, bss=-0.70, bss_market=-1.41,
        return_mean=mean, return_ci_low=mean - 23.83, return_ci_high=mean + 23.82,
        brier_mean=0.426, brier_ci_low=None, brier_ci_high=None, interval="markets",
    )  # fmt: skip


def test_a_sweeps_leaderboard_fits_80_columns_leaving_out_what_it_must() -> None:
    rows = [board_row(name, 11.29 - k) for k, name in enumerate(SWEEP)]
    info = {"text": "95% interval: bootstrap", "cohorts": 3}
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(leaderboard_table(rows, info, 80))
    text = out.getvalue()
    assert max(map(len, text.splitlines())) <= 80
    line = next(s for s in text.splitlines() if "sign-B_5…ge_0.02" in s)
    assert line.split() == [
        "sign-B_5…ge_0.02", "39", "+3,387.00", "+11.29%", "-12.54..+35.11", "0.426", "0.177",
        "-1.41",
    ]  # fmt: skip
    assert "left out to fit: BSS, win, cohorts (see --json)" in " ".join(text.split())
    # wide enough, nothing is left out
    wide = io.StringIO()
    Console(file=wide, width=200, color_system=None).print(leaderboard_table(rows, info, 200))
    assert "left out" not in wide.getvalue() and "77%" in wide.getvalue()


def test_agents_of_different_cohorts_keep_their_count_at_80_columns() -> None:
    """Two replays into one log (the tour's first and second): agents of one cohort ranked
    beside agents of 26. The title said "across 26 cohort(s)" and the cohorts column was left
    out at 80 columns, so a mean over one cohort read like a mean over 26. The title counts
    the log's 27 cohorts, and says how many each agent ran in."""
    one = replace(board_row("extremized", 9.94), cohorts=1, n_bets=26)
    many = replace(board_row("coin", -17.23), cohorts=26, n_bets=1131)
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(
        leaderboard_table([one, many], {"text": "95% interval: bootstrap", "cohorts": 27}, 80)
    )
    text = out.getvalue()
    assert max(map(len, text.splitlines())) <= 80
    assert "Leaderboard across 27 cohort(s), by mean return (agents in 1 to 26 of them)" in text
    assert "across 26" not in text
    assert next(s for s in text.splitlines() if s.startswith(" extremized")).split()[1] == "1"
    assert next(s for s in text.splitlines() if s.startswith(" coin")).split()[1:3] == [
        "26", "1,131",
    ]  # fmt: skip
    [dropped] = [s for s in text.splitlines() if s.startswith("left out to fit:")]
    assert "cohorts" not in dropped


def test_a_start_off_midnight_is_headed_with_its_time() -> None:
    midnight = 1_790_553_600  # 2026-09-28T00:00:00Z
    assert start_text(midnight) == "2026-09-28"
    assert start_text(midnight + 8 * 3600 + 50 * 60) == "2026-09-28 08:50 UTC"
    assert start_text(midnight + 8 * 3600 + 50 * 60 + 7) == "2026-09-28 08:50:07 UTC"


def test_the_replays_header_names_the_start_it_was_given(arena: Arena, tmp_path: Path) -> None:
    run = arena("replay", "--tape", "sample-books", "--start", "2026-09-28T08:50",
                "--db", tmp_path / "s.db")  # fmt: skip
    assert run.exit_code == 0, run.output
    assert "— start 2026-09-28 08:50 UTC, 1 market chosen" in run.output
