"""Reading a log for people: prove where the log ends, restore each cohort's newest snapshot,
fold only the tail, and prove that what was built ends where the chain ends.

This is what ``report``, ``step`` and ``export`` read through. A closed cohort with its closing
snapshot costs one small JSON decode instead of a fold of all its events; a cohort still open
folds the events after its newest snapshot; a log written before snapshots folds everything.

What is proven on the way, cheaply (``arena verify`` checks everything), each a one-line
IntegrityError naming what failed when it does not hold:

* the head recorded beside the log (``ledger.anchor``), when there is one, is still the log's
  head: nothing was cut off and nothing appended;
* the indexes agree with the tables they index where a read relies on them: every stream key
  names the stream id its row holds, each stream's last event (found through the
  ``(stream, version)`` index) is the row the events table holds at that seq, and the streams'
  versions add up to the log's last seq, so a read by stream sees every event once;
* each stream's last event links to its stored predecessor, so its payload is the chain's;
* a snapshot is used only if its position in the log still holds the event and chain hash it
  was taken at and its state is of its own cohort;
* every event folded links to its stored predecessor (``ledger.chain.check_links``), is its
  stream's next version, comes later in the log than the one before it, and the index hands
  out as many as the range holds (``check_stream``: a damaged index can repeat a row or end a
  scan early with every link it read intact);
* the state built for a closed cohort (restored, and the tail folded) is the state whose digest
  the cohort's ``CohortClosed`` recorded, and that close is the stream's last event: nothing
  follows it. The close is in the chain, so neither a snapshot nor a tail can be forged without
  the chain noticing, short of re-chaining the log (which the snapshots' positions and the head
  reveal).

A snapshot that cannot be read (a write cut short, a flipped bit: its hash no longer matches
its contents) or is of another format is passed over: the cohort is folded from the log instead,
the result is held to the same close, and the read carries one note saying so. A snapshot whose
own hash holds but whose contents the chain contradicts was made to look whole: that, like a
broken chain, is an error, because then nothing the log says can be trusted.

What this cannot prove: a snapshot taken while a cohort was still open is proven only by a fold
from its first event, which ``verify`` does; a cohort still open is read from its newest
snapshot with a note saying so. A log re-chained from its first event with its closes, closing
snapshots and head file rewritten is a whole log on its own: only a head kept elsewhere
(``arena verify --head``) tells it from the real one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import msgspec

from ledger.anchor import head_path, head_problem, parse_head, read_head
from ledger.chain import check_links, hash_at
from ledger.errors import IntegrityError, LedgerError
from ledger.events import CohortClosed, ModelCalled, decode, decode_many
from ledger.projection import CohortState, Ledger
from ledger.rebuild import rebuild
from ledger.snapshot import FORMAT, Snapshot, SnapshotError, decode_state
from ledger.store import GENESIS, EventStore, link_hash
from ledger.usage import ModelUsage


@dataclass(frozen=True)
class StreamEnd:
    """A stream's last event as the log proves it: its seq and version, and the close it
    records if it is the cohort's ``CohortClosed``."""

    stream: str
    stream_id: int
    seq: int
    version: int
    closed: CohortClosed | None


@dataclass
class Loaded:
    """A checked read: the projections, and how they were reached."""

    ledger: Ledger
    restored: list[str] = field(default_factory=list)  # cohorts that started from a snapshot
    checked: int = 0  # events whose chain links were checked and then folded
    unusable: list[str] = field(default_factory=list)  # why each skipped snapshot was skipped
    unproven: list[str] = field(default_factory=list)  # open cohorts read from a snapshot
    ends: dict[str, StreamEnd] = field(default_factory=dict)  # each cohort's proven last event

    def note(self) -> str | None:
        """One line for the user when something was not as it should be; None when all was."""
        parts = []
        if self.unusable:
            more = f" (and {len(self.unusable) - 1} more)" if len(self.unusable) > 1 else ""
            parts.append(f"{self.unusable[0]}{more}; folded the log instead, so the figures stand")
        if self.unproven:
            names = ", ".join(self.unproven[:3]) + (" ..." if len(self.unproven) > 3 else "")
            parts.append(
                f"still open, so read from snapshots that only a fold from the first event "
                f"proves: {names}"
            )
        return "; ".join(parts) + "; run 'arena verify'" if parts else None


def check_head(store: EventStore) -> None:
    """IntegrityError if a head is recorded beside the log and the log no longer ends there."""
    recorded = read_head(store.path)
    if recorded is None:
        return
    problem = head_problem(store, recorded)
    if problem:
        where = head_path(store.path).name
        if store.seq_of_hash(parse_head(recorded)[1]) is not None:  # the log goes on past it
            where += "; a replay cut short leaves this too, and finishing it records the head"
        raise IntegrityError(f"{store.path}: {problem} ({where})", store.head()[0])


