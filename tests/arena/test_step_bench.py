"""``arena bench step`` on a small log: every figure it reports is there, from the samples it
says it took (speed itself is the bench's to report, never a test's)."""

from __future__ import annotations

import pytest

from arena.bench.step_bench import bench_live, bench_redraw, bench_step_back
from tests.conftest import Arena

TIMED = {"cpu", "wall"}
FIGURES = {"best_ms", "median_ms", "worst_ms", "samples"}


def test_redraw_times_each_key_from_press_to_screen() -> None:
    figures = bench_redraw(markets=12, agents=3, presses=8, n_events=3_000)
    assert (figures["markets"], figures["agents"]) == (12, 3)
    assert figures["events"] >= 3_000
    for key in ("d", "n", "p", "a"):
        timed = figures[f"key_{key}_to_screen"]
        assert set(timed) == TIMED and set(timed["cpu"]) == FIGURES
        assert timed["cpu"]["samples"] == 2  # 8 presses over 4 keys
        assert timed["cpu"]["best_ms"] <= timed["cpu"]["median_ms"] <= timed["cpu"]["worst_ms"]
    assert figures["key_to_screen"]["wall"]["samples"] == 8
    assert figures["unbound_key_to_screen"]["cpu"]["samples"] == 8


def test_step_back_samples_decisions_across_the_log() -> None:
    figures = bench_step_back(n_events=12_000, samples=5)
    assert figures["events"] >= 12_000
    assert figures["to_any_decision"]["cpu"]["samples"] == 5
    assert set(figures["open"]) == {"read_s", "index_s"}


def test_live_steps_the_sample_to_its_close_one_decision_instant_at_a_time() -> None:
    figures = bench_live(("favourite", "hold"))
    # the sample's cohort from 2024-09-01 decides weekly, 11 times (to 2024-11-10), then closes
    assert figures["step"]["cpu"]["samples"] == figures["step"]["wall"]["samples"] == 12
    assert figures["events"] > 100


@pytest.mark.slow  # the whole benchmark: 40 key presses, a live replay, a log stepped back
def test_the_command_prints_the_figures_as_json(arena: Arena) -> None:
    out = arena.json("bench", "step", "--markets", "8", "--agents", "2", "--events", "6000")
    assert out["redraw"]["key_to_screen"]["cpu"]["samples"] == 40
    assert out["step_back"]["to_any_decision"]["wall"]["samples"] == 40
    assert out["live"]["step"]["cpu"]["samples"] == 12
