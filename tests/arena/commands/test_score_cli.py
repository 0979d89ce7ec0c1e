"""``arena score`` on small files worked by hand, on every kind of bad input, and on the example."""

from __future__ import annotations

import gzip
import importlib.resources
import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import Arena

ROWS = [
    {"y": 1, "pred_prob": 0.8, "market_prob": 0.6, "race": "a"},
    {"y": 0, "pred_prob": 0.3, "market_prob": 0.4, "race": "a"},
    {"y": 1, "pred_prob": 0.5, "market_prob": 0.5, "race": "b"},
]
CSV = "y,pred_prob,market_prob,race\n1,0.8,0.6,a\n0,0.3,0.4,a\n1,0.5,0.5,b\n"


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    path = tmp_path / "f.csv"
    path.write_text(CSV)
    return path


def test_json_report_by_hand(arena: Arena, csv_file: Path) -> None:
    report = arena.json("score", csv_file, "--group-cols", "race")
    assert list(report) == [
        "n", "brier", "logloss", "ece", "bss", "bss_climatology", "murphy", "trading", "groups",
    ]  # fmt: skip
    assert report["n"] == 3
    # Brier (0.04 + 0.09 + 0.25)/3 = 0.38/3; bss vs 0.25: 1 - 0.38/0.75 = 0.49333
    assert report["brier"] == pytest.approx(0.38 / 3)
    assert report["bss"] == pytest.approx(1 - 0.38 / 0.75)
    # against climatology: base rate 2/3, o(1 - o) = 2/9: 1 - (0.38/3)/(2/9) = 0.43
    assert report["bss_climatology"] == pytest.approx(0.43)
    # log loss -(ln 0.8 + ln 0.7 + ln 0.5)/3 = (0.2231436 + 0.3566749 + 0.6931472)/3 = 0.4243219
    assert report["logloss"] == pytest.approx(0.4243219, abs=1e-7)
    # every forecast alone in its bin: ECE = (0.2 + 0.3 + 0.5)/3 = 1/3
    assert report["ece"] == pytest.approx(1 / 3)
    # singleton bins: REL = Brier = 0.38/3; o = 2/3: RES = (1/9 + 4/9 + 1/9)/3 = 2/9, UNC = 2/9
    assert report["murphy"] == pytest.approx(
        {"reliability": 0.38 / 3, "resolution": 2 / 9, "uncertainty": 2 / 9}
    )
    trading = report["trading"]
    assert (trading["mode"], trading["B"], trading["transaction_cost"]) == ("sign", 1.0, 0.0)
    # b = [+1, -1, 0]: 1*(1-0.6) = 0.4, -1*(0-0.4) = 0.4, tie 0 -> 0.8/3
    assert trading["pnl_per_event"] == pytest.approx(0.8 / 3)
    # Kelly: YES f = 0.2/0.4 -> cap 0.25, odds 0.4/0.6, won: 7/6; NO f = 0.1/0.4 = 0.25,
    # odds 0.4/0.6, NO won: 7/6; tie: no bet -> 49/36
    assert trading["kelly"] == pytest.approx({"n": 3, "roi": 13 / 36, "final_bankroll": 49 / 36})
    # residuals y - p: a: 0.2, -0.3 -> -0.05; b: 0.5 -> 2 groups, worst 0.5,
    # avg (2*0.05 + 1*0.5)/3 = 0.2
    assert report["groups"] == {
        "race": pytest.approx({"worst_abs_bias": 0.5, "avg_abs_bias": 0.2, "n_groups": 2})
    }


def test_linear_mode_with_stake_and_cost(arena: Arena, csv_file: Path) -> None:
    trading = arena.json("score", csv_file, "--mode", "linear", "--B", "2", "--cost", "0.1")[
        "trading"
    ]
    # b = 2*(p - q) = [0.4, -0.2, 0]: 0.4*0.4 - 0.04 = 0.12; -0.2*(-0.4) - 0.02 = 0.06 -> 0.18/3
    assert trading["pnl_per_event"] == pytest.approx(0.06)
    # Kelly with fee 0.1 per staked fraction: each bet pays 2.5% first: (0.975 * 7/6)^2
    assert trading["kelly"]["final_bankroll"] == pytest.approx((0.975 * 7 / 6) ** 2)


