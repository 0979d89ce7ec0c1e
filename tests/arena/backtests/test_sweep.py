"""``arena sweep``: the grid, the names, shared comparison agents, resuming, the warning.

The CLI runs use the embedded sample with ``--universe 10`` and three Sundays; ``favourite``
is deterministic, so a setting equal to a comparison agent must give exactly its numbers.
"""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from arena.backtests.backtest import plan_backtest
from arena.backtests.sweep import (
    SweepError,
    parse_grid,
    plan_sweep,
    read_sweep_file,
    results_data,
    run_sweep,
    selection_warning,
    settings_of,
    settings_table,
)
from arena.engines.base import TapeSource
from arena.engines.recorded import CohortDone
from arena.run.settings import RunOptions
from ledger.chain import verify_chain
from ledger.store import EventStore
from replays.markets import MarketInfo, Resolution
from replays.samples import sample_path
from replays.tape import Tape
from replays.tapefile import save_tape
from strategies.api import StrategyError
from strategies.loader import derived_name, name_specs
from tests.conftest import Arena

SMALL = ("--universe", "10", "--starts", "2024-09-01..2024-09-15")
SUNDAYS = [datetime(2024, 9, d, tzinfo=UTC) for d in (1, 8, 15)]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sweep")


@pytest.fixture(scope="module")
def data(arena: Arena, workdir: Path) -> dict[str, Any]:
    return arena.json("sweep", "favourite", "--grid", "stake=100,400", *SMALL, "--against",
                      "hold,favourite", "--jobs", "1", "--db", str(workdir / "s.db"))  # fmt: skip


# -- the grid and the names ----------------------------------------------------------------------


def test_a_grid_is_every_combination_in_order() -> None:
    grid = parse_grid("B=100,500; min_edge=0,0.02")
    assert grid == (("B", ("100", "500")), ("min_edge", ("0", "0.02")))
    settings = settings_of("sign?c=0.01", grid)
    assert [s.spec for s in settings] == [
        "sign?c=0.01&B=100&min_edge=0",
        "sign?c=0.01&B=100&min_edge=0.02",
        "sign?c=0.01&B=500&min_edge=0",
        "sign?c=0.01&B=500&min_edge=0.02",
    ]
    # named by the grid's values only: the base's own settings are the same in every one
    assert [s.name for s in settings] == [
        "sign-B_100-min_edge_0", "sign-B_100-min_edge_0.02",
        "sign-B_500-min_edge_0", "sign-B_500-min_edge_0.02",
    ]  # fmt: skip
    assert settings[1].values == {"B": "100", "min_edge": "0.02"}


def test_a_grid_value_replaces_the_base_spec_setting() -> None:
    (only,) = settings_of("sign?B=7", parse_grid("B=9"))
    assert only.spec == "sign?B=9"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        ("B", "KEY=V1,V2"),
        ("B=1,,2", "KEY=V1,V2"),
        ("=1", "KEY=V1,V2"),
        ("B=1;B=2", "names 'B' twice"),
        ("B=1,1", "repeats a value of 'B'"),
    ],
)
def test_a_bad_grid_says_what_is_wrong(text: str, fragment: str) -> None:
    with pytest.raises(SweepError, match=fragment):
        parse_grid(text)


@settings(deadline=None)  # a busy machine's pause is not a failure of naming
@given(st.dictionaries(st.from_regex(r"[a-z_]{1,6}", fullmatch=True),
                       st.from_regex(r"[0-9.]{1,4}", fullmatch=True), max_size=4))  # fmt: skip
def test_a_derived_name_is_a_valid_name_whatever_the_order(settings: dict[str, str]) -> None:
    forward = "&".join(f"{k}={v}" for k, v in settings.items())
    backward = "&".join(f"{k}={v}" for k, v in reversed(settings.items()))
    name = derived_name(f"sign?{forward}")
    assert name == derived_name(f"sign?{backward}")
    assert all(c.isalnum() or c in "_.-" for c in name)


