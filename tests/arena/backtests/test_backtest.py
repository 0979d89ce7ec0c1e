"""``arena backtest``: the JSON's shape and numbers, reproducibility, the HTML report, bad input.

The CLI runs use the embedded sample with ``--universe 10`` and three Sundays, so each replay
takes about a second; the expensive runs are module fixtures shared by several tests.
"""

from __future__ import annotations

import itertools
import json
import shutil
import sqlite3
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from arena.backtests.backtest import default_plans, sunday_configs
from arena.commands.backtest import summary_table
from arena.reports.charts import nice_ticks
from arena.reports.equity import CohortRecord, mean_equity
from arena.run.plan import NO_MARKET, UNCOVERED, VOLUME_FINAL
from ledger.events import CohortOpened
from ledger.leaderboard import belief_scores
from ledger.projection import BrierRow, CohortState
from ledger.restore import load
from ledger.store import EventStore
from replays.samples import sample_path
from replays.tapefile import load_tape
from tests.conftest import Arena

SMALL = ("--universe", "10", "--starts", "2024-09-01..2024-09-15")
AGENTS = ["strategy", "hold", "favourite", "random"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("backtest")


@pytest.fixture(scope="module")
def data(arena: Arena, workdir: Path) -> dict[str, Any]:
    return arena.json("backtest", "favourite", *SMALL, "--jobs", "1", "--db", workdir / "one.db")


@pytest.fixture(scope="module")
def report(arena: Arena, workdir: Path) -> tuple[Path, dict[str, Any]]:
    out = workdir / "report"
    args = ("favourite", *SMALL, "--jobs", "2", "--db", str(workdir / "two.db"))
    return out, arena.json("backtest", *args, "--report", out)


# -- the JSON ------------------------------------------------------------------------------------


def test_json_shape(data: dict[str, Any]) -> None:
    assert list(data) == [
        "strategy", "against", "tape", "package_version", "settings", "skipped_starts",
        "skipped_why", "cohorts", "interval", "summary", "paired", "beliefs", "digest", "db",
    ]  # fmt: skip
    assert data["strategy"] == "favourite"
    assert data["against"] == ["hold", "favourite", "random"]
    assert data["tape"] == load_tape(sample_path()).hash
    assert data["package_version"] == version("arena")
    assert data["skipped_starts"] == []
    settings = data["settings"]
    assert settings["agents"] == {
        "strategy": "favourite", "hold": "hold", "favourite": "favourite", "random": "random",
    }  # fmt: skip
    assert settings["starts"] == [
        "2024-09-01T00:00:00Z", "2024-09-08T00:00:00Z", "2024-09-15T00:00:00Z",
    ]  # fmt: skip
    assert (settings["universe"], settings["cash"], settings["rules"]) == (10, 10_000.0, "v1")
    assert (settings["decision_cadence"], settings["mark_cadence"], settings["seed"]) == (
        "weekly", "daily", 0,
    )  # fmt: skip
    assert [c["start"] for c in data["cohorts"]] == settings["starts"]
    for cohort in data["cohorts"]:
        assert cohort["markets"] == 10
        assert list(cohort["agents"]) == AGENTS
        for agent in cohort["agents"].values():
            assert {"return_pct", "brier", "win_rate"} <= set(agent)
    assert list(data["summary"]) == AGENTS
    assert list(data["paired"]) == AGENTS[1:]
    assert set(data["paired"]["random"]) == {"mean", "ci_low", "ci_high", "significant"}


def test_returns_are_pnl_over_cash(data: dict[str, Any]) -> None:
    for cohort in data["cohorts"]:
        for agent in cohort["agents"].values():
            # return % = (total value − 10,000) / 10,000 × 100
            assert agent["return_pct"] == pytest.approx((agent["total_value"] - 10_000) / 100)


def test_hold_is_the_zero_line(data: dict[str, Any]) -> None:
    for cohort in data["cohorts"]:
        hold = cohort["agents"]["hold"]
        assert (hold["return_pct"], hold["brier"], hold["win_rate"]) == (0.0, None, None)
    # strategy − hold = strategy per cohort, so the paired difference is the strategy's mean
    strategy, paired = data["summary"]["strategy"], data["paired"]["hold"]
    assert paired["mean"] == pytest.approx(strategy["return_mean"])
    assert paired["ci_low"] == pytest.approx(strategy["return_ci_low"])
    assert paired["ci_high"] == pytest.approx(strategy["return_ci_high"])


def test_identical_agents_differ_by_exactly_zero(data: dict[str, Any]) -> None:
    # the strategy is favourite, so it trades exactly like the favourite baseline
    assert data["paired"]["favourite"] == {
        "mean": 0.0, "ci_low": 0.0, "ci_high": 0.0, "significant": False,
    }  # fmt: skip


def test_means_by_hand_and_intervals_over_markets(data: dict[str, Any]) -> None:
    # weekly cohorts of one tape share their markets: the intervals resample markets
    assert data["interval"]["method"] == "markets"
    assert (data["interval"]["markets"], data["interval"]["draws"]) == (10, 2000)
    for name in AGENTS:
        r = [c["agents"][name]["return_pct"] for c in data["cohorts"]]
        summary = data["summary"][name]
        assert summary["return_mean"] == pytest.approx(sum(r) / 3)
        assert summary["interval"] == "markets"
        assert summary["return_ci_low"] <= summary["return_mean"] <= summary["return_ci_high"]
    strategy = [c["agents"]["strategy"]["return_pct"] for c in data["cohorts"]]
    rand = [c["agents"]["random"]["return_pct"] for c in data["cohorts"]]
    paired = data["paired"]["random"]
    assert paired["mean"] == pytest.approx(sum(strategy) / 3 - sum(rand) / 3)
    assert paired["ci_low"] <= paired["mean"] <= paired["ci_high"]
    assert paired["significant"] == (paired["ci_low"] > 0 or paired["ci_high"] < 0)


def test_beliefs_only_for_agents_that_state_them(data: dict[str, Any]) -> None:
    beliefs = data["beliefs"]
    assert set(beliefs) == {"strategy", "favourite"}  # hold never bets, random states none
    resolved = sum(c["agents"]["strategy"]["n_resolved"] for c in data["cohorts"])
    assert beliefs["strategy"]["n"] == resolved
    assert beliefs["strategy"]["implied_brier"] == pytest.approx(
        data["summary"]["strategy"]["brier"]
    )


def test_no_beliefs_is_null(arena: Arena, workdir: Path) -> None:
    out = arena.json("backtest", "hold", "--universe", "5", "--starts", "2024-09-01..2024-09-01",
                     "--against", "random", "--db", workdir / "null.db")  # fmt: skip
    assert out["beliefs"] is None
    assert list(out["paired"]) == ["random"]
    # one cohort: no interval and never significant
    assert out["paired"]["random"]["ci_low"] is None
    assert out["paired"]["random"]["significant"] is False


def test_belief_scores_by_hand() -> None:
    def row(confidence: float, won: int, belief: float | None) -> BrierRow:
        return BrierRow("o", "m", "YES", confidence, won, 0.5, belief)

    rows = [row(0.2, 1, 0.8), row(0.5, 0, 0.4), row(1.0, 1, None)]
    scores = belief_scores(rows)
    assert scores is not None
    assert scores["n"] == 2
    # Brier ((0.8 − 1)² + (0.4 − 0)²)/2 = (0.04 + 0.16)/2 = 0.1
    assert scores["brier"] == pytest.approx(0.1)
    # log loss −(ln 0.8 + ln 0.6)/2 = (0.2231436 + 0.5108256)/2 = 0.3669846
    assert scores["log_loss"] == pytest.approx(0.3669846, abs=1e-7)
    # each belief alone in its bin: ECE = (0.2 + 0.4)/2 = 0.3
    assert scores["ece"] == pytest.approx(0.3)
    # singleton bins: REL = Brier = 0.1; base rate 0.5: RES = 0.25, UNC = 0.25
    assert scores["murphy"] == pytest.approx(
        {"reliability": 0.1, "resolution": 0.25, "uncertainty": 0.25}
    )
    # implied confidence on the same two bets: ((0.2 − 1)² + (0.5 − 0)²)/2 = (0.64 + 0.25)/2
    assert scores["implied_brier"] == pytest.approx(0.445)
    assert belief_scores([row(0.3, 1, None)]) is None


# -- reproducibility -----------------------------------------------------------------------------


def _without_db(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "db"}


def test_same_command_twice_is_identical(arena: Arena, data: dict[str, Any], workdir: Path) -> None:
    again = arena.json("backtest", "favourite", *SMALL, "--jobs", "1", "--db", workdir / "again.db")
    assert again["db"] != data["db"]
    assert _without_db(again) == _without_db(data)


def test_two_jobs_equal_one(data: dict[str, Any], report: tuple[Path, dict[str, Any]]) -> None:
    assert _without_db(report[1]) == _without_db(data)


def test_rerun_into_the_same_db_resumes_to_the_same_result(
    arena: Arena, data: dict[str, Any], workdir: Path
) -> None:
    assert arena.json("backtest", "favourite", *SMALL, "--jobs", "1", "--db", data["db"]) == data


def test_figures_are_read_from_the_closing_snapshots_and_a_bad_one_is_folded_around(
    arena: Arena, data: dict[str, Any], tmp_path: Path
) -> None:
    """A backtest reads its cohorts back as a report does: each from its closing snapshot,
    checked. A damaged one is skipped with one note, and the log's fold gives the same JSON."""
    db = tmp_path / "copy.db"
    shutil.copy(data["db"], db)
    with EventStore.open(db, readonly=True) as store:
        assert load(store).restored == store.streams()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DROP TRIGGER snapshots_no_update")
    conn.execute(
        "UPDATE snapshots SET state = replace(state, '\"cash\":', '\"cash\": ') WHERE id = 1"
    )
    conn.close()
    result = arena("backtest", "favourite", *SMALL, "--jobs", "1", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    assert _without_db(json.loads(result.stdout)) == _without_db(data)
    (note,) = result.stderr.strip().splitlines()
    assert note.startswith("note: snapshot 1 (cohort ") and "folded the log instead" in note


def test_a_plugin_file_trades_as_strategy(arena: Arena, tmp_path: Path) -> None:
    plugin = tmp_path / "mine.py"
    plugin.write_text(
        "from strategies.api import Decision, Strategy\n"
        "class Mine(Strategy):\n"
        "    def decide(self, view):\n"
        "        return Decision.hold('mine')\n"
    )
    out = arena.json("backtest", f"{plugin}:Mine", "--universe", "3",
                     "--starts", "2024-09-01..2024-09-08", "--against", "hold", "--jobs", "1",
                     "--db", tmp_path / "p.db")  # fmt: skip
    assert out["settings"]["agents"] == {"strategy": f"{plugin}:Mine", "hold": "hold"}
    # it never bets either: the same returns as hold, cohort by cohort
    assert [c["agents"]["strategy"]["return_pct"] for c in out["cohorts"]] == [0.0, 0.0]
    assert out["paired"]["hold"]["mean"] == 0.0


# -- the HTML report -----------------------------------------------------------------------------


def test_report_writes_page_and_results(report: tuple[Path, dict[str, Any]]) -> None:
    out, data = report
    assert json.loads((out / "results.json").read_text()) == data
    page = (out / "index.html").read_text()
    # one combined equity chart, one per agent, and one reliability diagram per agent
    assert page.count("<svg") == 1 + 2 * len(AGENTS)
    assert page.count("<polyline") > len(AGENTS)
    for needle in (data["tape"], data["digest"], data["package_version"], "favourite"):
        assert needle in page
    # the sample has no volume points: its universes were ranked by final volume, and it says
    n = len(data["cohorts"])
    assert {c["universe_by"] for c in data["cohorts"]} == {VOLUME_FINAL}
    assert f'universe chosen by</td><td class="text">final volume ({n} of {n} cohorts)</td>' in page
    # of the ten biggest markets, Arizona senate (500614) is recorded until 2024-11-12 00:00 and
    # closes at 10:39; the other nine close by 11-10 08:31: each cohort stops there, and says so
    stop = (
        "the tape's recording ends at 2024-11-12 00:00 UTC with 1 market(s) still open (500614): "
        "no price is known after it, so no decision is made"
    )
    assert [c["decisions_stopped"] for c in data["cohorts"]] == [stop] * n
    assert (
        f'decisions stopped early</td><td class="text">{n} of {n} cohorts, e.g. 2024-09-01: '
        in page
    )
    for external in ("<script", "<link", "src=", "href=", "@import", "url("):
        assert external not in page


def test_human_output(arena: Arena, data: dict[str, Any]) -> None:
    # the tables of the run ``data`` made, resumed: the same figures with nothing to replay
    result = arena("backtest", "favourite", *SMALL, "--jobs", "1", "--db", data["db"])
    assert result.exit_code == 0, result.output
    assert "Per cohort" in result.output
    assert "Stated beliefs" in result.output
    assert "digest" in result.output


def test_the_summary_shows_every_score_its_caption_defines(data: dict[str, Any]) -> None:
    """The caption defines BSS mkt; the table once left the column out."""
    console = Console(width=250, record=True)
    console.print(summary_table(data))
    text = console.export_text()
    lines = text.splitlines()
    (header,) = [line for line in lines if line.startswith(" agent ")]
    mkt = header.index("mkt")  # the column headed "BSS" over "mkt"
    assert lines[lines.index(header) - 1][mkt : mkt + 3] == "BSS"
    favourite = data["summary"]["favourite"]["bss_market"]
    (row,) = [line for line in text.splitlines() if line.lstrip("│ ").startswith("favourite")]
    assert f"{favourite:+.3f}" in row


# -- default starts ------------------------------------------------------------------------------


def test_default_starts_are_the_full_universe_sundays() -> None:
    tape = load_tape(sample_path())
    AGENTS = {"h": "hold"}
    # all 101 markets are listed and open from 2024-05-12; the first Sunday of November after
    # the election is the last with every one still open: (Nov 3 − May 12)/7 + 1 = 175/7 + 1
    starts = [p.config.start for p in default_plans(tape, sunday_configs(tape, AGENTS))]
    assert len(starts) == 26
    assert (starts[0], starts[-1]) == (
        datetime(2024, 5, 12, tzinfo=UTC), datetime(2024, 11, 3, tzinfo=UTC),
    )  # fmt: skip
    # ten markets are open from 2024-03-24 (twelve that day): (Nov 3 − Mar 24)/7 + 1 = 33
    ten_configs = sunday_configs(tape, AGENTS, universe=10)
    ten = [p.config.start for p in default_plans(tape, ten_configs)]
    assert (len(ten), ten[0]) == (33, datetime(2024, 3, 24, tzinfo=UTC))


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("nosuch",), "unknown strategy 'nosuch'"),
        (("favourite", "--against", "hold,nosuch"), "unknown strategy 'nosuch'"),
        (("favourite", "--against", "hold,hold"), "two agents are named 'hold'"),
        (("favourite", "--starts", "2020-01-05..2020-01-12"), "no open, priced market"),
        (("favourite", "--decisions", "sometimes"), "decision_cadence: cadence 'sometimes'"),
        (("favourite", "--cash", "-1"), "cash: Input should be greater than 0"),
        (("favourite", "--universe", "0"), "universe: Input should be greater than or equal to 1"),
        (("favourite", "--timeout", "-1"), "decision_timeout: Input should be greater than"),
        (("favourite", "--jobs", "-2"), "jobs: Input should be greater than or equal to 0"),
        (("random?bets=x",), "bets"),
    ],
)
def test_bad_input_is_one_line(
    arena: Arena, args: tuple[str, ...], fragment: str, tmp_path: Path
) -> None:
    result = arena("backtest", *args, "--db", tmp_path / "x.db")
    assert result.exit_code == 1
    assert result.output.count("\n") == 1, result.output
    assert result.output.startswith("Error: ")
    assert fragment in result.output
    assert not (tmp_path / "x.db").exists()  # nothing was run


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--starts", "2024-09-01"), "Invalid value for --starts: use FROM..TO"),
        (("--starts", "2024-09-02..2024-09-03"), "Invalid value for --starts: no Sunday"),
        (("--starts", "soon..later"), "not an ISO-8601"),
        (("--rules", "v3"), "'v3' is not one of 'v1', 'v2'"),
    ],
)
def test_a_bad_option_is_a_usage_error(
    arena: Arena, args: tuple[str, ...], fragment: str, tmp_path: Path
) -> None:
    """Usage errors: ``arena`` itself prints them as one line (tests/arena/commands/test_cli.py
    shows how)."""
    result = arena("backtest", "favourite", *args, "--db", tmp_path / "x.db")
    assert result.exit_code == 2
    last = result.output.splitlines()[-1]
    assert last.startswith("Error: ") and fragment in last, result.output
    assert not (tmp_path / "x.db").exists()