def check_log(store: EventStore) -> None:
    """What a read checks of the whole log before it trusts the list of its cohorts: the
    recorded head, and that the indexes agree with the tables (IntegrityError if not)."""
    check_head(store)
    stream_ends(store, [])


def stream_ends(store: EventStore, streams: Iterable[str] | None = None) -> dict[str, StreamEnd]:
    """The last event of each stream (all by default), each checked against the tables and
    its link, after checking that the indexes a read by stream relies on agree with the
    tables: IntegrityError naming what disagrees. A few lookups a stream, whatever its size."""
    path = store.path
    try:
        rows = store._fetch("SELECT id, key FROM streams NOT INDEXED")
        indexed = store._fetch("SELECT key, id FROM streams ORDER BY key")  # the key index
    except UnicodeDecodeError:
        raise IntegrityError(
            f"{path}: a stream key is not text (the SQLite file is damaged)"
        ) from None
    table = {key: sid for sid, key in rows}
    if dict(indexed) != table or len(indexed) != len(table) or len(rows) != len(table):
        raise IntegrityError(
            f"{path}: the index of stream keys disagrees with the streams table "
            "(the SQLite file is damaged)"
        )
    last_seq = store.last_seq()
    lasts: dict[str, tuple[int, int]] = {}
    for key, sid in table.items():
        found = store._fetch(
            "SELECT version, seq FROM events INDEXED BY events_stream_version"
            " WHERE stream_id = ? ORDER BY version DESC LIMIT 1",
            (sid,),
        )
        if found:
            version, seq = found[0]
            if not (isinstance(version, int) and isinstance(seq, int)):
                raise IntegrityError(
                    f"{path}: the stream index holds a damaged entry of {key} (the SQLite file "
                    "is damaged)"
                )
            lasts[key] = (version, seq)
    total = sum(version for version, _ in lasts.values())
    if total != last_seq:
        raise IntegrityError(
            f"{path}: the stream index counts {total} events where the log holds {last_seq} "
            "(the SQLite file is damaged, or rows were removed)",
            None,
        )
    ends: dict[str, StreamEnd] = {}
    for key in table if streams is None else streams:
        if key not in lasts:
            continue
        version, seq = lasts[key]
        row = store._fetch(
            "SELECT stream_id, version, CAST(payload AS BLOB), hash FROM events WHERE seq = ?",
            (seq,),
        )
        if not row or (row[0][0], row[0][1]) != (table[key], version):
            raise IntegrityError(
                f"{path}: the stream index puts version {version} of {key} at seq {seq}, "
                "where the log holds another event (the SQLite file is damaged)",
                seq,
            )
        payload, row_hash = bytes(row[0][2]), bytes(row[0][3])
        prev = GENESIS if seq == 1 else hash_at(store, seq - 1)
        if prev is None or link_hash(prev, key, payload) != row_hash:
            raise IntegrityError(f"{path}: event {seq} was altered (hash mismatch)", seq)
        try:
            event = decode(payload)
        except msgspec.MsgspecError as exc:
            raise LedgerError(f"{path}: event {seq} is not a readable event ({exc})") from None
        closed = event if isinstance(event, CohortClosed) else None
        ends[key] = StreamEnd(key, table[key], seq, version, closed)
    return ends


def usable_state(
    store: EventStore, snapshot: Snapshot, end: StreamEnd | None = None
) -> CohortState:
    """The state a snapshot holds, if it may be trusted at its position.

    SnapshotError (the caller passes it over, folds the log instead and says so) if it cannot
    be read: damaged (its hash does not match its contents) or of another format.
    IntegrityError if it reads but the log contradicts it: its position no longer holds the
    event it was taken after, it holds another cohort, or, given the stream's ``end``, it is
    taken at the close and is not the state the close recorded, or is closed and events
    follow it."""
    if not snapshot.intact():
        raise SnapshotError("damaged (its hash does not match its contents)")
    if snapshot.format != FORMAT:
        raise SnapshotError(f"has format {snapshot.format}; this arena reads {FORMAT}")
    path = store.path
    at = store.event_at(snapshot.seq)
    if at is None:
        raise IntegrityError(
            f"{path}: {snapshot.name} was taken at seq {snapshot.seq}, which the log no "
            "longer holds",
            snapshot.seq,
        )
    if at != (snapshot.stream, snapshot.version, snapshot.chain_hash):
        raise IntegrityError(
            f"{path}: {snapshot.name} no longer matches the event it was taken after: the log "
            "was rewritten under it",
            snapshot.seq,
        )
    try:
        state = decode_state(snapshot.state)
    except SnapshotError as exc:
        raise IntegrityError(f"{path}: {snapshot.name} is whole but {exc}", snapshot.seq) from None
    if state.cohort != snapshot.stream:
        raise IntegrityError(
            f"{path}: {snapshot.name} holds cohort {state.cohort}, not {snapshot.stream}",
            snapshot.seq,
        )
    if end is not None:
        if snapshot.version == end.version:
            prove_close(store, state, end, snapshot)
        elif state.closed is not None:
            raise _after_close(store, end, snapshot.version)
    elif snapshot.closing and (state.closed is None or state.digest() != state.closed.state_digest):
        raise IntegrityError(
            f"{path}: {snapshot.name} is not the state the cohort recorded at its close",
            snapshot.seq,
        )
    return state