def test_names_keep_the_kind_unless_two_share_it() -> None:
    assert name_specs(["hold", "favourite", "random"]) == {
        "hold": "hold", "favourite": "favourite", "random": "random",
    }  # fmt: skip
    assert name_specs(["sign?B=100", "sign?B=500", "hold"]) == {
        "sign-B_100": "sign?B=100", "sign-B_500": "sign?B=500", "hold": "hold",
    }  # fmt: skip
    assert name_specs(["a=sign?B=100", "sign?B=500"]) == {"a": "sign?B=100", "sign": "sign?B=500"}
    assert name_specs(["scripted:x/d.json"]) == {"scripted": "scripted:x/d.json"}
    assert name_specs(["./my.py:Mine?w=5"]) == {"Mine-w_5": "./my.py:Mine?w=5"}
    with pytest.raises(StrategyError, match="two agents are named 'sign'"):
        name_specs(["sign", "sign"])
    with pytest.raises(StrategyError, match="named 'strategy'"):
        name_specs(["strategy=hold"], taken=["strategy"])


OLD_SAMPLE_HASH = "1569b5755d678b429be4705347b251d13e0c0c5a1f31f7df3b28b85fc773789d"


def test_a_backtest_keeps_its_old_names_and_cohort_ids() -> None:
    source = TapeSource.load(sample_path())
    plan = plan_backtest("favourite", ["hold", "favourite", "random"], source, SUNDAYS[:1],
                         universe=10)  # fmt: skip
    assert plan.agents == {"strategy": "favourite", "hold": "hold", "favourite": "favourite",
                           "random": "random"}  # fmt: skip
    # the id this cohort had before names could be derived, on the tape it was pinned with (the
    # sample before its re-import): the config is unchanged (a change here changes every log)
    assert plan.cohorts[0].cohort_id(OLD_SAMPLE_HASH) == "2024-09-01-b220a222"
    # the tape's hash is part of the id: on today's sample the same cohort is another one
    assert plan.cohorts[0].cohort_id(source.tape.hash) == "2024-09-01-f8cb65df"


