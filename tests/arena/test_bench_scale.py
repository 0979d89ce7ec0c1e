"""``arena bench scale`` at toy sizes: the figures' shapes and counts, and the growth exponent
worked out by hand; never a speed."""

from __future__ import annotations

import math

import pytest

from arena.bench.scale_bench import growth_exponent
from replays.synthetic import anchored_walk_tape
from tests.conftest import Arena
from tests.peer_workload import band_orders


@pytest.mark.parametrize(
    ("small", "large", "exponent"),
    [
        ((5_000, 2.0), (50_000, 20.0), 1.0),  # ten times the events, ten times the cost
        ((5_000, 1.0), (50_000, 100.0), 2.0),  # ten times the events, a hundred times the cost
        ((409_271, 5.0), (4_092_710, 5.0), 0.0),  # a cost that does not grow
        # the figures: 10.7 -> 26.0 µs an event over ten times the events
        ((1.0, 10.7), (10.0, 260.0), math.log10(260.0 / 10.7)),
    ],
)
def test_growth_exponent_by_hand(
    small: tuple[float, float], large: tuple[float, float], exponent: float
) -> None:
    assert growth_exponent(small, large) == pytest.approx(exponent)


def test_scale_runs_each_size_and_reports_the_exponent(arena: Arena) -> None:
    out = arena.json("bench", "scale", "--markets", "8,4", "--steps", "40")
    assert out["steps"] == 40
    small, large = out["sizes"]  # ascending, whatever the order asked
    assert (small["markets"], large["markets"]) == (4, 8)
    assert (small["ticks"], large["ticks"]) == (160, 320)
    for run in (small, large):
        # a DecisionMade a step, and an OrderPlaced and an OrderFilled per band order at least
        orders = band_orders(anchored_walk_tape(run["markets"], 40))
        assert run["events"] >= 40 + 2 * orders
        assert run["us_per_event"] == round(run["cpu_seconds"] / run["events"] * 1e6, 2)
        assert run["run_peak_rss_mb"] > 0
        assert len(run["load_average"]) == 2 and all(x >= 0 for x in run["load_average"])
    expected = growth_exponent(
        (small["events"], small["cpu_seconds"]), (large["events"], large["cpu_seconds"])
    )
    assert out["exponent"] == round(expected, 3)


@pytest.mark.parametrize(("given", "said"), [("5,x", "is not market counts"), ("0", "at least 1")])
def test_bad_market_counts_are_one_line(arena: Arena, given: str, said: str) -> None:
    result = arena("bench", "scale", "--markets", given)
    assert result.exit_code == 2
    [line] = [text for text in result.output.splitlines() if text.startswith("Error")]
    assert said in line
