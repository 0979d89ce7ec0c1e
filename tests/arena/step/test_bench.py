"""``arena bench step`` on a small log: every figure it reports is there, from the samples it
says it took (speed itself is the bench's to report, never a test's)."""

from __future__ import annotations

import pytest

from arena.bench.step_bench import bench_live, bench_redraw, bench_step_back
from tests.conftest import Arena

TIMED = {"cpu", "wall"}
FIGURES = {"best_ms", "median_ms", "worst_ms", "samples"}


def test_redraw_times_each_key_from_press_to_frame_on_the_real_program() -> None:
    figures = bench_redraw(markets=12, agents=3, presses=8, n_events=3_000)
    assert (figures["markets"], figures["agents"]) == (12, 3)
    assert figures["events"] > 3_000  # and the cohort's close
    assert figures["open_to_first_screen_s"] > 0
    for key in ("d", "n", "p", "a"):
        timed = figures[f"key_{key}_to_screen"]
        assert set(timed) == {"wall", "settled", "cpu", "frames"}
        assert timed["wall"]["samples"] == 2  # 8 presses over 4 keys, each drew a frame
        assert timed["frames"] >= 1
        # the last frame a key caused is never before its first
        assert timed["wall"]["best_ms"] <= timed["settled"]["best_ms"]
        assert timed["wall"]["worst_ms"] <= timed["settled"]["worst_ms"]
    assert figures["key_to_screen"]["cpu"]["samples"] == 8


def test_step_back_samples_decisions_across_the_log() -> None:
    figures = bench_step_back(n_events=12_000, samples=5)
    assert figures["events"] > 12_000
    assert figures["to_any_decision"]["cpu"]["samples"] == 5
    assert figures["cold"]["wall"]["samples"] == 5
    assert figures["back_through_a_walk"]["cpu"]["samples"] == 199  # 200 walked, back from the last
    assert figures["open"]["to_first_screen_s"] > 0 < figures["open"]["to_first_screen_cpu_s"]
    assert figures["open"]["scan_cpu_s"] <= figures["open"]["scan_and_first_view_cpu_s"]
    assert set(figures["to_end"]) == {"cpu_ms", "wall_ms"}
    assert figures["warm_up"]["cpu_s"] >= 0


def test_live_steps_the_sample_to_its_close_one_decision_instant_at_a_time() -> None:
    figures = bench_live(("favourite", "hold"))
    # the sample's cohort from 2024-09-01 decides weekly, 11 times (to 2024-11-10), then closes
    assert figures["step"]["cpu"]["samples"] == figures["step"]["wall"]["samples"] == 12
    assert figures["events"] > 100


@pytest.mark.slow  # the whole benchmark: 40 key presses, a live replay, a log stepped back
def test_the_command_prints_the_figures_as_json(arena: Arena) -> None:
    out = arena.json("bench", "step", "--markets", "8", "--agents", "2", "--events", "6000")
    assert out["redraw"]["key_to_screen"]["wall"]["samples"] == 40
    assert out["step_back"]["to_any_decision"]["wall"]["samples"] == 40
    assert out["live"]["step"]["cpu"]["samples"] == 12