def test_without_market_or_groups_the_blocks_are_absent(arena: Arena, tmp_path: Path) -> None:
    path = tmp_path / "f.csv"
    path.write_text("y,p\n1,0.8\n0,0.3\n")
    report = arena.json("score", path, "--pred-col", "p")
    assert list(report) == ["n", "brier", "logloss", "ece", "bss", "bss_climatology", "murphy"]
    assert report["brier"] == pytest.approx((0.04 + 0.09) / 2)


def test_jsonl_and_gzip_read_the_same_numbers(arena: Arena, tmp_path: Path, csv_file: Path) -> None:
    lines = "".join(json.dumps(row) + "\n" for row in ROWS)
    jsonl = tmp_path / "f.jsonl"
    jsonl.write_text(lines + "\n")  # a trailing blank line is not a row
    gz = tmp_path / "f.csv.gz"
    gz.write_bytes(gzip.compress(CSV.encode()))
    expected = arena.json("score", csv_file, "--group-cols", "race")
    assert arena.json("score", jsonl, "--group-cols", "race") == expected
    assert arena.json("score", gz, "--group-cols", "race") == expected


def test_table_and_reliability_diagram(arena: Arena, csv_file: Path) -> None:
    result = arena("score", csv_file)
    assert result.exit_code == 0
    assert "Brier" in result.output and "0.126667" in result.output
    assert "reliability" in result.output
    # the 0.8 forecast is right-closed bin (0.75, 0.80], shown with its count
    assert "0.75–0.80" in result.output
    # Kelly's ROI 13/36 is a return, shown in percent (it read "+0.3611", a bare fraction)
    assert "Kelly ROI (cap 0.25)" in result.output and "+36.11%" in result.output
    assert "Kelly final bankroll (from 1)" in result.output and "1.36111" in result.output


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.csv", "y,market_prob\n1,0.5\n", "missing column 'pred_prob'"),
        ("label.csv", "y,pred_prob\n1,0.5\n2,0.5\n", "row 2: y is '2', expected 0 or 1"),
        ("range.csv", "y,pred_prob\n1,1.5\n", "row 1: pred_prob is '1.5', outside [0, 1]"),
        ("nan.csv", "y,pred_prob\n1,0.5\n0,abc\n", "row 2: pred_prob is 'abc', not a number"),
        ("market.csv", "y,pred_prob,market_prob\n1,0.5,-1\n", "row 1: market_prob"),
        ("blank.csv", "y,pred_prob\n1,\n", "row 1: pred_prob is '', not a number"),
        ("short.csv", "y,pred_prob\n1,0.5\n0\n", "row 2: 1 field(s) where the header has 2"),
        ("empty.csv", "", "empty file"),
        ("header.csv", "y,pred_prob\n", "no data rows"),
        ("empty.jsonl", "\n", "empty file"),
        ("bad.jsonl", '{"y": 1, "pred_prob": 0.5}\n{"y": 1,\n', "row 2: not valid JSON"),
        ("list.jsonl", "[1, 0.5]\n", "row 1: expected a JSON object"),
        ("key.jsonl", '{"y": 1, "pred_prob": 0.5}\n{"y": 0}\n', "row 2: no value for column"),
        ("null.jsonl", '{"y": null, "pred_prob": 0.5}\n', "row 1: no value for column 'y'"),
        ("data.txt", "y,pred_prob\n1,0.5\n", "unknown format"),
    ],
)
def test_bad_input_is_one_line_naming_file_and_row(
    arena: Arena, tmp_path: Path, name: str, content: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    result = arena("score", path, "--json")
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert str(path) in lines[0] and message in lines[0]


def test_missing_group_column(arena: Arena, csv_file: Path) -> None:
    result = arena("score", csv_file, "--group-cols", "race,state")
    assert result.exit_code != 0
    assert "missing column 'state'" in result.output


@pytest.mark.parametrize("kind", ["absent", "directory", "corrupt gzip", "not utf-8"])
def test_unreadable_file(arena: Arena, tmp_path: Path, kind: str) -> None:
    path = tmp_path / "f.csv.gz" if kind == "corrupt gzip" else tmp_path / "f.csv"
    if kind == "directory":
        path.mkdir()
    elif kind == "corrupt gzip":
        path.write_bytes(b"not gzip at all")
    elif kind == "not utf-8":
        path.write_bytes(b"y,pred_prob\n1,\xff\xfe\n")
    result = arena("score", path)
    assert result.exit_code != 0
    assert "Traceback" not in result.output and result.exception is not None
    assert isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0], result.output


