"""``arena bench`` smoke tests at toy sizes: the figures' shapes and counts, never their speed.

Timing values (seconds, rates, memory) vary with the machine and are only checked to be numbers;
the counts follow from the workload's sizes and are checked exactly where they can be.
"""

from __future__ import annotations

from typing import Any

import pytest

from arena.bench.canned_llm import CannedLLM
from arena.bench.llm_bench import AGENT_ANSWER
from replays.synthetic import anchored_walk_tape
from tests.conftest import Arena
from tests.peer_workload import band_orders


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def test_replay(arena: Arena) -> None:
    out = arena.json("bench", "replay", "--markets", "5", "--steps", "50")
    assert set(out) == {
        "execution", "ticks", "orders", "fills", "rejected", "events", "seconds", "cpu_seconds",
        "ticks_per_s", "ticks_per_cpu_s", "tape_mb", "log_mb", "run_peak_rss_mb",
        "build_peak_rss_mb",
    }  # fmt: skip
    assert out["execution"] == "fa" and out["ticks"] == 250  # 5 markets x 50 one-second steps
    # the peers' band rule over the same tape, counted by a plain loop (tests/peer_workload.py)
    assert out["orders"] == band_orders(anchored_walk_tape(5, 50))
    # a float64 price per tick, the 50 instants once (the markets share them), offsets
    assert out["tape_mb"] == round((250 * 8 + 50 * 8 + (6 + 6 + 5) * 8) / 2**20, 1)
    # cash 1e12 and $50 bets: nothing is rejected, so every order fills
    assert out["rejected"] == 0
    assert out["fills"] == out["orders"] > 0
    # the log holds a DecisionMade per step, and an OrderPlaced and an OrderFilled per order
    assert out["events"] >= 50 + 2 * out["orders"]
    assert all(is_number(out[k]) and out[k] > 0 for k in ("seconds", "ticks_per_s", "log_mb"))
    assert out["run_peak_rss_mb"] >= out["tape_mb"]


def test_replay_with_a_book_at_every_tick(arena: Arena) -> None:
    """Under l2 the band trader's $50 orders walk a 5-level book at every tick. Its rule looks
    only at the tape's prices, so it places the orders it places under fa, and with levels of
    1 to 1,000 shares a cent apart from a cent off the price, every one of them fills."""
    out = arena.json("bench", "replay", "--markets", "5", "--steps", "50", "--execution", "l2")
    assert out["execution"] == "l2"
    assert out["orders"] == band_orders(anchored_walk_tape(5, 50))
    assert out["rejected"] == 0 and out["fills"] == out["orders"] > 0


def test_replay_as_a_table(arena: Arena) -> None:
    result = arena("bench", "replay", "--markets", "5", "--steps", "50")
    assert result.exit_code == 0, result.output
    assert "replay (peer workload)" in result.output
    assert "ticks_per_s" in result.output and "250" in result.output


def test_history(arena: Arena) -> None:
    out = arena.json("bench", "history", "--markets", "3", "--points", "2000")
    # 2,000 points 10 minutes apart span 13.9 days: a decision at each of 14 midnights
    assert (out["markets"], out["points_per_market"], out["decisions"]) == (3, 2000, 14)
    assert out["window_points"] == 7 * 144  # a week of points 10 minutes apart
    # both ways of reading gave equal spreads at every decision (the bench checks), and timed
    timed = [k for k in out if k.endswith(("_ms", "_cpu_s"))]
    assert len(timed) == 6 and all(is_number(out[k]) and out[k] >= 0 for k in timed)


def test_tapes(arena: Arena) -> None:
    out = arena.json("bench", "tapes", "--markets", "3", "--points", "100")
    assert set(out) == {"markets", "points", "load_seconds", "peak_rss_mb", "file_mb"}
    assert (out["markets"], out["points"]) == (3, 300)  # points over the whole tape: 3 x 100
    assert all(is_number(out[k]) and out[k] > 0 for k in ("load_seconds", "peak_rss_mb", "file_mb"))


@pytest.mark.slow  # the benchmark itself, at its fixed universe sizes
def test_strategies(arena: Arena) -> None:
    out = arena.json("bench", "strategies")
    assert set(out) == {
        "universe_sizes",
        "us_per_decision",
        "fixed_us",
        "per_market_us",
        "target",
        "within_target",
        "isolated_us_per_decision",
        "walk_us_per_decision",
    }
    assert out["universe_sizes"] == [10, 100, 500]
    assert len(out["walk_us_per_decision"]) == 3
    assert all(map(is_number, out["walk_us_per_decision"]))
    isolated = out["isolated_us_per_decision"]
    assert len(isolated) == 3 and all(map(is_number, isolated))
    assert len(out["us_per_decision"]) == 3 and all(map(is_number, out["us_per_decision"]))
    assert is_number(out["fixed_us"]) and is_number(out["per_market_us"])
    assert out["target"] == "20 us + 0.2 us per market"
    assert isinstance(out["within_target"], bool)