def test_a_backtest_compares_two_settings_of_one_kind(arena: Arena, tmp_path: Path) -> None:
    result = arena("backtest", "favourite", "--universe", "10", "--starts",
                   "2024-09-01..2024-09-08", "--against", "favourite?stake=100,favourite?stake=400",
                   "--jobs", "1", "--db", tmp_path / "b.db", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert list(got["summary"]) == ["strategy", "favourite-stake_100", "favourite-stake_400"]
    # the strategy is favourite at its default stake of 400: the same bets, to the cent
    same = got["paired"]["favourite-stake_400"]
    assert same["mean"] == 0 and not same["significant"]


# -- the sweep's numbers -------------------------------------------------------------------------


def test_each_setting_and_comparison_agent_is_reported(data: dict[str, Any]) -> None:
    assert [r["agent"] for r in data["settings"]] == ["favourite-stake_100", "favourite-stake_400"]
    assert [r["agent"] for r in data["comparison"]] == ["hold", "favourite"]
    assert data["cohort_runs"] == 3 * (1 + 2)  # per start: one shared cohort, one per setting
    assert data["reused"] == 0
    assert data["interval"]["method"] == "markets"  # weekly cohorts of one tape share markets


def test_a_setting_equal_to_a_comparison_agent_matches_it_exactly(data: dict[str, Any]) -> None:
    """favourite's default stake is 400: run alone or beside hold, it bets the same."""
    same = next(r for r in data["settings"] if r["values"] == {"stake": "400"})
    favourite = next(r for r in data["comparison"] if r["agent"] == "favourite")
    for key in ("return_mean", "return_ci_low", "return_ci_high", "brier_mean", "win_rate",
                "n_bets", "total_pnl"):  # fmt: skip
        assert same[key] == favourite[key], key
    assert same["paired"]["favourite"] == {"mean": 0.0, "ci_low": 0.0, "ci_high": 0.0,
                                           "significant": False}  # fmt: skip


def test_a_paired_difference_to_hold_is_the_setting_itself(data: dict[str, Any]) -> None:
    """hold never bets, so setting − hold is the setting's return, interval and all."""
    for row in data["settings"]:
        pair = row["paired"]["hold"]
        assert pair["mean"] == pytest.approx(row["return_mean"], abs=1e-12)
        assert pair["ci_low"] == pytest.approx(row["return_ci_low"], abs=1e-9)
        assert pair["ci_high"] == pytest.approx(row["return_ci_high"], abs=1e-9)


def test_smaller_stakes_bet_as_often_for_less(data: dict[str, Any]) -> None:
    small, large = data["settings"]
    assert small["n_bets"] == large["n_bets"] > 0
    assert abs(small["total_pnl"]) < abs(large["total_pnl"])


def test_the_selection_warning_counts_what_was_tried(data: dict[str, Any]) -> None:
    sel = data["selection"]
    best = max(data["settings"], key=lambda r: r["return_mean"])
    assert sel["best"] == best["agent"]
    assert sel["settings_tried"] == 2
    assert sel["paired_intervals"] == 4
    assert sel["expected_false_exclusions"] == 0.2
    # with ten markets the sample's full Sundays run 2024-03-24..2024-11-03; the sweep took
    # three in September, and the other 30 trade some of its ten markets (all ten from
    # 2024-04-07 on) to the same outcomes: none of them can confirm the winner
    assert sel["unused_starts"] == 30
    assert sel["held_out_starts"] is None and sel["confirm"] is None
    assert selection_warning(data).endswith(
        "The 30 start(s) the sweep did not use trade markets it traded, to the same outcomes, "
        "so they cannot confirm it: confirm it on another tape or a later recording"
    )


def two_eras_tape() -> Tape:
    """Two markets priced weekly from 2024-01-07 to 2024-01-28 that resolve on 2024-02-04, and
    two priced from 2024-02-04 to 2024-02-25 that resolve on 2024-03-03: a sweep of January's
    Sundays leaves February's markets, and only those, to confirm on."""
    start, week = 1_704_585_600, 7 * 86_400
    markets, series, resolutions = [], {}, []
    for mid, first, volume in (("e1", 0, 200), ("e2", 0, 100), ("l1", 4, 200), ("l2", 4, 100)):
        markets.append(MarketInfo(id=mid, question=f"{mid}?", outcomes=("Yes", "No"),
                                  volume=volume, open_ts=start + first * week))  # fmt: skip
        times = np.array([start + (first + k) * week for k in range(4)], dtype=np.int64)
        series[mid] = (times, np.array([0.3, 0.4, 0.6, 0.7]))
        resolutions.append(Resolution(market=mid, ts=int(times[-1]) + week, winner="Yes"))
    return Tape.from_series(markets, series, resolutions, source="two eras")


def test_the_winner_is_confirmed_only_on_markets_the_sweep_did_not_trade(
    arena: Arena, tmp_path: Path
) -> None:
    tape = tmp_path / "eras.tape"
    save_tape(two_eras_tape(), tape)
    data = arena.json("sweep", "favourite", "--grid", "stake=100,200", "--tape", tape,
                      "--universe", "2", "--starts", "2024-01-07..2024-01-14", "--against",
                      "hold", "--jobs", "1", "--db", tmp_path / "s.db")  # fmt: skip
    sel = data["selection"]
    # 2024-01-21 and 2024-01-28 are not swept but trade e1 and e2, as the swept cohorts did
    assert sel["unused_starts"] == 6
    assert sel["held_out_starts"] == "2024-02-04..2024-02-25"
    assert sel["confirm"] == (
        f"arena backtest '{sel['best_spec']}' --starts 2024-02-04..2024-02-25 --against 'hold' "
        f"--tape {tape}"
    )
    assert "Confirm it on starts whose markets the sweep did not trade" in selection_warning(data)


def test_the_table_and_warning_are_printed(arena: Arena, workdir: Path) -> None:
    result = arena("sweep", "favourite", "--grid", "stake=100,400", *SMALL, "--against",
                   "hold,favourite", "--db", str(workdir / "s.db"))  # fmt: skip
    assert result.exit_code == 0, result.output
    out = result.output
    assert "stake=100" in out and "stake=400" in out and "− favourite" in out
    assert "best mean return of 2 setting(s) tried" in out
    assert "cannot confirm it" in out
    assert "9 cohort-run(s) (0 run now, 9 already in the log)" in out  # the module's log


def test_the_table_cuts_long_settings_in_the_middle_so_none_read_alike(
    data: dict[str, Any],
) -> None:
    """Settings that differ only at the end ("… min_edge=0.02" and "… min_edge=0.05", 45
    characters each) in 100 columns: cut at the end both read "forecaster=extr…"; cut in the
    middle, as the report cuts names, each keeps its end."""
    long = copy.deepcopy(data)
    for row, edge in zip(long["settings"], ("0.02", "0.05"), strict=True):
        row["values"] = {"forecaster": "extremized", "stake": row["values"]["stake"],
                         "min_edge": edge}  # fmt: skip
    console = Console(width=100, record=True, color_system=None)
    console.print(settings_table(long, 100))
    lines = console.export_text().splitlines()
    assert max(map(len, lines)) <= 100
    rows = [line.split("│")[1].strip() for line in lines if line.startswith("│ forec")]
    assert [r.removesuffix(" ★") for r in rows] == ["foreca…=0.02", "foreca…=0.05"]
    assert "…" not in "".join(line.split("│", 2)[2] for line in lines if line.startswith("│"))


def test_a_sweep_file_gives_the_same_sweep(
    arena: Arena, workdir: Path, data: dict[str, Any]
) -> None:
    path = workdir / "sweep.toml"
    path.write_text(
        'strategy = "favourite"\nagainst = ["hold", "favourite"]\n'
        'starts = "2024-09-01..2024-09-15"\nuniverse = 10\n[grid]\nstake = [100, 400]\n'
    )
    got = arena.json("sweep", "--file", str(path), "--db", str(workdir / "s.db"))
    assert got["digest"] == data["digest"]
    assert got["reused"] == 9
    assert read_sweep_file(path).grid == (("stake", ("100", "400")),)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("strategy = 'x'\n", "[grid]"),
        ("what = 1\n[grid]\nB = [1]\n", "unknown key(s) what"),
        ("against = 3\n[grid]\nB = [1]\n", "against is a list"),
        ("[grid]\nB = [[1]]\n", "not a string, number or boolean"),
        ("[grid\n", "sweep.toml"),
        ("[grid]\nB = []\n", "grid gives 'B' no values"),  # was an IndexError traceback
    ],
)
def test_a_bad_sweep_file_is_one_line(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    with pytest.raises(SweepError, match=re.escape(fragment)):
        read_sweep_file(path)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("favourite",), "give --grid"),
        (("--grid", "stake=1"), "name a STRATEGY"),
        (("favourite", "--grid", "stake"), "KEY=V1,V2"),
        (("favourite", "--grid", "stake=x"), "stake"),
        (("nosuch", "--grid", "a=1"), "unknown strategy 'nosuch'"),
        (("favourite", "--grid", "stake=1", "--against", "hold,hold"), "named 'hold'"),
        (("favourite", "--grid", "stake=1", "--address", "x"), "only with --engine ray"),
    ],
)
def test_bad_input_is_one_line(
    arena: Arena, args: tuple[str, ...], fragment: str, tmp_path: Path
) -> None:
    result = arena("sweep", *args, *SMALL, "--db", str(tmp_path / "x.db"))
    assert result.exit_code != 0
    assert result.output.count("\n") == 1, result.output
    assert fragment in result.output
    assert not (tmp_path / "x.db").exists()


