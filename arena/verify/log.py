"""``arena verify``: prove a log was not altered, cut or extended, and that it rebuilds exactly.

The checks, each of which names the first bad sequence number:

* the hash chain: any edited, inserted or deleted row breaks a link;
* a checking fold, which replays every event against the state built from the ones before it:
  a fill must start from the cash the log implies, a sale or payout must find the position it
  names, nothing may follow a cohort's close, and a closed cohort must rebuild to the state
  digest its run recorded at the close;
* every stored snapshot: whole, at a position that still holds the event and chain hash it was
  taken at, and byte for byte the image of this fold at that position. Closing snapshots are
  the per-cohort closing records: a log cut before one, or re-chained under it, fails here;
* the head (``--head``, or the one recorded beside the log): nothing cut off, nothing appended.

Cohorts that never closed are named (an interrupted replay leaves one; so does a cut).
"""

from __future__ import annotations

import os
import subprocess
import sys
from bisect import bisect_right
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import pairwise

import msgspec

from arena.verify.ranges import (
    Outcome,
    Position,
    RangeAnswer,
    check_links,
    check_position,
    check_range,
    positions_of,
)
from ledger.anchor import format_head, head_problem, read_head
from ledger.chain import stream_spans
from ledger.errors import IntegrityError
from ledger.projection import CohortState
from ledger.snapshot import FORMAT, Snapshot, SnapshotError, encode_state
from ledger.store import EventStore


@dataclass(frozen=True)
class VerifyResult:
    events: int
    cohorts: int
    closed: int
    snapshots: int
    open_cohorts: list[str]
    head: str  # the log's head as SEQ:HASH
    head_source: str | None  # what the head was checked against ("--head", the file), if any
    unsaved: dict[str, CohortState]  # the fold's states that no stored snapshot holds


def write_snapshots(store: EventStore, result: VerifyResult) -> int:
    """Add the snapshots a log lacks, from a verified fold, without touching an event: a
    closing snapshot for every closed cohort without one, and one at the end of every open
    cohort. Returns how many were written (a log written before snapshots gets them all)."""
    have = {(s.stream, s.version) for s in store.snapshots()}
    written = 0
    for name, state in sorted(result.unsaved.items()):
        version = store.stream_version(name)
        if (name, version) not in have:
            written += store.add_snapshot(
                name, version, encode_state(state), fmt=FORMAT, closing=state.closed is not None
            )
    return written


def verify_store(
    store: EventStore, head: str | None = None, *, parts: int | None = None
) -> VerifyResult:
    """Raise IntegrityError(seq=first bad event) if the log is not what the runs wrote.

    The log is read once: each page's links are checked and its events folded (see
    :mod:`arena.verify.ranges`). A log big enough to pay for starting a process is cut into
    seq ranges at snapshots that no other stream runs across, one range per core: this process
    checks the last, child processes the others, and SQLite's check of the file's structure
    runs on a thread of its own (it releases the GIL). Faults are reported by kind, the most
    basic first: a damaged file, then a broken chain, then what the fold found, each at the
    earliest seq any range names. ``parts`` caps the ranges (default: the machine's cores).
    """
    snapshots = store.snapshots()
    last_seq = store.last_seq()
    positions = positions_of(store, snapshots)
    parts = parts or os.cpu_count() or 1
    ranges = plan(store, snapshots, positions, last_seq, parts)
    # a big log that cannot be cut: the chain in a child beside the fold here, as a whole
    apart = len(ranges) == 1 and parts > 1 and last_seq >= PARALLEL_FROM
    with _damage_checker(store, last_seq) as damage:
        children = [(a, t, _start(store, a, t)) for a, t in ranges[:-1]]
        links = _start(store, 0, last_seq, "--links") if apart else None
        own = check_range(store, *ranges[-1], snapshots, positions, last_seq, links=not apart)
        results = [own.outcome()]
        for after, through, child in children:  # in log order, before this process's range
            here = partial(_range_here, store, after, through, snapshots, positions, last_seq)
            results.insert(-1, _answer(child, here))
        if apart:
            results.append(_answer(links, partial(check_links, store, 0, last_seq)))
        found = damage()
    if found is not None:
        raise IntegrityError(f"{store.path}: the SQLite file is damaged: {found}")
    for kind in ("chain_fault", "fold_fault"):
        faults = [f for r in results if (f := getattr(r, kind)) is not None]
        if faults:
            raise min(faults, key=lambda f: f.seq or 0).error()
    ends: dict[str, bool] = {}  # every cohort, and whether it closed
    unsaved: dict[str, CohortState] = {}
    for result in results:  # in log order: a later range's state of a cohort is its last
        ends.update(result.ends)
        unsaved = {n: s for n, s in unsaved.items() if n not in result.ends} | result.unsaved
    checked = sum(r.checked for r in results)
    for snapshot in snapshots:
        if snapshot.seq > checked or snapshot.stream not in ends:  # the fold never got there:
            check_position(store, snapshot, positions[snapshot.seq][0], checked)  # names why
    expected, source = (head, "--head") if head else (read_head(store.path), "head file")
    if expected:
        problem = head_problem(store, expected)
        if problem:
            raise IntegrityError(f"{store.path}: {problem} ({source})", store.head()[0])
    return VerifyResult(
        events=checked,
        cohorts=len(ends),
        closed=sum(r.closed for r in results),
        snapshots=len(snapshots),
        open_cohorts=sorted(n for n, closed in ends.items() if not closed),
        head=format_head(*store.head()),
        head_source=source if expected else None,
        unsaved=dict(sorted(unsaved.items())),
    )