def test_bad_tape_is_one_line(arena: Arena, tmp_path: Path) -> None:
    bad = tmp_path / "bad.tape"
    bad.write_text("not a tape")
    result = arena("backtest", "favourite", "--tape", bad)
    assert result.exit_code != 0
    assert result.output == f"Error: {bad}: not a tape (neither a .tape zip nor JSON lines)\n"


# -- invariants ----------------------------------------------------------------------------------


def _record(offsets: list[int], values: list[float], cash: float = 100.0) -> CohortRecord:
    state = CohortState("c")
    state.apply(
        CohortOpened(
            cohort="c",
            ts=0,
            start=0,
            rules="v1",
            cash=cash,
            agents=["a"],
            agent_specs={"a": "hold"},
            universe=[],
            tape="t",
            decision_cadence="weekly",
            mark_cadence="daily",
            seed=0,
            settings={},
        )
    )
    return CohortRecord(state, 0, offsets, {"a": values})


def test_mean_equity_carries_a_finished_cohort_forward() -> None:
    long = _record([0, 86_400, 172_800], [100.0, 110.0, 120.0])
    short = _record([0, 86_400], [100.0, 90.0])
    grid, mean = mean_equity([long, short], "a")
    assert grid.tolist() == [0, 86_400, 172_800]
    # day 2: the short cohort ended at 90, so (120 + 90)/2 = 105
    assert mean.tolist() == [100.0, 100.0, 105.0]