def test_bundled_example(arena: Arena) -> None:
    example = importlib.resources.files("arena.examples") / "forecasts.csv"
    with importlib.resources.as_file(example) as path:
        report = arena.json("score", path, "--group-cols", "race,horizon_days")
    assert report["n"] == 200
    assert report["groups"]["race"]["n_groups"] == 3
    assert report["groups"]["horizon_days"]["n_groups"] == 2
    assert report["trading"]["kelly"]["n"] == 200
    # extremizing quiet, mostly decided markets sharpens them: it beats the 0.25 reference
    assert 0.0 < report["brier"] < 0.25 and report["bss"] > 0.0


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_truth_column_gives_sce_and_the_bounded_trader(arena: Arena, tmp_path: Path) -> None:
    path = write(tmp_path, "t.csv", "y,pred_prob,p_true\n1,0.8,0.7\n0,0.3,0.2\n1,0.5,0.6\n")
    truth = arena.json("score", path)["truth"]
    # every forecast is 0.1 from the truth: SCE 0.01, B·E|p − q| = 0.1
    assert truth["sce"] == pytest.approx(0.01)
    assert truth["bounded_trader_profit"] == pytest.approx(0.1)
    # B = 2, c = 0.05: 2 · mean(0.1 − 0.05) = 0.1
    truth = arena.json("score", path, "--B", "2", "--cost", "0.05")["truth"]
    assert truth["bounded_trader_profit"] == pytest.approx(0.1)
    assert "truth" not in arena.json("score", write(tmp_path, "n.csv", "y,pred_prob\n1,0.8\n"))


def test_multi_outcome_rows_by_hand(arena: Arena, tmp_path: Path) -> None:
    rows = [
        {"y": 2, "pred_prob": [0.2, 0.3, 0.5], "p_true": [0.1, 0.3, 0.6]},
        {"y": 0, "pred_prob": [0.6, 0.4], "p_true": [0.5, 0.5]},
        {"y": 1, "pred_prob": 0.7, "p_true": 0.6},
    ]
    path = write(tmp_path, "m.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    report = arena.json("score", path)
    assert report["n"] == 1  # the binary row
    multi = report["multiclass"]
    assert multi["n"] == 2
    # ‖q − e_y‖²: 0.04 + 0.09 + 0.25 = 0.38 and 0.16 + 0.16 = 0.32
    assert multi["brier"] == pytest.approx(0.35)
    assert multi["logloss"] == pytest.approx((math.log(2) + math.log(1 / 0.6)) / 2)
    # confidences 0.5 (bin 7 of 15) and 0.6 (bin 8), both right: (0.5 + 0.4)/2
    assert multi["top_label_ece"] == pytest.approx(0.45)
    assert multi["sce"] == pytest.approx(0.02)  # 0.01 + 0 + 0.01 and 0.01 + 0.01
    csv_path = write(tmp_path, "m.csv", 'y,pred_prob\n2,"[0.2, 0.3, 0.5]"\n0,"[0.6, 0.4]"\n')
    assert arena.json("score", csv_path)["multiclass"]["brier"] == pytest.approx(0.35)
    assert "brier" not in arena.json("score", csv_path)  # no binary rows: no binary block


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"y": 0, "pred_prob": [0.5, 1.0]}\n', "row 1: pred_prob sums to 1.5, not 1"),
        ('{"y": 3, "pred_prob": [0.5, 0.5]}\n', "row 1: y is 3, expected an outcome index 0..1"),
        ('{"y": 0, "pred_prob": [1.0]}\n', "row 1: pred_prob has 1 outcome(s)"),
        ('{"y": 0, "pred_prob": [0.5, 0.5], "p_true": 0.5}\n', "p_true must be a list of 2"),
    ],
)
def test_bad_multi_outcome_rows(arena: Arena, tmp_path: Path, text: str, message: str) -> None:
    result = arena("score", write(tmp_path, "bad.jsonl", text))
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output