PARALLEL_FROM = 200_000
"""Events from which the log is checked in ranges, a process each, and the file's structure on
a thread: starting a process costs about 0.1-0.2 s, what checking 50k events costs."""
MIN_RANGE = 100_000
"""The fewest events a range is cut to (a child process must be worth its start)."""
DAMAGE_SHARE = 0.11
"""SQLite's integrity check, which runs in this process beside its range, in events' worth:
0.7 of the 6.4 CPU-s a million events cost (``arena bench reads``); this process's range is
cut that much shorter."""


def plan(
    store: EventStore,
    snapshots: list[Snapshot],
    positions: dict[int, Position],
    last_seq: int,
    parts: int,
) -> list[tuple[int, int]]:
    """``(after, through)`` seq ranges covering the log, at most ``parts``, cut only after an
    event that has a usable snapshot (whole, of this format, where it says) and that no
    other stream runs across, as near to equal work as such cuts allow. One range for a small
    log, or where there is no such cut (cohorts written side by side without snapshots)."""
    if last_seq < PARALLEL_FROM or parts < 2:
        return [(0, last_seq)]
    keys = store.stream_keys()
    by_id = stream_spans(store)
    spans = {keys[sid]: span for sid, span in by_id.items() if sid in keys}
    firsts = sorted(first for first, _ in by_id.values())
    lasts = sorted(last for _, last in by_id.values())
    cuts: list[int] = []
    for snapshot in snapshots:
        seq = snapshot.seq
        first, last = spans.get(snapshot.stream, (0, 0))
        across = bisect_right(firsts, seq) - bisect_right(lasts, seq)  # first <= seq < last
        if (
            MIN_RANGE <= seq <= last_seq - MIN_RANGE
            and across <= 1
            and (across == 0 or first <= seq < last)  # the one across is the snapshot's
            and snapshot.intact()
            and snapshot.format == FORMAT
            and positions[seq][0] == (snapshot.stream, snapshot.version, snapshot.chain_hash)
        ):
            cuts.append(seq)
    chosen: list[int] = []
    share = last_seq * (1 + DAMAGE_SHARE) / parts  # this process also runs SQLite's check
    for k in range(1, parts):
        target = min(share * k, last_seq)
        near = min(cuts, key=lambda seq: abs(seq - target), default=None)
        if near is not None and all(abs(near - c) >= MIN_RANGE for c in [0, *chosen]):
            chosen.append(near)
    bounds = [0, *sorted(chosen), last_seq]
    return list(pairwise(bounds))


def _start(
    store: EventStore, after: int, through: int, *flags: str
) -> subprocess.Popen[bytes] | None:
    """A child process checking one range (None if it cannot be started). Plain subprocesses
    rather than ``multiprocessing``, so it works the same from the CLI, a script without a
    ``__main__`` guard, or a notebook."""
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "arena.verify.ranges", str(store.path), str(after),
             str(through), *flags],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
    except OSError:
        return None


def _range_here(
    store: EventStore,
    after: int,
    through: int,
    snapshots: list[Snapshot],
    positions: dict[int, Position],
    last_seq: int,
) -> Outcome:
    """A child's range, checked in this process: what the child would have answered."""
    continued = next((s.stream for s in snapshots if s.seq == through), None)
    result = check_range(store, after, through, snapshots, positions, last_seq)
    return result.outcome(continued)


def _answer(child: subprocess.Popen[bytes] | None, here: Callable[[], Outcome]) -> Outcome:
    """The child's answer; a range whose child could not run or answer is checked ``here``
    instead: slower, never skipped."""
    if child is not None:
        out, _ = child.communicate()
        try:
            return msgspec.msgpack.decode(out, type=RangeAnswer).outcome()
        except (msgspec.MsgspecError, SnapshotError):
            pass
    return here()


@contextmanager
def _damage_checker(store: EventStore, last_seq: int) -> Iterator[Callable[[], str | None]]:
    """A function that returns SQLite's first complaint about the file (``EventStore.damage``)
    or None; for a big log it runs on a thread with a connection of its own, since SQLite
    releases the GIL while it walks the file (0.7 CPU-s for a million events)."""
    if last_seq < PARALLEL_FROM:
        yield store.damage
        return

    def check() -> str | None:
        with EventStore.open(store.path, readonly=True) as own:
            return own.damage()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify-damage") as worker:
        found = worker.submit(check)
        yield found.result
