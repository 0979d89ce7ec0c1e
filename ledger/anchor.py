"""The head of the log, kept outside it: what proves that nothing was cut off or appended.

A hash chain proves every row follows from the one before it, but not that the last row is the
last one written: deleting the tail leaves a shorter chain that is still whole, and a row
appended with a correctly computed hash extends it. So whoever writes the log records its head
(the newest event's seq and chain hash): ``arena replay`` prints it and writes it to
``DB.head`` beside the log, and ``arena verify --head HASH`` (or the file) checks that the log
still ends exactly there. The file is a convenience that travels with the log; a head copied
somewhere the log's editor cannot reach (a lab notebook, a commit message) is the proof.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from ledger.errors import LedgerError
from ledger.store import EventStore


def head_path(db: Path) -> Path:
    return db.with_name(db.name + ".head")


def format_head(seq: int, row_hash: bytes) -> str:
    """How a head is printed and given back: ``SEQ:HEX``."""
    return f"{seq}:{row_hash.hex()}"


def parse_head(text: str) -> tuple[int | None, bytes]:
    """``SEQ:HEX`` or just ``HEX`` (64 hex digits); LedgerError if it is neither."""
    seq_text, _, hex_text = text.strip().rpartition(":")
    try:
        row_hash = bytes.fromhex(hex_text)
        seq = int(seq_text) if seq_text else None
    except ValueError:
        row_hash, seq = b"", None
    if len(row_hash) != 32:
        raise LedgerError(f"{text!r} is not a head: expected SEQ:HASH or a 64-digit hex hash")
    return seq, row_hash


def write_head(store: EventStore) -> str:
    """Record the log's current head beside it and return it as printed."""
    seq, row_hash = store.head()
    text = format_head(seq, row_hash)
    path = head_path(store.path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps({"head": text}) + "\n")
        tmp.replace(path)  # atomic: a reader never sees half a head
    except OSError as exc:  # the log is whole: say so, and give the head to keep
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise LedgerError(
            f"{path}: cannot record the head ({exc.strerror or exc}); the log is whole, "
            f"its head is {text}"
        ) from None
    return text


_HEAD_FILE_MAX = 4096
"""``{"head": "SEQ:HASH"}`` is about 90 bytes; a file far past that is not one."""


def read_head(db: Path) -> str | None:
    """The head recorded beside ``db``, or None if there is no file; LedgerError if it is
    unreadable."""
    path = head_path(db)
    if not path.exists():
        return None
    try:
        with path.open("rb") as fh:
            raw = fh.read(_HEAD_FILE_MAX + 1)  # a head file is one short line
        if len(raw) > _HEAD_FILE_MAX:
            raise ValueError(f"longer than {_HEAD_FILE_MAX} bytes")
        head = json.loads(raw)["head"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise LedgerError(f"{path}: not a head file ({' '.join(str(exc).split())})") from None
    if not isinstance(head, str):
        raise LedgerError(f"{path}: not a head file")
    return head


def head_problem(store: EventStore, expected: str) -> str | None:
    """Why the log does not end at the ``expected`` head, or None if it does."""
    want_seq, want_hash = parse_head(expected)
    seq, row_hash = store.head()
    if row_hash == want_hash and want_seq in (None, seq):
        return None
    at = store.seq_of_hash(want_hash)
    if at is not None and want_seq not in (None, at):
        return (
            f"the head names seq {want_seq} but its hash is event {at}'s: "
            "the head or the log's numbering was altered"
        )
    if at is not None:
        return f"{seq - at} event(s) were appended after the recorded head (seq {at})"
    if want_seq is not None and seq < want_seq:
        return f"the log ends at seq {seq}, before the recorded head at seq {want_seq}: cut"
    where = f"seq {want_seq}" if want_seq is not None else "its end"
    return f"the log no longer holds the recorded head ({where}): it was cut or rewritten"