def test_ledger(arena: Arena) -> None:
    out = arena.json("bench", "ledger", "--events", "2000", "--batch", "500")
    assert set(out) == {"append", "rebuild"}
    append, rebuild = out["append"], out["rebuild"]
    assert set(append) == {
        "events",
        "seconds",
        "median_seconds",
        "cpu_seconds",
        "events_per_s",
        "file_mb_per_million",
    }
    assert append["events"] == 2000
    assert set(rebuild) == {
        "events",
        "seconds",
        "median_seconds",
        "cpu_seconds",
        "events_per_s",
        "agents",
        "brier_rows",
    }
    assert rebuild["seconds"] <= rebuild["median_seconds"]  # best of the repeats
    # the rebuilt log is written whole decisions at a time, so it holds at least the asked-for
    # count: 1 CohortOpened + 200 MarketListed, then decisions, orders, marks, settlements
    assert rebuild["events"] >= 2000
    assert rebuild["agents"] == 5
    assert rebuild["brier_rows"] > 0  # every market resolves at the end, scoring its buys
    assert all(is_number(v) for v in (*append.values(), *rebuild.values()))


def test_ledger_as_tables(arena: Arena) -> None:
    result = arena("bench", "ledger", "--events", "500")
    assert result.exit_code == 0, result.output
    assert "ledger append" in result.output and "ledger rebuild" in result.output


def test_reads(arena: Arena) -> None:
    out = arena.json("bench", "reads", "--events", "3000", "--repeats", "1")
    assert set(out) == {"events", "report", "report_command", "verify", "rebuild", "snapshot"}
    assert out["events"] >= 3000
    assert is_number(out["report"]["events_per_s_equivalent"])
    assert all(is_number(out["report_command"][k]) for k in ("cpu_seconds", "seconds"))
    assert is_number(out["verify"]["events_per_s"]) and is_number(out["rebuild"]["seconds"])
    assert out["verify"]["ranges"] == [[0, out["events"]]]  # too small to cut
    snapshot = out["snapshot"]
    assert 0 < snapshot["closing_bytes"] <= snapshot["all_snapshots_bytes"]
    assert snapshot["brier_rows"] > 0 and snapshot["periodic_snapshots"] == 0  # 3k < 200k
    assert is_number(snapshot["snapshot_growth_pct"])


def test_llm(arena: Arena) -> None:
    """The model here is a canned endpoint that holds at once (the real model's cohort is
    tests/strategies/test_llm_real_model.py): one decision of each agent with one market of the
    sample (Pennsylvania, which closes 2024-11-07), then the overhead run decides daily from
    2024-09-01 to 2024-11-07, 30 + 31 + 7 = 68 days, one call each for either agent."""
    with CannedLLM(AGENT_ANSWER) as model:
        out = arena.json(
            "bench", "llm", "--base-url", model.base_url, "--model", "smol", "--markets", "1",
            "--decisions", "1",
        )  # fmt: skip
        assert model.requests == 2  # the agent's one decision and the forecaster's one question
    assert out["model"] == "smol" and out["server"] == f"{model.base_url} (given)"
    assert (out["markets"], out["agent_decisions"], out["forecaster_decisions"]) == (1, 1, 1)
    assert (out["agent_calls"], out["questions"]) == (1, 1)
    assert out["calls_with_http"] == 68 + 68
    assert out["overhead_target_ms"] == 5.0
    timed = (
        "seconds_per_decision", "seconds_per_question", "agent_own_ms_per_decision_500_markets",
        "forecaster_own_ms_per_question", "agent_ms_per_call_with_http",
        "forecaster_ms_per_call_with_http",
    )  # fmt: skip
    assert all(is_number(out[key]) and out[key] > 0 for key in timed)
    judged = [timed[2], timed[4], timed[5]]  # per decision or call, not per question
    assert out["within_target"] == all(out[key] <= 5.0 for key in judged)


def test_lab(arena: Arena) -> None:
    out = arena.json("bench", "lab", "--n", "1000", "--repeats", "2")
    assert set(out) == {
        "experiment", "n", "experiment_seconds_best", "experiment_seconds_median",
        "command_seconds", "rows_per_second", "checks_ok",
    }  # fmt: skip
    assert (out["experiment"], out["n"], out["checks_ok"]) == ("parity", 1000, True)
    assert out["experiment_seconds_best"] <= out["experiment_seconds_median"]
    assert out["rows_per_second"] == 1000 / out["experiment_seconds_best"]


def test_diffusion(arena: Arena) -> None:
    out = arena.json("bench", "diffusion", "--markets", "40", "--steps", "3", "--batch", "8",
                     "--forecast-markets", "5", "--mc", "2", "--sample-steps", "4")  # fmt: skip
    assert (out["training_markets"], out["steps"], out["batch"]) == (40, 3, 8)
    assert (out["forecast_markets"], out["mc"], out["sample_steps"]) == (5, 2, 4)
    assert (out["hidden"], out["depth"]) == (128, 3)
    timed = [k for k in out if k.endswith("_seconds")]
    assert len(timed) == 5 and all(out[k] >= 0 for k in timed)
