"""How fast a big closed log is read: the report (restore + tail), the full fold of ``verify``.

The log is the rebuild benchmark's (five agents, 200 markets, the real broker), with a snapshot
every ``SNAPSHOT_EVERY`` events and closed with a ``CohortClosed`` and its closing snapshot, as
a replay writes a long cohort. Timed, on the same
file, best of ``repeats``:

* ``report``: ``ledger.restore.load``, what ``arena report`` reads through: the newest snapshot
  checked and restored, the tail (empty for a closed cohort) link-checked and folded, the head
  compared. ``events_per_s_equivalent`` is the log's events over that time.
* ``verify``: ``arena.verify.log.verify_store``, the whole chain, the checking fold from the first
  event, every snapshot against it; ``ranges`` are the seq ranges it was cut into (the last
  checked in the process, the others in children, whose CPU is ``children_cpu_seconds``).
* ``rebuild``: the plain fold of every event, for comparison.
* ``report_command``: ``arena report DB`` in a fresh process, start-up included (the figure a
  person waits for; ``report`` above is the restore alone).

It also reports the snapshot's size and what snapshots add to the file, beside the events'.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arena.bench.rebuild_bench import make_log
from arena.verify.log import plan, verify_store
from arena.verify.ranges import positions_of
from ledger.anchor import write_head
from ledger.events import CohortClosed
from ledger.rebuild import rebuild
from ledger.restore import load
from ledger.snapshot import FORMAT, encode_state
from ledger.store import EventStore
from ledger.stream import SNAPSHOT_EVERY

COHORT = "bench-rebuild"


def _best(work: Callable[[], object], repeats: int) -> tuple[float, float, float, float]:
    """(best wall seconds, median wall seconds, CPU seconds of the best run in this process
    and in the child processes it waited for: ``verify`` checks the chain in children)."""
    runs = []
    for _ in range(max(1, repeats)):
        began, cpu, children = time.perf_counter(), time.process_time(), _children_cpu()
        work()
        runs.append(
            (
                time.perf_counter() - began,
                time.process_time() - cpu,
                _children_cpu() - children,
            )
        )
    best = min(runs)
    return best[0], statistics.median(w for w, _, _ in runs), best[1], best[2]


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def bench_reads(n_events: int = 1_000_000, repeats: int = 3) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "reads.db"
        with EventStore.open(path) as store:
            made, live = make_log(store, n_events, snapshot_every=SNAPSHOT_EVERY)
            closed = CohortClosed(
                cohort=COHORT, ts=10**9, reason="bench", state_digest=live.digest()
            )
            live.apply(closed)
            version = store.append(COHORT, [closed])
            periodic = len(store.snapshots())
            image = encode_state(live)
            store.add_snapshot(COHORT, version, image, fmt=FORMAT, closing=True)
            write_head(store)
            snapshot_bytes = store.snapshot_bytes()
        total_bytes = _file_bytes(path)  # closed: the WAL is checkpointed into the file
        made += 1
        figures: dict[str, Any] = {"events": made}
        with EventStore.open(path, readonly=True) as store:
            for name, work in (
                ("report", lambda: load(store)),
                ("verify", lambda: verify_store(store)),
                ("rebuild", lambda: rebuild(store)),
            ):
                seconds, median, cpu, children = _best(work, repeats)
                figures[name] = {
                    "seconds": round(seconds, 4),
                    "median_seconds": round(median, 4),
                    "cpu_seconds": round(cpu, 4),
                    "children_cpu_seconds": round(children, 4),
                    ("events_per_s_equivalent" if name == "report" else "events_per_s"): round(
                        made / seconds
                    ),
                }
            figures["report_command"] = _report_command(path, repeats)
            restored = load(store).ledger.cohorts[COHORT]
            snapshots = store.snapshots()
            figures["verify"]["ranges"] = plan(
                store,
                snapshots,
                positions_of(store, snapshots),
                store.last_seq(),
                os.cpu_count() or 1,
            )  # the last in this process, the others in child processes
    if restored.digest() != live.digest():
        raise RuntimeError("bench reads: the restored state differs from the live state")
    events_bytes = total_bytes - snapshot_bytes
    figures["snapshot"] = {
        "closing_bytes": len(image),
        "periodic_snapshots": periodic,
        "all_snapshots_bytes": snapshot_bytes,
        "brier_rows": sum(len(b.brier_rows) for b in live.books.values()),
        "log_mb_per_million_events": round(total_bytes / made, 1),
        "snapshot_growth_pct": round(100 * snapshot_bytes / events_bytes, 2),
    }
    return figures


def _report_command(path: Path, repeats: int) -> dict[str, float]:
    """``arena report DB`` as a person runs it, in a fresh process each time: start-up and
    imports, the checked restore, the model-usage read (the log's index of model calls) and
    the tables. Best of ``repeats`` by CPU, the child's own."""
    runs = []
    for _ in range(max(1, repeats)):
        began, cpu = time.perf_counter(), _children_cpu()
        done = subprocess.run(
            [sys.executable, "-c", "from arena.cli import main; main()", "report", str(path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"bench reads: arena report failed: {done.stderr.strip()}")
        runs.append((_children_cpu() - cpu, time.perf_counter() - began))
    cpu, seconds = min(runs)
    return {"cpu_seconds": round(cpu, 4), "seconds": round(seconds, 4)}


def _file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.suffix != ".head")
