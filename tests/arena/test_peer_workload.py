"""The benchmark tape is the peers' tape, and the peers' scripts run beside arena's bench."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from arena.bench.peer_bench import tape_matrix
from replays import synthetic
from replays.synthetic import anchored_walk_tape
from tests.conftest import Arena
from tests.peer_workload import band_orders

PEER_WORKLOAD = Path(__file__).resolve().parents[3] / "shared" / "bench" / "peer-workload"


@pytest.mark.skipif(
    not (PEER_WORKLOAD / "gen_data.py").is_file(),
    reason="the peers' generator lives outside the project (../shared/bench/peer-workload)",
)
@pytest.mark.parametrize(("markets", "steps"), [(1, 1), (7, 300), (40, 2_000)])
def test_the_tape_is_the_peers_generators_array_for_array(
    tmp_path: Path, markets: int, steps: int
) -> None:
    subprocess.run(
        [sys.executable, str(PEER_WORKLOAD / "gen_data.py"), str(markets), str(steps)],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    theirs = np.load(tmp_path / f"tape_{markets}x{steps}.npy")
    ours = tape_matrix(anchored_walk_tape(markets, steps, seed=42))
    assert ours.shape == theirs.shape == (steps, markets)
    assert np.array_equal(ours, theirs)


def test_the_tape_is_the_same_however_the_noise_is_blocked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The noise is drawn a block of steps at a time; blocks of one, two and three steps (and
    a ragged last block) give the tape drawn in one block, and its prices are quoted ones."""
    whole = anchored_walk_tape(3, 10, seed=42)
    for draws in (1, 6, 9):
        monkeypatch.setattr(synthetic, "NOISE_BLOCK", draws)
        assert anchored_walk_tape(3, 10, seed=42).hash == whole.hash
    prices = tape_matrix(whole)
    assert ((prices >= 0.02) & (prices <= 0.98)).all()
    assert np.array_equal(prices, np.round(prices, 3))  # quoted to 0.001
    assert anchored_walk_tape(3, 10, seed=43).hash != whole.hash


def test_the_band_loop_counts_by_hand() -> None:
    """Prices 0.50, 0.39 (buy), 0.45, 0.61 (sell), 0.30 (buy), 0.70 (the close: left out)."""
    from replays.markets import MarketInfo
    from replays.tape import Tape

    info = MarketInfo(id="m", question="?", outcomes=("Yes", "No"))
    prices = np.array([0.50, 0.39, 0.45, 0.61, 0.30, 0.70])
    tape = Tape([info], np.array([0, 6]), np.arange(6), prices, {})
    assert band_orders(tape) == 3


def test_peers_run_beside_and_missing_ones_are_a_note(
    arena: Arena, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in backtrader (importable, prints the peers' JSON line) and no nautilus_trader."""
    (tmp_path / "backtrader.py").write_text("")
    (tmp_path / "bench_backtrader.py").write_text(
        "import json, sys, numpy as np\n"
        "p = np.load(sys.argv[1])\n"
        "print('warming up')\n"
        "print(json.dumps({'orders': int((p < 0.4).sum()), 'ticks_per_cpu_s_run': 1000}))\n"
    )
    (tmp_path / "bench_nautilus.py").write_text("raise SystemExit('not reached')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.chdir(tmp_path.parent)  # the folder given relative to here, as a user would
    result = arena(
        "bench", "replay", "--markets", "4", "--steps", "30", "--peers", tmp_path.name, "--json"
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    theirs = out["peers"]["backtrader"]
    assert theirs["orders"] == int((tape_matrix(anchored_walk_tape(4, 30)) < 0.4).sum())
    assert theirs["ticks_per_cpu_s"] == 1000
    assert theirs["arena_times_faster"] == round(out["ticks_per_cpu_s"] / 1000, 1)
    assert set(out["peers"]) == {"backtrader"}
    assert out["notes"] == [f"nautilus_trader: skipped, not importable by {sys.executable}"]
