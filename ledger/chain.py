"""``python -m ledger.chain DB [AFTER THROUGH]``: check a log's hash chain in processes of its own

``arena verify`` starts these beside its checking fold, so the chain (a sha256 per row, which
holds the GIL, and about 3 CPU-us an event with the read) costs little wall time of its own.
The log is cut into seq ranges checked in parallel, one process each: a link is checked from
its stored predecessor, so ranges need nothing from each other (see
:meth:`ledger.store.EventStore.verify_chain`). Plain subprocesses rather than
``multiprocessing``, so it works the same from the CLI, a script without a ``__main__`` guard,
or a notebook. Each prints one JSON object: ``{"checked": N}`` or ``{"error": ..., "seq": ...}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from itertools import pairwise

from ledger.errors import IntegrityError, LedgerError
from ledger.store import EventStore

MIN_RANGE = 100_000
"""Events below which a range is not worth a process of its own (starting one costs 0.1 s)."""


def ranges(last_seq: int, parts: int) -> list[tuple[int, int]]:
    """``(after, through)`` seq ranges that cover ``1..last_seq`` in at most ``parts`` pieces of
    at least ``MIN_RANGE`` events each (one piece for a small log)."""
    parts = max(1, min(parts, last_seq // MIN_RANGE))
    cuts = [last_seq * i // parts for i in range(parts + 1)]
    return list(pairwise(cuts))


def start(store: EventStore, parts: int | None = None) -> Callable[[], int]:
    """Start checking ``store``'s chain in child processes, one per range (as many as there
    are cores by default); the returned function waits for them and returns the links checked,
    or raises the IntegrityError of the earliest bad seq. A range whose child cannot run is
    checked here instead: slower, never skipped."""
    pieces = ranges(store.last_seq(), parts or os.cpu_count() or 1)
    children: list[tuple[tuple[int, int], subprocess.Popen[bytes] | None]] = []
    for after, through in pieces:
        try:
            child: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-m", "ledger.chain", str(store.path), str(after), str(through)],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            child = None
        children.append(((after, through), child))

    def result() -> int:
        checked = 0
        errors: list[IntegrityError] = []
        for (after, through), child in children:
            try:
                checked += _answer(store, after, through, child)
            except IntegrityError as exc:
                errors.append(exc)
        if errors:
            raise min(errors, key=lambda e: e.seq if e.seq is not None else 0)
        return checked

    return result


def _answer(
    store: EventStore, after: int, through: int, child: subprocess.Popen[bytes] | None
) -> int:
    if child is None:
        return store.verify_chain(after, through)
    out, _ = child.communicate()
    try:
        answer = json.loads(out)
    except ValueError:
        return store.verify_chain(after, through)
    if "checked" in answer:
        return int(answer["checked"])
    if answer.get("seq") is not None:
        raise IntegrityError(answer["error"], answer["seq"])
    raise LedgerError(answer["error"])


def main() -> None:
    after, through = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (0, None)
    try:
        with EventStore.open(sys.argv[1], readonly=True) as store:
            answer: dict[str, object] = {"checked": store.verify_chain(after, through)}
    except IntegrityError as exc:
        answer = {"error": str(exc), "seq": exc.seq}
    except LedgerError as exc:
        answer = {"error": str(exc), "seq": None}
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
