"""Reading tape bytes we do not trust, with a ceiling on what they can make us allocate.

A tape file can come from anywhere. Its compressed forms can inflate far beyond the file (a
4 MB gzip of spaces is 4 GB), and a ``.npy`` header states a shape that numpy allocates before
reading a byte of it (one claiming 10^11 floats asked for 745 GiB). So every read here spends
from one ``Budget`` per file before it allocates, and an ``.npy`` member's claimed shape is
checked against the bytes the member really holds.

The limit is ``ARENA_TAPE_MAX_BYTES``, 2 GiB by default: about 130 M points in columnar form,
25 times the 5 M-point tape ``arena bench tapes`` loads, and small enough to refuse a bomb
before the machine swaps.
"""

from __future__ import annotations

import gzip
import os
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from tokenize import TokenError
from typing import TYPE_CHECKING

from replays.errors import TapeError

if TYPE_CHECKING:  # numpy loads with the first .npy read: a report's printable() needs none
    import numpy as np

ENV = "ARENA_TAPE_MAX_BYTES"
DEFAULT_MAX_BYTES = 2 << 30
_CHUNK = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_WRITTEN_OUT = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}


# What numpy's .npy header parser (its tokenizer, then ast.literal_eval) raises on bad text.
_HEADER_ERRORS = (ValueError, TypeError, SyntaxError, TokenError, RecursionError, MemoryError)


def _size(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB"


class Budget:
    """What one file may still make us hold, in decompressed bytes, across all its parts."""

    def __init__(self, source: str, limit: int | None = None) -> None:
        """``limit`` defaults to ``ARENA_TAPE_MAX_BYTES`` (a bad value is a one-line error)."""
        self.source = source
        self.limit = _limit_from_env(source) if limit is None else limit
        self.left = self.limit

    def spend(self, n: int, what: str = "") -> None:
        """Reserve ``n`` bytes for ``what`` (a member name), or refuse the whole file."""
        if n > self.left:
            part = f"{what} " if what else ""
            raise TapeError(
                f"{self.source}: {part}decompresses to more than {_size(self.limit)}, "
                f"the limit for a tape ({ENV} raises it)"
            )
        self.left -= n


def _limit_from_env(source: str) -> int:
    limit = bytes_from_env(ENV, DEFAULT_MAX_BYTES)
    if limit is None:
        raise TapeError(f"{source}: {ENV}={os.environ.get(ENV)!r} is not a number of bytes")
    return limit


def bytes_from_env(name: str, default: int) -> int | None:
    """A byte limit a user set in environment variable ``name`` (``default`` when unset), or
    None when it is not a positive whole number: the caller names the variable in its error."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if value > 0 else None


def read_file(path: Path, budget: Budget) -> bytes:
    """The file's bytes, gunzipped when they start with the gzip magic, within ``budget``.

    Decompression runs a chunk at a time, so a bomb is refused after at most the limit (plus
    one chunk) was inflated, never after all of it.
    """
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below; open and gzip errors differ
    except OSError as exc:
        raise TapeError(f"{path}: cannot read: {exc.strerror or exc}") from None
    with fh:
        if fh.read(2) != _GZIP_MAGIC:
            budget.spend(os.fstat(fh.fileno()).st_size)
            fh.seek(0)
            return fh.read()
        fh.seek(0)
        parts: list[bytes] = []
        try:
            with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                while chunk := gz.read(_CHUNK):
                    budget.spend(len(chunk))
                    parts.append(chunk)
        except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            raise TapeError(f"{path}: corrupt or truncated gzip: {exc}") from None
    return b"".join(parts)


def read_member(zf: zipfile.ZipFile, name: str, budget: Budget) -> bytes:
    """One zip member, refused before inflating if its stated size exceeds the budget.

    ``zipfile`` never inflates past the size the archive states, so the check is a bound.
    """
    budget.spend(zf.getinfo(name).file_size, name)
    return zf.read(name)


def read_npy(zf: zipfile.ZipFile, name: str, dtype: str, budget: Budget) -> np.ndarray:
    """A 1-D little-endian array member, its header checked against the bytes it holds.

    numpy's own reader trusts the header's shape and allocates it first; here the claim must
    equal the member's size before anything is allocated, and then no more is read than that.
    """
    import numpy as np

    info = zf.getinfo(name)
    budget.spend(info.file_size, name)
    source = budget.source
    with zf.open(info) as fp:
        try:
            version = np.lib.format.read_magic(fp)
        except ValueError:
            raise TapeError(f"{source}: {name} is not a .npy array") from None
        try:
            if version == (1, 0):
                shape, _, found = np.lib.format.read_array_header_1_0(fp)
            elif version == (2, 0):
                shape, _, found = np.lib.format.read_array_header_2_0(fp)
            else:
                raise ValueError(f"unsupported .npy version {version}")
        except _HEADER_ERRORS as exc:
            raise TapeError(f"{source}: {name} has a bad .npy header: {exc}") from None
        if found.str != dtype or len(shape) != 1 or found.hasobject:
            raise TapeError(
                f"{source}: corrupt tape: {name} is {found.str}{tuple(shape)}, not 1-D {dtype}"
            )
        present = info.file_size - fp.tell()
        claimed = shape[0] * found.itemsize
        if claimed != present:
            raise TapeError(
                f"{source}: corrupt tape: {name} claims {shape[0]} values ({claimed} bytes) "
                f"but holds {present} bytes"
            )
        # filled a chunk at a time, as numpy does: the member is never held twice
        array = np.empty(shape[0], dtype=found)
        raw = array.view(np.uint8)
        done = 0
        while done < present:
            chunk = fp.read(min(_CHUNK, present - done))
            if not chunk:
                raise TapeError(f"{source}: corrupt tape: {name} ends after {done} bytes")
            raw[done : done + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
            done += len(chunk)
    return array


def content_lines(data: bytes, start: int) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` for each line of ``data`` from offset ``start`` on that holds
    more than whitespace, found without a list of every line. Splitting 2 GB of newlines into a
    list of empty lines asked for 16 GB (a MemoryError); here a run of blank lines is skipped
    at memory speed (``_ink``), and every line yielded is one its reader spends real work on (a
    series, a token's history), so the loop is bounded by what the lines hold, not by how many
    newlines the file has."""
    number, counted = 1, 0
    while (ink := _ink(data, start)) >= 0:
        begin = data.rfind(b"\n", 0, ink) + 1
        number += data.count(b"\n", counted, begin)
        end = data.find(b"\n", ink)
        end = len(data) if end < 0 else end
        yield number, data[begin:end]
        start, counted = end, begin


def _ink(data: bytes, start: int) -> int:
    """The first byte at or after ``start`` that is not ASCII whitespace, or -1: looked for in
    windows that double from 256 bytes to 1 MiB, each stripped in C (a regular expression's
    search crawled at 90 MB/s, 20 s for a 2 GB file of newlines)."""
    window = 256
    while start < len(data):
        part = data[start : start + window]
        rest = part.lstrip()
        if rest:
            return start + len(part) - len(rest)
        start += len(part)
        window = min(window * 2, _CHUNK)
    return -1


def printable(text: str) -> str:
    """Text from an untrusted file (a market's id, question, outcome or category) as a person
    may see it: every control character written out (``\\x1b``), none sent to the terminal,
    where an escape sequence retitled the window and cleared the screen."""
    return text.translate(_WRITTEN_OUT)
