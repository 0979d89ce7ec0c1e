"""How fast ``arena step`` opens a log and answers a key, as a person at a terminal sees it.

The logs are the rebuild benchmark's (``make_log``: the real broker, a decision per agent per
step, a mark every 50 steps), written to SQLite as a replay writes them: a snapshot every
``SNAPSHOT_EVERY`` events and, closed, a closing snapshot.

* ``redraw``: 500 markets and 20 agents. The real program (``arena step DB``) runs on a
  pseudo-terminal of 200×50 (``arena.bench.pty_terminal``); each figure is from writing a key
  to the end of the frame it caused (the synchronized-output mark a terminal paints on), for
  keys that move to the next decision, the next decision of the agent, back, and switch
  agent; ``settled`` is to the last frame before the screen went quiet. ``cpu`` is the
  program's CPU time over the same span (all its threads, from the kernel's counts). An
  earlier version timed Textual's test pilot instead: its ``press`` and ``pause`` wait for
  the process to look idle, 20 ms sleeps at a time, so a key bound to nothing "took" 66 ms.
  ``view`` is the projection alone (``build_view``, in this process) at cuts past the middle.
* ``live``: a live replay of the embedded sample (four built-in agents) stepped to each next
  decision instant, as ``arena step`` without a DB steps it (``bench_live``).
* ``step_back``: 1 M events, 200 markets, 5 agents. ``open`` is ``arena step DB`` to its first
  screen (the real program on a pseudo-terminal: the wall time, and its CPU time, Python's
  start and imports included), and in this process the scan that indexes the log
  (``open_timeline``) and the first view. ``to_end`` is the view at the end (the
  closing snapshot). ``cold`` is the view at decisions picked at random before any warm-up
  (restored from the log's snapshots and folded from there), ``back_through_a_walk`` the
  step-back key after a jump and a walk of 200 decisions forward, before any warm-up (each
  view built afresh), ``warm_up`` (on the log opened again, so none of it was done by the
  jumps before) the CPU time the
  app spends between keys laying down a checkpoint every ``CHECKPOINT_EVERY`` events, and
  ``to_any_decision`` the view at decisions picked at random across the log, in random
  order, after it: restore the nearest checkpoint, fold the rest, build the view. Every fold
  of the timeline moves what it keeps out of Python's full collections (``gc.freeze``).

Keys: ``d`` next decision (any agent), ``n`` this agent's next, ``p`` back (to the cut shown
before, a view the app still holds), ``a`` the next agent at the same cut.

Each figure is given twice: ``cpu`` is CPU time, which other work on a shared machine
disturbs least; ``wall`` is the time a person waits, which on a loaded machine includes
waiting for a core. Best and median of the samples, and the worst.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from arena.bench.pty_terminal import Press, PtyTerminal
from arena.bench.rebuild_bench import make_log
from arena.step.log import open_timeline
from arena.step.timeline import CHECKPOINT_EVERY, LogTimeline, Stop
from arena.step.view import build_view
from ledger.events import CohortClosed
from ledger.snapshot import FORMAT, encode_state
from ledger.store import EventStore
from ledger.stream import SNAPSHOT_EVERY

COHORT = "bench-rebuild"
WALK = 200
"""Decisions walked forward before stepping back through them (``bench_step_back``)."""


def _write_log(path: Path, n_events: int, markets: int, agents: Sequence[str]) -> int:
    """A closed cohort of at least ``n_events`` events at ``path``, with the snapshots a replay
    leaves (periodic, and the closing one); the number of events."""
    with EventStore.open(path) as store:
        made, live = make_log(store, n_events, markets=markets, agents=agents,
                              snapshot_every=SNAPSHOT_EVERY)  # fmt: skip
        closed = CohortClosed(cohort=COHORT, ts=10**9, reason="bench", state_digest=live.digest())
        live.apply(closed)
        version = store.append(COHORT, [closed])
        store.add_snapshot(COHORT, version, encode_state(live), fmt=FORMAT, closing=True)
    return made + 1


def _timed(samples: list[tuple[float, float]]) -> dict[str, dict[str, float]]:
    """``cpu`` and ``wall`` figures of (cpu, wall) samples."""
    return {
        "cpu": _figures([cpu for cpu, _ in samples]),
        "wall": _figures([wall for _, wall in samples]),
    }


class Clock:
    """CPU and wall time since it started."""

    def __init__(self) -> None:
        self.cpu, self.wall = time.process_time(), time.perf_counter()

    def read(self) -> tuple[float, float]:
        return time.process_time() - self.cpu, time.perf_counter() - self.wall


def _figures(samples: list[float]) -> dict[str, float]:
    return {
        "best_ms": round(min(samples) * 1e3, 2),
        "median_ms": round(statistics.median(samples) * 1e3, 2),
        "worst_ms": round(max(samples) * 1e3, 2),
        "samples": len(samples),
    }


def _terminal(db: Path) -> PtyTerminal:
    """``arena step DB`` as a person runs it, on a terminal of 200×50."""
    program = [sys.executable, "-c", "from arena.cli import main; main()"]
    return PtyTerminal([*program, "step", str(db)], size=(200, 50))


def bench_redraw(
    markets: int = 500, agents: int = 20, presses: int = 40, n_events: int = 40_000
) -> dict[str, Any]:
    names = [f"agent{i:02d}" for i in range(agents)]
    keys = ["d", "n", "p", "a"]
    pressed: dict[str, list[Press]] = {key: [] for key in keys}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "step.db"
        made = _write_log(db, n_events, markets, names)
        with _terminal(db) as terminal:
            opened = terminal.first_screen(), terminal.cpu()
            for i in range(presses):
                key = keys[i % len(keys)]
                pressed[key].append(terminal.press(key))
        with EventStore.open(db, readonly=True) as store:
            line = open_timeline(store, COHORT)
            half = len(line.events) // 2
            cuts = [s.cut for s in line.stops if s.kind == "decision" and s.cut > half][:presses]
            viewed = []
            for cut in cuts:
                clock = Clock()
                build_view(line, cut, names[0])
                viewed.append(clock.read())
    every = [p for samples in pressed.values() for p in samples]
    return {
        "markets": markets,
        "agents": agents,
        "events": made,
        "open_to_first_screen_s": round(opened[0], 2),
        "open_to_first_screen_cpu_s": round(opened[1], 2),
        "key_to_screen": _pressed(every),
        **{f"key_{key}_to_screen": _pressed(samples) for key, samples in pressed.items()},
        "view": _timed(viewed),
    }


def _pressed(presses: list[Press]) -> dict[str, Any]:
    """Key-to-frame figures: the first frame (``wall``), the last (``settled``), the CPU."""
    return {
        "wall": _figures([p.first_frame for p in presses]),
        "settled": _figures([p.settled for p in presses]),
        "cpu": _figures([p.cpu for p in presses]),
        "frames": max(p.frames for p in presses),
    }


def bench_step_back(n_events: int = 1_000_000, samples: int = 40, seed: int = 0) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "step.db"
        made = _write_log(db, n_events, 200, ("alpha", "bravo", "charlie", "delta", "echo"))
        with _terminal(db) as terminal:
            first_screen = terminal.first_screen(), terminal.cpu()
        with EventStore.open(db, readonly=True) as store:
            clock = Clock()
            line = open_timeline(store, COHORT)
            scanned = clock.read()
            build_view(line, line.next_stop(0, "decision", "alpha"), "alpha")
            opened = clock.read()
            clock = Clock()
            build_view(line, len(line.events), "alpha")
            to_end = clock.read()
            decisions = [s for s in line.stops if s.kind == "decision"]
            rng = random.Random(seed)
            cold = [_view_at(line, stop) for stop in rng.sample(decisions, min(5, len(decisions)))]
            back = _walk_back(line, decisions, rng)
            line = open_timeline(store, COHORT)  # the warm-up timed from the open, whole
            clock = Clock()
            while line.warm():
                pass
            warm_up = clock.read()
            picks = rng.sample(decisions, min(samples, len(decisions)))
            anywhere = [_view_at(line, stop) for stop in picks]
    return {
        "events": made,
        "checkpoint_every": CHECKPOINT_EVERY,
        "snapshot_every": SNAPSHOT_EVERY,
        "open": {
            "to_first_screen_s": round(first_screen[0], 2),
            "to_first_screen_cpu_s": round(first_screen[1], 2),
            "scan_cpu_s": round(scanned[0], 2),
            "scan_and_first_view_cpu_s": round(opened[0], 2),
            "scan_and_first_view_wall_s": round(opened[1], 2),
        },
        "to_end": {"cpu_ms": round(to_end[0] * 1e3, 1), "wall_ms": round(to_end[1] * 1e3, 1)},
        "cold": _timed(cold),
        "warm_up": {"cpu_s": round(warm_up[0], 2), "wall_s": round(warm_up[1], 2)},
        "back_through_a_walk": _timed(back),
        "to_any_decision": _timed(anywhere),
    }


def _walk_back(
    line: LogTimeline, decisions: list[Stop], rng: random.Random
) -> list[tuple[float, float]]:
    """Before any warm-up: a jump to a random decision past the middle of the log, then
    ``WALK`` decisions forward, then the step-back key through all of them, each view built
    afresh (the app keeps the last 64; here none): what "back" costs wherever a person has
    walked, the figures of the steps back."""
    walk = min(WALK, len(decisions) // 2)
    start = rng.randrange(len(decisions) // 2, len(decisions) - walk + 1)
    walked = decisions[start : start + walk]
    for stop in walked:
        build_view(line, stop.cut, stop.agent)
    return [_view_at(line, stop) for stop in reversed(walked[:-1])]


def _view_at(line: LogTimeline, stop: Stop) -> tuple[float, float]:
    clock = Clock()
    build_view(line, stop.cut, stop.agent)
    return clock.read()


def bench_live(
    agents: Sequence[str] = ("favourite", "contrarian", "random", "hold"),
) -> dict[str, Any]:
    """A live replay of the embedded sample stepped decision by decision, as ``arena step``
    without a DB does: ask the replay's process for the next decision, read the log up to the
    version it reports, extend the timeline and project the view. ``cpu`` is this process's
    share (reading and projecting); the replay's own work is in ``wall``."""
    from arena.run.cohort import CohortConfig
    from arena.step.live import LiveRun, LogTail
    from replays.samples import sample_path

    config = CohortConfig(
        start=datetime(2024, 9, 1, tzinfo=UTC), agents={name: name for name in agents}
    )
    steps: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        clock = Clock()
        run = LiveRun(sample_path(), config, Path(tmp) / "live.db")
        try:
            tail = LogTail(run.db, run.cohort)
            line = LogTimeline(tail.read(run.advance("open").version), run.cohort)
            started = clock.read()
            while not run.closed:
                clock = Clock()
                line.extend(tail.read(run.advance("decision").version))
                build_view(line, len(line.events), agents[0])
                steps.append(clock.read())
        finally:
            run.stop()
    return {
        "agents": len(agents),
        "events": len(line.events),
        "start_s": {"cpu": round(started[0], 2), "wall": round(started[1], 2)},
        "step": _timed(steps),
    }
