"""arena diffusion train and eval on a small tape, and the tape's resolved markets as the model
reads them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from arena.forecasting.diffusion_data import resolved_paths
from replays.markets import MarketInfo, Resolution
from replays.tape import Tape
from replays.tapefile import save_tape
from strategies.market_diffusion.features import DAY
from tests.conftest import Arena

T0 = 1_700_000_000


def small_tape(file: Path) -> Path:
    """24 binary markets resolving a day apart; each drifts toward how it resolves."""
    markets, series, resolutions = [], {}, []
    for k in range(24):
        start = T0 + k * DAY
        times = start + 6 * 3600 * np.arange(8, dtype=np.int64)
        won = k % 3 != 0
        yes = np.linspace(0.5, 0.8 if won else 0.2, 8)
        mid = f"m{k}"
        question = f"Will thing {k} happen?"
        markets.append(MarketInfo(id=mid, question=question, outcomes=("Yes", "No"),
                                  category="Things", end_ts=int(times[-1]) + 3600))  # fmt: skip
        series[mid] = (times, yes)
        resolutions.append(Resolution(market=mid, ts=int(times[-1]) + 7200,
                                      winner="Yes" if won else "No"))  # fmt: skip
    save_tape(Tape.from_series(markets, series, resolutions), file)
    return file


def test_train_then_eval(tmp_path: Path, arena: Arena) -> None:
    tape = small_tape(tmp_path / "t.tape")
    # T0 is 2023-11-14 22:13:20 UTC and market k resolves k days + 44 h later: 0..12 are before
    before = "2023-11-29"
    args = ["diffusion", "train", "--tape", str(tape), "--before", before, "--out",
            str(tmp_path / "m.npz"), "--hidden", "16", "--depth", "2", "--steps", "40",
            "--batch", "32", "--sample-steps", "8", "--mc", "8", "--json"]  # fmt: skip
    result = arena(*args)
    assert result.exit_code == 0, result.output
    trained = json.loads(result.output)
    assert trained["markets"] == {"2": 13} and trained["rows"] == {"2": 13 * 8}
    assert trained["trained_through"] == T0 + 12 * DAY + 44 * 3600
    preds = tmp_path / "p.csv"
    evaluate = ["diffusion", "eval", "--model", str(tmp_path / "m.npz"), "--tape", str(tape)]
    result = arena(*evaluate, "--predictions", preds, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["held_out_markets"] == 11
    diffusion, market = report["diffusion"], report["market_price"]
    assert diffusion["n"] == market["n"] == 11 * 8
    assert "trading" in diffusion and "trading" not in market
    assert set(report["verdict"]) >= {"brier_difference", "standard_error", "beats_market"}
    scored = arena("score", preds, "--json")
    assert scored.exit_code == 0, scored.output
    assert json.loads(scored.output)["brier"] == pytest.approx(diffusion["brier"])
    shown = arena(*evaluate)
    assert "market price" in shown.output and "on held-out Brier" in shown.output


def test_eval_with_nothing_held_out_says_so(tmp_path: Path, arena: Arena) -> None:
    tape = small_tape(tmp_path / "t.tape")
    args = ["diffusion", "train", "--tape", str(tape), "--out", str(tmp_path / "m.npz"),
            "--hidden", "8", "--depth", "1", "--steps", "5", "--batch", "8", "--quiet"]  # fmt: skip
    assert arena(*args).exit_code == 0
    result = arena("diffusion", "eval", "--model", tmp_path / "m.npz", "--tape", tape)
    assert result.exit_code == 1 and "nothing is held out" in result.output


def test_train_refuses_a_tape_with_nothing_resolved_before(tmp_path: Path, arena: Arena) -> None:
    tape = small_tape(tmp_path / "t.tape")
    out = tmp_path / "m.npz"
    result = arena("diffusion", "train", "--tape", tape, "--before", "2020-01-01", "--out", out)
    assert result.exit_code == 1 and "no market with a price path resolved before" in result.output


def test_both_read_the_embedded_sample_by_name(tmp_path: Path, arena: Arena) -> None:
    """'sample' is a tape to every other command; here it was 'sample: cannot read'."""
    out = tmp_path / "m.npz"
    result = arena("diffusion", "train", "--tape", "sample", "--before", "2000-01-01", "--out", out)
    assert result.exit_code == 1 and "no market with a price path resolved before" in result.output
    result = arena("diffusion", "eval", "--model", out, "--tape", "sample")
    assert result.output == f"Error: model file {out}: no such file\n"


def test_resolved_paths_skip_voided_and_open_markets(tmp_path: Path) -> None:
    markets = [MarketInfo(id=k, question=k, outcomes=("Yes", "No")) for k in "abc"]
    series = {k: (np.array([T0, T0 + DAY]), np.array([0.4, 0.6])) for k in "abc"}
    resolutions = [Resolution(market="a", ts=T0 + 2 * DAY, winner="Yes"),
                   Resolution(market="b", ts=T0 + 2 * DAY, winner=None)]  # fmt: skip
    found = list(resolved_paths(Tape.from_series(markets, series, resolutions)))
    assert [p.id for p in found] == ["a"] and found[0].winner_index() == 0


def test_a_bad_model_file_is_one_line(tmp_path: Path, arena: Arena) -> None:
    tape = small_tape(tmp_path / "t.tape")
    (tmp_path / "m.npz").write_bytes(b"PK\x03\x04 not really")
    result = arena("diffusion", "eval", "--model", tmp_path / "m.npz", "--tape", tape)
    assert result.exit_code == 1
    assert result.output.startswith("Error: model file ") and "not a model file" in result.output
    assert result.output.count("\n") == 1
