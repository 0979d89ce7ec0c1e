"""``python -m ledger.chain DB``: check a log's hash chain in a process of its own.

``arena verify`` starts this beside its checking fold, so on two cores the chain (a sha256 per
row, which holds the GIL) costs no time of its own. A plain subprocess rather than
``multiprocessing``, so it works the same from the CLI, a script without a ``__main__`` guard,
or a notebook. It prints one JSON object: ``{"checked": N}`` or ``{"error": ..., "seq": ...}``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

from ledger.errors import IntegrityError, LedgerError
from ledger.store import EventStore


def start(store: EventStore) -> Callable[[], int]:
    """Start checking ``store``'s chain in a child process; the returned function waits for it
    and returns the links checked, or raises its IntegrityError. If the child cannot run, the
    chain is checked here instead: slower, never skipped."""
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "ledger.chain", str(store.path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return store.verify_chain

    def result() -> int:
        out, _ = child.communicate()
        try:
            answer = json.loads(out)
        except ValueError:
            return store.verify_chain()
        if "checked" in answer:
            return int(answer["checked"])
        if answer.get("seq") is not None:
            raise IntegrityError(answer["error"], answer["seq"])
        raise LedgerError(answer["error"])

    return result


def main() -> None:
    try:
        with EventStore.open(sys.argv[1], readonly=True) as store:
            answer: dict[str, object] = {"checked": store.verify_chain()}
    except IntegrityError as exc:
        answer = {"error": str(exc), "seq": exc.seq}
    except LedgerError as exc:
        answer = {"error": str(exc), "seq": None}
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