def prove_close(
    store: EventStore, state: CohortState, end: StreamEnd, snapshot: Snapshot | None = None
) -> None:
    """IntegrityError unless ``state``, built to the stream's last event, is what the chain
    says it is there: the state whose digest its close recorded, or not closed at all."""
    closed = end.closed
    if closed is None:
        if state.closed is not None:
            raise _after_close(store, end, None)
        return
    if state.closed == closed and state.digest() == closed.state_digest:
        return
    if snapshot is not None and snapshot.version == end.version:
        what = f"{snapshot.name} is not the state"
    elif snapshot is not None:
        what = f"cohort {end.stream}, restored from {snapshot.name}, does not reach the state"
    else:
        what = f"cohort {end.stream} does not rebuild to the state"
    raise IntegrityError(f"{store.path}: {what} its close (event {end.seq}) recorded", end.seq)


def _after_close(store: EventStore, end: StreamEnd, closed_at: int | None) -> IntegrityError:
    """The error for events after a cohort's close (at version ``closed_at``, or found here:
    this reads the stream, but only on the way to an error)."""
    if closed_at is None:
        found = store._fetch(
            "SELECT min(version) FROM events WHERE stream_id = ?"
            ' AND payload >= \'{"type":"CohortClosed",\''
            ' AND payload < \'{"type":"CohortClosed-\'',
            (end.stream_id,),
        )
        closed_at = found[0][0] if found and found[0][0] is not None else end.version - 1
    after = store._fetch(
        "SELECT seq FROM events WHERE stream_id = ? AND version = ?",
        (end.stream_id, closed_at + 1),
    )
    seq = after[0][0] if after else end.seq
    what = f"event {seq} follows the close of cohort {end.stream}"
    return IntegrityError(f"{store.path}: {what}", seq)


def check_stream(
    store: EventStore,
    stream: str,
    after_version: int = 0,
    end: StreamEnd | None = None,
    through_version: int | None = None,
) -> int:
    """Check one stream's events after ``after_version`` through ``through_version`` (else to
    its proven ``end``, found here if not given) as a read by stream meets them: each links to
    its stored predecessor and is its stream's next version (``ledger.chain.check_links``),
    each comes later in the log than the one before it, and there are as many as the range
    holds. Returns how many were checked; IntegrityError if they do not hold.

    The order and the count matter because the read goes through the ``(stream, version)``
    index: a flipped bit in an entry's row id sends one version to a later row of the same
    stream, which then links to its own predecessor and is read twice, and the row it named
    not at all; one in a page's cell pointers can end a scan of the index early, so a read
    stops short with every link it read intact."""
    if through_version is None:
        if end is None:
            end = stream_ends(store, [stream]).get(stream)
        through_version = end.version if end is not None else 0
    count = check_links(store, stream, after_version, through_version)
    if count != max(through_version - after_version, 0):
        raise IntegrityError(
            f"{store.path}: the stream index gives {count} events of {stream} after its version "
            f"{after_version} where it holds {through_version - after_version} through version "
            f"{through_version} (the SQLite file is damaged)"
        )
    check_order(store, stream, after_version, through_version)
    return count


def check_order(
    store: EventStore, stream: str, after_version: int = 0, through_version: int | None = None
) -> None:
    """IntegrityError if the ``(stream, version)`` index hands out a version of ``stream``
    (after ``after_version``, through ``through_version``) at a seq no later than the version
    before it (the version at ``after_version`` included, so a range read after another is
    held to it): one index scan, in SQLite."""
    found = store._fetch(
        "SELECT seq, version FROM (SELECT seq, version, lag(seq) OVER (ORDER BY version) AS prev"
        " FROM events WHERE stream_id = (SELECT id FROM streams WHERE key = ?)"
        " AND version >= ? AND version <= ?) WHERE seq <= prev LIMIT 1",
        (stream, after_version, through_version if through_version is not None else 2**62),
    )
    if found:
        seq, version = found[0]
        raise IntegrityError(
            f"{store.path}: the stream index puts version {version} of {stream} at event {seq}, "
            "which an earlier version's entry already passed (the SQLite file is damaged)",
            seq,
        )


