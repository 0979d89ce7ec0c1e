"""Reading a log for people: restore each cohort's newest snapshot, check, fold only the tail.

This is what ``report``, ``step`` and ``export`` read through. A closed cohort with its closing
snapshot costs one small JSON decode instead of a fold of all its events; a cohort still open
folds the events after its newest snapshot; a log written before snapshots folds everything.

What is checked on the way, cheaply (``arena verify`` checks everything):

* a snapshot is used only if its row is whole, its position in the log still holds the event
  and chain hash it was taken at, its format is this arena's, and, for a closing snapshot, its
  state has the digest the cohort's ``CohortClosed`` event recorded (that event is in the
  chain, so the snapshot cannot be edited without the chain noticing);
* every event folded links to its stored predecessor (``ledger.chain.check_links``): an edited
  payload, a deleted or an inserted row stops the read with the seq where it is;
* the head recorded beside the log (``ledger.anchor``) is still the log's head.

An unusable snapshot is not an error: the cohort is folded from the log instead and the read
carries one note saying so. A broken chain is an error (IntegrityError), because then nothing
the log says can be trusted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ledger.anchor import head_problem, read_head
from ledger.chain import check_links
from ledger.errors import LedgerError
from ledger.projection import CohortState, Ledger
from ledger.rebuild import rebuild
from ledger.snapshot import Snapshot, SnapshotError, decode_state
from ledger.store import EventStore


@dataclass
class Loaded:
    """A checked read: the projections, and how they were reached."""

    ledger: Ledger
    restored: list[str] = field(default_factory=list)  # cohorts that started from a snapshot
    checked: int = 0  # events whose chain links were checked and then folded
    unusable: list[str] = field(default_factory=list)  # why each skipped snapshot was skipped
    head: str | None = None  # why the log does not end at its recorded head, if it does not

    def note(self) -> str | None:
        """One line for the user when something was not as it should be; None when all was."""
        parts = []
        if self.unusable:
            more = f" (and {len(self.unusable) - 1} more)" if len(self.unusable) > 1 else ""
            parts.append(f"{self.unusable[0]}{more}; folded the log instead, so the figures stand")
        if self.head:
            parts.append(f"head check: {self.head}")
        return "; ".join(parts) + "; run 'arena verify'" if parts else None


def usable_state(store: EventStore, snapshot: Snapshot) -> CohortState:
    """The state a snapshot holds, if it may be trusted at its position; else SnapshotError
    saying why (the caller names the snapshot)."""
    if not snapshot.intact():
        raise SnapshotError("damaged (its hash does not match its contents)")
    at = store.event_at(snapshot.seq)
    if at is None:
        raise SnapshotError(f"taken at seq {snapshot.seq}, which the log no longer holds")
    stream, version, chain_hash = at
    if (stream, version, chain_hash) != (snapshot.stream, snapshot.version, snapshot.chain_hash):
        raise SnapshotError(f"the event at seq {snapshot.seq} is not the one it was taken after")
    state = decode_state(snapshot.state)
    if state.cohort != snapshot.stream:
        raise SnapshotError(f"holds cohort {state.cohort}, not {snapshot.stream}")
    if snapshot.closing and (state.closed is None or state.digest() != state.closed.state_digest):
        raise SnapshotError("its state is not the one the cohort recorded at its close")
    return state


def load(store: EventStore, streams: Iterable[str] | None = None, *, check: bool = True) -> Loaded:
    """The projections of the given cohorts (all by default), from their newest usable
    snapshots and the events after them. With ``check`` (the default) the folded events' chain
    links and the recorded head are checked too; IntegrityError names the first bad seq, and a
    log whose events do not fold (a fill for an agent never opened, say) is a LedgerError."""
    names = store.streams() if streams is None else list(streams)
    wanted = set(names)
    newest = {s.stream: s for s in store.snapshots(latest=True) if s.stream in wanted}
    start: dict[str, tuple[CohortState, int]] = {}
    unusable: list[str] = []
    for name in names:
        snapshot = newest.get(name)
        if snapshot is None:
            continue
        try:
            start[name] = (usable_state(store, snapshot), snapshot.version)
        except SnapshotError as exc:
            unusable.append(f"{snapshot.name} is unusable: {exc}")
    checked = 0
    if check:
        for name in names:
            checked += check_links(store, name, start.get(name, (None, 0))[1])
    try:
        ledger = rebuild(store, names, start=start)
    except (KeyError, ValueError, TypeError) as exc:  # links that hold around facts that do not
        raise LedgerError(f"{store.path}: the log does not fold ({exc})") from None
    recorded = read_head(store.path) if check else None
    return Loaded(
        ledger=ledger,
        restored=sorted(start),
        checked=checked,
        unusable=unusable,
        head=head_problem(store, recorded) if recorded else None,
    )