@given(st.lists(st.lists(st.floats(0, 1e6), min_size=1, max_size=8), min_size=1, max_size=5))
def test_mean_equity_lies_between_the_cohorts(series: list[list[float]]) -> None:
    records = [_record([k * 86_400 for k in range(len(v))], v) for v in series]
    grid, mean = mean_equity(records, "a")
    assert grid.tolist() == [k * 86_400 for k in range(max(map(len, series)))]
    for k, m in enumerate(mean):
        carried = [v[min(k, len(v) - 1)] for v in series]
        assert min(carried) - 1e-6 <= m <= max(carried) + 1e-6


@given(st.floats(-1e6, 1e6), st.floats(1e-3, 1e6))
def test_nice_ticks_are_round_and_inside(low: float, width: float) -> None:
    high = low + width
    ticks = nice_ticks(low, high)
    assert 2 <= len(ticks) <= 11
    assert all(low - 1e-9 * width <= t <= high + 1e-9 * width for t in ticks)
    steps = {round((b - a) / width, 6) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1


def test_weeks_with_nothing_to_trade_are_skipped_and_named(arena: Arena, tmp_path: Path) -> None:
    """Three markets of the sample still trade on 2024-11-17, but its recording ends on 11-12:
    that week has nothing to decide (it used to run a cohort with no decision at all), and a
    week later nothing trades. Each skipped week is named with its reason."""
    db = str(tmp_path / "s.db")
    out = arena.json("backtest", "hold", "--universe", "5", "--starts", "2024-11-10..2024-11-24",
                     "--against", "favourite", "--jobs", "1", "--db", db)  # fmt: skip
    assert out["skipped_starts"] == ["2024-11-17T00:00:00Z", "2024-11-24T00:00:00Z"]
    assert out["skipped_why"] == {
        "2024-11-17T00:00:00Z": UNCOVERED,
        "2024-11-24T00:00:00Z": NO_MARKET,
    }
    assert [c["start"][:10] for c in out["cohorts"]] == ["2024-11-10"]
    shown = arena("backtest", "hold", "--universe", "5", "--starts", "2024-11-10..2024-11-24",
                  "--against", "favourite", "--jobs", "1", "--db", db).output  # fmt: skip
    assert f"skipped 2 start(s) with {UNCOVERED}: 2024-11-17; {NO_MARKET}: 2024-11-24" in " ".join(
        shown.split()
    )