# -- resuming ------------------------------------------------------------------------------------


class Interrupted(Exception):
    pass


def test_an_interrupted_sweep_resumes_with_only_what_is_missing(tmp_path: Path) -> None:
    source = TapeSource.load(sample_path())
    plan = plan_sweep("favourite", parse_grid("stake=100,400"), ["hold"], source, SUNDAYS,
                      universe=10)  # fmt: skip
    in_process = RunOptions(jobs=1)  # the interrupted run alone uses the pool of workers
    straight = run_sweep(plan, tmp_path / "straight.db", in_process)
    seen: list[CohortDone] = []

    def stop_after_four(done: CohortDone) -> None:
        seen.append(done)
        if len(seen) == 4:
            raise Interrupted

    with pytest.raises(Interrupted):
        run_sweep(plan, tmp_path / "resumed.db", on_done=stop_after_four)
    resumed = run_sweep(plan, tmp_path / "resumed.db", in_process)
    assert [d.appended > 0 for d in resumed.done] == [False] * 4 + [True] * 5
    assert resumed.digest == straight.digest
    with (EventStore.open(tmp_path / "straight.db", readonly=True) as a,
          EventStore.open(tmp_path / "resumed.db", readonly=True) as b):  # fmt: skip
        assert a.head() == b.head()  # the same order of appends, so the same chain
        verify_chain(b)
    drop = {"db", "reused"}
    assert {k: v for k, v in results_data(resumed).items() if k not in drop} == {
        k: v for k, v in results_data(straight).items() if k not in drop
    }
