"""``arena bench sweep``: what ``--engine ray`` costs over ``local``, what an extra setting
costs, and what a 10,000-cohort-run sweep on 16 nodes would take.

The workload: ``favourite`` at ``settings`` stakes against hold, favourite and random (shared,
one cohort per start) on the embedded sample's first ``starts`` full Sundays; 7 settings x 25
starts + 25 shared cohorts = 200 cohort-runs.

* **Engines.** The same sweep into fresh logs with ``--engine local`` (a process pool of
  ``jobs`` workers) and ``--engine ray`` on a local Ray instance with ``jobs`` CPUs, started
  before the clock runs (its start-up is reported apart). Wall time; the two must leave the
  same digest.
* **An extra setting.** In this process (one core, CPU time): a sweep of one setting, then of
  two, over the same starts; the difference per start, against the CPU of one setting's
  cohort-run alone and of one cohort with the setting and all the comparison agents (what a
  backtest per setting pays).
* **The estimate's inputs.** CPU per cohort-run, the driver's CPU to append one cohort's
  recording to the log (events and snapshots), and the recording's size as Ray ships it
  (pickled).
"""

from __future__ import annotations

import os
import pickle
import tempfile
import time
from pathlib import Path
from typing import Any

from arena.backtests.backtest import default_plans, sunday_configs
from arena.backtests.sweep import SweepPlan, plan_sweep, run_sweep
from arena.engines.base import TapeSource
from arena.engines.recorded import deliver, record_cohort
from arena.run.settings import RunOptions
from ledger.store import EventStore
from replays.samples import sample_path

AGAINST = ("hold", "favourite", "random")
STAKES = ("100", "150", "200", "250", "300", "350", "450", "500", "550", "600")


def _plan(settings: int, starts: int) -> SweepPlan:
    source = TapeSource.load(sample_path())
    sundays = sunday_configs(source.tape, {"hold": "hold"}, universe=500)
    chosen = [p.config.start for p in default_plans(source.tape, sundays)][:starts]
    grid = (("stake", STAKES[:settings]),)
    return plan_sweep("favourite", grid, list(AGAINST), source, chosen)


def _cpu() -> float:
    return time.process_time()


def _engines(plan: SweepPlan, jobs: int, folder: Path) -> dict[str, Any]:
    import ray

    runs = len(plan.cohorts())
    began = time.perf_counter()
    local = run_sweep(plan, folder / "local.db", RunOptions(jobs=jobs))
    local_s = time.perf_counter() - began
    began = time.perf_counter()
    started = not ray.is_initialized()  # a test session's instance is used as it is
    if started:
        ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False,
                 configure_logging=False, _node_ip_address="127.0.0.1")  # fmt: skip
    ray_start_s = time.perf_counter() - began
    try:
        began = time.perf_counter()
        # the engine uses the instance this process has: the start is not in its time
        on_ray = run_sweep(plan, folder / "ray.db", RunOptions(engine="ray", jobs=jobs))
        ray_s = time.perf_counter() - began
    finally:
        if started:
            ray.shutdown()
    return {
        "cohort_runs": runs,
        "jobs": jobs,
        "local_seconds": round(local_s, 2),
        "ray_seconds": round(ray_s, 2),
        "ray_start_seconds": round(ray_start_s, 2),
        "ray_overhead_pct": round((ray_s / local_s - 1) * 100, 1),
        "target_overhead_pct": 20,
        "same_digest": local.digest == on_ray.digest,
    }


def _extra_setting(starts: int, folder: Path) -> dict[str, Any]:
    one, two = _plan(1, starts), _plan(2, starts)
    began = _cpu()
    run_sweep(one, folder / "one.db", RunOptions(jobs=1))
    one_cpu = _cpu() - began
    began = _cpu()
    run_sweep(two, folder / "two.db", RunOptions(jobs=1))
    two_cpu = _cpu() - began
    tape = two.source.tape
    setting = two.settings[1]
    alone = [c for c in two.cohorts() if set(c.config.agents) == {setting.name}]
    began = _cpu()
    recordings = [record_cohort(tape, c.config, c.plan) for c in alone]
    alone_cpu = (_cpu() - began) / len(alone)
    agents = {setting.name: setting.spec, **two.against}
    shared = [(c.config.model_copy(update={"agents": agents}), c.plan) for c in alone]
    began = _cpu()
    for config, plan in shared:
        record_cohort(tape, config, plan)
    unshared_cpu = (_cpu() - began) / len(shared)
    with EventStore.open(folder / "deliver.db") as store:
        began = _cpu()  # the append pipeline's thread is in this process: counted too
        for recorded in recordings:
            deliver(store, recorded)
        deliver_s = (_cpu() - began) / len(recordings)
    extra = (two_cpu - one_cpu) / starts
    return {
        "extra_setting_cpu_s_per_start": round(extra, 4),
        "setting_cohort_run_cpu_s": round(alone_cpu, 4),
        "unshared_cohort_run_cpu_s": round(unshared_cpu, 4),
        "extra_setting_in_cohort_runs": round(extra / alone_cpu, 2),
        "target_in_cohort_runs": 1,
        "events_per_cohort_run": round(sum(len(r.events) for r in recordings) / len(recordings)),
        "driver_append_cpu_s_per_cohort_run": round(deliver_s, 4),
        "recording_bytes_per_cohort_run": round(
            sum(len(pickle.dumps(r, protocol=5)) for r in recordings) / len(recordings)
        ),
    }


def estimate(figures: dict[str, Any], runs: int = 10_000, nodes: int = 16,
             cores: int = 16, gbit: float = 1.0) -> dict[str, Any]:  # fmt: skip
    """A sweep of ``runs`` cohort-runs on ``nodes`` nodes of ``cores`` CPUs: the workers'
    share (CPU per cohort-run over every core, which assumes the cohort-runs are like these),
    the driver's (it appends every recording alone, at the rate measured here), and the
    network's (every recording to the driver at ``gbit``); they overlap, so the sweep takes
    about the largest, plus the cluster's start."""
    workers = runs * figures["setting_cohort_run_cpu_s"] / (nodes * cores)
    driver = runs * figures["driver_append_cpu_s_per_cohort_run"]
    network = runs * figures["recording_bytes_per_cohort_run"] / (gbit * 125e6)
    return {
        "estimate_cohort_runs": runs,
        "estimate_nodes_x_cores": f"{nodes} x {cores}",
        "estimate_workers_s": round(workers, 1),
        "estimate_driver_s": round(driver, 1),
        "estimate_network_s": round(network, 1),
        "estimate_total_s": round(max(workers, driver, network), 1),
        "estimate_bound_by": max(
            ("workers", workers), ("driver", driver), ("network", network), key=lambda x: x[1]
        )[0],
    }


def bench_sweep(settings: int = 7, starts: int = 25, jobs: int = 0) -> dict[str, Any]:
    jobs = jobs or os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        figures = _engines(_plan(settings, starts), jobs, folder)
        figures |= _extra_setting(min(starts, 10), folder)
    return figures | estimate(figures)