def load(store: EventStore, streams: Iterable[str] | None = None, *, check: bool = True) -> Loaded:
    """The projections of the given cohorts (all by default), from their newest usable
    snapshots and the events after them, proven as the module says. Without ``check`` only
    the snapshots are checked (a fold for a log the caller just wrote). IntegrityError names
    what failed, with the first bad seq where there is one; a log whose events do not fold
    (a fill for an agent never opened, say) is a LedgerError."""
    names = store.streams() if streams is None else list(streams)
    ends: dict[str, StreamEnd] = {}
    if check:
        check_head(store)
        ends = stream_ends(store, names)
    wanted = set(names)
    newest = {s.stream: s for s in store.snapshots(latest=True) if s.stream in wanted}
    start: dict[str, tuple[CohortState, int]] = {}
    used: dict[str, Snapshot] = {}
    unusable: list[str] = []
    for name in names:
        snapshot = newest.get(name)
        if snapshot is None:
            continue
        try:
            start[name] = (usable_state(store, snapshot, ends.get(name)), snapshot.version)
            used[name] = snapshot
        except SnapshotError as exc:
            unusable.append(f"{snapshot.name} is unusable: {exc}")
    checked = 0
    if check:
        for name in names:
            end = ends.get(name)
            checked += check_stream(store, name, start.get(name, (None, 0))[1], end)
    try:
        ledger = rebuild(store, names, start=start)
    except (KeyError, ValueError, TypeError) as exc:  # links that hold around facts that do not
        raise LedgerError(f"{store.path}: the log does not fold ({exc})") from None
    unproven = []
    for name, end in ends.items():
        state = ledger.cohorts.get(name)
        snapshot = used.get(name)
        if end.closed is None and snapshot is not None:
            unproven.append(name)
        if state is None or (snapshot is not None and snapshot.version == end.version):
            continue  # nothing read, or a snapshot at the end: proven where it was restored
        prove_close(store, state, end, snapshot)
    return Loaded(
        ledger=ledger, restored=sorted(start), checked=checked, unusable=unusable,
        unproven=unproven, ends=ends,
    )  # fmt: skip


_CALLS_PAGE = 10_000


def checked_usage(
    store: EventStore, cohorts: Iterable[str] | None = None
) -> dict[str, dict[str, ModelUsage]]:
    """What ``ledger.usage.model_usage`` gives (``{cohort: {agent: usage}}``), each
    ``ModelCalled`` row read with its stored predecessor's hash and its link checked: the
    transcript is no part of any state a close proves, so a read that shows it checks the rows
    it shows (IntegrityError naming the first bad seq). The calls are found through the log's
    partial index of them (``events_model_calls``; a scan in a log written before it), and each
    costs a row lookup for its predecessor's hash. A damaged index could leave calls out, which
    no link shows: ``arena verify``'s integrity check is what proves an index whole."""
    wanted = None if cohorts is None else set(cohorts)
    keys = store.stream_keys()
    sql = (
        "SELECT e.seq, e.stream_id, CAST(e.payload AS BLOB), e.hash, p.hash FROM events e"
        " LEFT JOIN events p ON p.seq = e.seq - 1 WHERE e.seq > ?"
        ' AND e.payload >= \'{"type":"ModelCalled",\' AND e.payload < \'{"type":"ModelCalled-\''
        f" ORDER BY e.seq LIMIT {_CALLS_PAGE}"
    )
    found: dict[str, dict[str, ModelUsage]] = {}
    after = 0
    while page := store._fetch(sql, (after,)):
        for seq, stream_id, payload, row_hash, prev in page:
            key = keys.get(stream_id)
            link = bytes(prev) if prev is not None else GENESIS if seq == 1 else None
            if key is None or link is None or link_hash(link, key, payload) != bytes(row_hash):
                raise IntegrityError(f"{store.path}: event {seq} was altered (hash mismatch)", seq)
        try:
            events = decode_many([row[2] for row in page])
        except msgspec.MsgspecError as exc:
            raise LedgerError(
                f"{store.path}: a model call is not a readable event ({exc})"
            ) from None
        for (_, stream_id, *_), event in zip(page, events, strict=True):
            stream = keys[stream_id]
            if not isinstance(event, ModelCalled) or (wanted is not None and stream not in wanted):
                continue
            found.setdefault(stream, {}).setdefault(event.agent, ModelUsage()).add(event)
        after = page[-1][0]
    return {c: dict(sorted(agents.items())) for c, agents in sorted(found.items())}
