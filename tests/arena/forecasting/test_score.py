"""``arena score``: Kelly per bettor, K-Fish's bins, BSS against climatology, hostile input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import Result

from tests.conftest import Arena

HEADER = "id,cohort,agent,side,forecast_ts,market_prob,pred_prob,y\n"


def _losing_cohort(cohort: str) -> str:
    """An agent's bets in one cohort, $1 at the price each: a long shot won (+0.90) and two
    even bets lost (-0.50 each), so the agent lost $0.10 in every cohort."""
    return (
        f"m1,{cohort},sign,YES,1,0.1,0.2,1\n"
        f"m2,{cohort},sign,YES,1,0.5,0.6,0\n"
        f"m3,{cohort},sign,YES,1,0.5,0.6,0\n"
    )


def test_kelly_of_an_agent_that_lost_money_never_compounds_across_cohorts(
    arena: Arena, tmp_path: Path
) -> None:
    path = tmp_path / "predictions.csv"
    path.write_text(HEADER + "".join(_losing_cohort(f"c{k:02d}") for k in range(26)))
    report = arena.json("score", path)
    trading = report["trading"]
    # sign P/L: (0.9 - 0.5 - 0.5)/3 per event, a loss
    assert trading["pnl_per_event"] == pytest.approx(-0.1 / 3)
    # per cohort: long shot f = 0.1/0.9, odds 9: x2.0; each even bet f = 0.2, lost: x0.8
    # 2.0 * 0.8 * 0.8 = 1.28. Chained over the 26 cohorts it was 1.28^26 = 614 (+61,300 %).
    kelly = trading["kelly"]
    assert (kelly["n"], kelly["runs"], kelly["by"]) == (78, 26, ["cohort", "agent"])
    assert kelly["roi"] == pytest.approx(0.28)
    assert (kelly["roi_min"], kelly["roi_max"]) == pytest.approx((0.28, 0.28))
    result = arena("score", path)
    assert result.exit_code == 0, result.output
    table = result.stdout
    assert "mean of 26 runs, one per cohort × agent" in table
    assert "+28.00%" in table


def test_a_file_without_bettors_is_pm_eval_s_one_run(arena: Arena, tmp_path: Path) -> None:
    path = tmp_path / "f.csv"
    path.write_text("y,pred_prob,market_prob\n1,0.2,0.1\n0,0.6,0.5\n")
    kelly = arena.json("score", path)["trading"]["kelly"]
    assert list(kelly) == ["n", "roi", "final_bankroll"]
    assert kelly["final_bankroll"] == pytest.approx(2.0 * 0.8)


EDGE_FILE = "y,pred_prob\n1,0.6\n0,0.62\n1,0.3\n"


def test_kfish_binning_and_bss_against_climatology(arena: Arena, tmp_path: Path) -> None:
    path = tmp_path / "edge.csv"
    path.write_text(EDGE_FILE)
    kfish = arena.json("score", path, "--binning", "kfish")
    # floor(p·15): 0.6 -> 9 and 0.62 -> 9 together (mean 0.61, observed 0.5, gap 0.11);
    # 0.3 -> 4 alone (gap 0.7): ECE (2 x 0.11 + 0.7)/3
    assert kfish["ece"] == pytest.approx(0.92 / 3)
    assert kfish["binning"] == {"rule": "kfish: floor(p·K)", "bins": 15}
    # forecastbench's right-closed edges at 15 bins: 0.6 is edge 9, so bin 8, alone
    fb = arena.json("score", path, "--bins", "15")
    assert fb["ece"] == pytest.approx((0.4 + 0.62 + 0.7) / 3)
    assert "binning" not in fb
    # Brier (0.16 + 0.3844 + 0.49)/3 = 0.3448; base rate 2/3, o(1 - o) = 2/9
    assert fb["bss_climatology"] == pytest.approx(1 - 0.3448 / (2 / 9))
    assert fb["bss"] == pytest.approx(1 - 0.3448 / 0.25)


def test_bss_against_climatology_is_null_with_one_outcome(arena: Arena, tmp_path: Path) -> None:
    path = tmp_path / "ones.csv"
    path.write_text("y,pred_prob\n1,0.6\n1,0.9\n")
    assert arena.json("score", path)["bss_climatology"] is None
    result = arena("score", path)
    assert "— (one outcome only)" in result.stdout


# -- hostile input (issue 25): one line, never a traceback, never unbounded ----------------------


def _one_line_error(result: Result) -> str:
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


@pytest.mark.parametrize("bins", ["1e12", "1000000000000", "10001", "0"])
def test_bins_out_of_range_is_one_line(arena: Arena, tmp_path: Path, bins: str) -> None:
    path = tmp_path / "f.csv"
    path.write_text(EDGE_FILE)
    result = arena("score", path, "--bins", bins)
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert "Error: Invalid value for '--bins'" in result.output.splitlines()[-1]


def test_a_gzip_bomb_is_refused_after_the_limit(arena: Arena, tmp_path: Path) -> None:
    """3 MiB of zeros in a 3 KiB gzip, against a 1 MiB limit: refused, never read whole."""
    path = tmp_path / "bomb.csv.gz"
    with gzip.open(path, "wb") as gz:
        gz.write(b"y,pred_prob\n")
        gz.write(b"0" * (3 << 20))
    assert path.stat().st_size < 16_384
    error = _one_line_error(arena("score", path, env={"ARENA_SCORE_MAX_BYTES": str(1 << 20)}))
    assert error == (
        f"Error: {path}: more than 1,048,576 bytes of forecasts, the limit "
        "(ARENA_SCORE_MAX_BYTES raises it)"
    )


def test_a_plain_file_over_the_limit_is_refused(arena: Arena, tmp_path: Path) -> None:
    path = tmp_path / "f.csv"
    path.write_text(EDGE_FILE)
    result = arena("score", path, env={"ARENA_SCORE_MAX_BYTES": "10"})
    assert "more than 10 bytes of forecasts" in _one_line_error(result)
    bad = arena("score", path, env={"ARENA_SCORE_MAX_BYTES": "lots"})
    assert "ARENA_SCORE_MAX_BYTES='lots' is not a number of bytes" in _one_line_error(bad)


def test_a_column_named_twice_is_refused(arena: Arena, tmp_path: Path) -> None:
    path = tmp_path / "dup.csv"
    path.write_text("y,pred_prob,y\n1,0.6,0\n")
    error = _one_line_error(arena("score", path))
    assert error == f"Error: {path}: column 'y' appears more than once"


def test_json_never_prints_infinity(arena: Arena, tmp_path: Path) -> None:
    """40 long shots at a price of 0 (clipped to 1e-9, odds 1e9) that all won: the Kelly
    bankroll, 2.5e8 per row, overflows a float; the document stays valid JSON."""
    path = tmp_path / "long.csv"
    path.write_text("y,pred_prob,market_prob\n" + "1,0.9,0\n" * 40)
    result = arena("score", path, "--json")
    assert result.exit_code == 0, result.output

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in the JSON")

    report = json.loads(result.stdout, parse_constant=refuse)
    assert report["trading"]["kelly"]["roi"] is None
    assert report["notes"] == [
        "trading.kelly.roi: not a finite number (an overflow), written as null",
        "trading.kelly.final_bankroll: not a finite number (an overflow), written as null",
    ]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "deep.csv",
            'y,pred_prob\n1,"' + "[" * 60_000 + "]" * 60_000 + '"\n',
            "row 1: pred_prob is nested too deeply to read",
        ),
        (
            "deep.jsonl",
            '{"y": 1, "pred_prob": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
            "row 1: nested too deeply to read",
        ),
    ],
)
def test_deeply_nested_forecasts_are_one_line(
    arena: Arena, tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert _one_line_error(arena("score", path)) == f"Error: {path}: {message}"