def test_float32_reproduces_pm_eval_casting_before_ece_and_brier(
    arena: Arena, tmp_path: Path
) -> None:
    path = write(tmp_path, "f.csv", "y,pred_prob\n1,0.05\n0,0.07\n")
    plain = arena.json("score", path)
    cast = arena.json("score", path, "--float32")
    # float64: 0.05 is in bin 0 (right-closed) and 0.07 in bin 1: ECE (0.95 + 0.07)/2
    assert plain["ece"] == pytest.approx(0.51)
    # float32(0.05) = 0.0500000007 moves to bin 1 with 0.07: |0.5 − mean q|
    q = np.array([0.05, 0.07], dtype=np.float32).astype(np.float64)
    assert cast["ece"] == abs(0.5 - q.mean())
    assert cast["brier"] == float(np.mean((q - np.array([1.0, 0.0])) ** 2))
    assert cast["brier"] != plain["brier"]
    help_text = arena("score", "--help").output
    assert "before Brier, log loss, ECE and trading" in " ".join(help_text.split())


def test_approachability_by_hand(arena: Arena, tmp_path: Path, csv_file: Path) -> None:
    app = arena.json("score", csv_file, "--approachability")["approachability"]
    # cells: 0.8 → bin 15 (+0.2), 0.3 → bin 5 (−0.3), 0.5 → bin 9 (+0.5); one group
    assert app["app_err"] == pytest.approx(0.5 / 3)
    assert (app["n_cells"], app["order"], app["curve"]["t"]) == (20, "file order", [3])
    assert app["top"][0] == {
        "group": "(all)", "bin": 9, "bin_lo": 0.45, "bin_hi": 0.5,
        "mean_payoff": pytest.approx(0.5 / 3), "violation": pytest.approx(0.5 / 3),
    }  # fmt: skip
    eps = arena.json("score", csv_file, "--approachability", "--cost", "0.1")["approachability"]
    assert eps["app_err"] == pytest.approx(0.5 / 3 - 0.1)  # eps = c/B = 0.1
    # by race: a holds bins 15 and 5, b bin 9: 40 cells, the same worst cell
    grouped = arena.json("score", csv_file, "--approachability", "--group-cols", "race")
    assert grouped["approachability"]["n_cells"] == 40
    # 11 rows in one cell; the NO row is forecast first by createdAt, last in the file
    lines = ["y,pred_prob,createdAt"] + [f"1,0.5,{t}" for t in range(1, 11)] + ["0,0.5,0"]
    timed = write(tmp_path, "timed.csv", "\n".join(lines) + "\n")
    curve = arena.json("score", timed, "--approachability")["approachability"]["curve"]
    assert curve["t"] == [10, 11]
    assert curve["app_err"] == pytest.approx([(9 * 0.5 - 0.5) / 10, 4.5 / 11])


def test_repair_at_resolution_by_hand(arena: Arena, tmp_path: Path) -> None:
    text = (
        "y,pred_prob,createdAt,endDate\n"
        "1,0.3,1970-01-01T00:00:01Z,2\n"  # forecast at 1, resolves at 2
        "0,0.3,3,4\n"  # forecast at 3: row 1's outcome is known
        "1,0.3,3,\n"  # never resolves, teaches nothing
    )
    repair = arena.json("score", write(tmp_path, "r.csv", text), "--repair")["repair"]
    assert (repair["forecast_time"], repair["resolve_time"]) == ("createdAt", "endDate")
    assert repair["n_updates"] == 1
    # rows 2 and 3 see one YES in bin floor(0.3·20) = 6: (1 + 5·0.325)/(1 + 5) = 0.4375
    repaired = np.array([0.3, 0.4375, 0.4375])
    y = np.array([1.0, 0.0, 1.0])
    assert repair["brier"] == pytest.approx(float(np.mean((repaired - y) ** 2)))
    bad = write(tmp_path, "b.csv", "y,pred_prob,createdAt\n1,0.3,yesterday\n")
    result = arena("score", bad, "--repair")
    assert result.exit_code == 1
    assert "row 1: createdAt is 'yesterday', not a unix time or ISO 8601" in result.output
