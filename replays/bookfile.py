"""``.books`` files: a book store on disk, opened as a memory map and read as untrusted.

A ``.books`` file is a zip of ``meta.json`` and nine little-endian ``.npy`` columns
(``replays/FORMAT.md``, "Order books"). Written plain (``ZIP_STORED``), each column's data is
aligned to 64 bytes in the file, so ``load_books`` maps it with ``np.frombuffer`` over one
read-only ``mmap``: opening reads the header, each member's ``.npy`` header and the token
offsets, and a lookup touches the pages it reads. Written deflated (``compress=True``, as the
embedded sample is, 1.6 MB instead of 14) the columns are inflated into memory through
``replays.untrusted.read_npy``. Either way the content hash is the same.

Nothing in the file is trusted: every member's dtype, shape and claimed size is checked before
it is mapped or read, each counts against the file's ``Budget`` (``ARENA_TAPE_MAX_BYTES``), a
deflated member is refused before it is inflated past the budget, and each token's snapshots
are checked the first time the store uses them (``Books.check``; ``verify=True`` checks all).
"""

from __future__ import annotations

import contextlib
import io
import mmap
import struct
import zipfile
from pathlib import Path
from tokenize import TokenError

import msgspec
import numpy as np

from replays.books import FORMAT_NAME, FORMAT_VERSION, Books
from replays.errors import TapeError
from replays.untrusted import Budget, read_member, read_npy
from replays.validate_books import COLUMN_DTYPES, BookToken, Columns

SUFFIX = ".books"
ALIGN = 64
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed member dates keep the file byte-reproducible
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # zipfile's structFileHeader
_PAD_ID = 0xD935  # the extra-field id zipalign pads with
_NPY_HEADER_MAX = 1 << 16  # a .npy header longer than this is not one of ours
_ZIP_ERRORS = (
    zipfile.BadZipFile, KeyError, OSError, EOFError, ValueError, struct.error,
    NotImplementedError, RuntimeError, OverflowError,
)  # fmt: skip
_HEADER_ERRORS = (ValueError, TypeError, SyntaxError, TokenError, RecursionError, MemoryError)


class _Header(msgspec.Struct):
    """``meta.json``: the content besides the columns; ``hash`` and ``snapshots`` are a check."""

    format: str
    version: int
    tokens: list[BookToken]
    ticks: str = "inferred"
    attribution: str = ""
    hash: str | None = None
    snapshots: int | None = None


# -- writing ----------------------------------------------------------------------------------


def _npy_header(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, np.lib.format.header_data_from_array_1_0(array))
    return buf.getvalue()


def _padding(offset: int, name: str, npy_header: int) -> bytes:
    """An extra field that puts the member's array data on a multiple of ``ALIGN``."""
    fixed = offset + _LOCAL_HEADER.size + len(name.encode()) + 4 + npy_header
    pad = -fixed % ALIGN
    return struct.pack("<HH", _PAD_ID, pad) + b"\0" * pad


def _write(books: Books, path: Path, compress: bool) -> None:
    header = _Header(
        format=FORMAT_NAME, version=FORMAT_VERSION, tokens=list(books.tokens), ticks=books.ticks,
        attribution=books.attribution, hash=books.hash, snapshots=books.n_snapshots,
    )  # fmt: skip
    with open(path, "wb") as raw, zipfile.ZipFile(raw, "w") as zf:
        meta = zipfile.ZipInfo("meta.json", _ZIP_EPOCH)
        meta.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(meta, msgspec.json.encode(header))
        for (name, dtype), column in zip(COLUMN_DTYPES, books.columns, strict=True):
            array = np.ascontiguousarray(column, dtype=np.dtype(dtype))
            member = f"{name}.npy"
            info = zipfile.ZipInfo(member, _ZIP_EPOCH)
            head = _npy_header(array)
            if compress:
                info.compress_type = zipfile.ZIP_DEFLATED
            else:
                info.compress_type = zipfile.ZIP_STORED
                info.extra = _padding(raw.tell(), member, len(head))
            info.file_size = len(head) + array.nbytes
            zip64 = info.file_size > zipfile.ZIP64_LIMIT * 0.95
            if zip64 and not compress:  # the zip64 extra lengthens the local header
                info.extra = _padding(raw.tell() + 20, member, len(head))
            with zf.open(info, "w", force_zip64=zip64) as out:
                out.write(head)
                flat = array.view(np.uint8)
                for first in range(0, flat.shape[0], 1 << 24):
                    out.write(flat[first : first + (1 << 24)].data)


def save_books(books: Books, path: str | Path, *, compress: bool = False) -> None:
    """Write ``books`` as a ``.books`` file, reproducibly: plain columns aligned for a memory
    map, or with ``compress`` deflated (smaller, read into memory). Written beside ``path`` and
    moved into place, so a failed write leaves no half file, only a one-line error."""
    path = Path(path)
    if not path.name.endswith(SUFFIX):
        raise TapeError(f"{path}: a book file's name ends in {SUFFIX}")
    partial = path.with_name(f".{path.name}.partial")
    try:
        _write(books, partial, compress)
        partial.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise TapeError(f"{path}: cannot write: {exc.strerror or exc}") from None


# -- reading ----------------------------------------------------------------------------------


def _mapped(
    source: str, mm: mmap.mmap, info: zipfile.ZipInfo, dtype: str, budget: Budget
) -> np.ndarray:
    """A stored member as an array over the map, its local header and ``.npy`` header checked
    against what the member holds before anything is mapped."""
    name = info.filename
    budget.spend(info.file_size, name)
    at = info.header_offset
    if at + _LOCAL_HEADER.size > len(mm):
        raise TapeError(f"{source}: corrupt book file: {name} starts past the end")
    fields = _LOCAL_HEADER.unpack_from(mm, at)
    if fields[0] != b"PK\x03\x04":
        raise TapeError(f"{source}: corrupt book file: {name} has no local header")
    name_len, extra_len = fields[10], fields[11]
    start = at + _LOCAL_HEADER.size + name_len + extra_len
    if bytes(mm[at + _LOCAL_HEADER.size : at + _LOCAL_HEADER.size + name_len]) != name.encode():
        raise TapeError(f"{source}: corrupt book file: {name}'s local header names another")
    end = start + info.file_size
    if end > len(mm):
        raise TapeError(f"{source}: corrupt book file: {name} runs past the end of the file")
    head = io.BytesIO(mm[start : min(end, start + _NPY_HEADER_MAX)])
    try:
        version = np.lib.format.read_magic(head)
        if version == (1, 0):
            shape, fortran, found = np.lib.format.read_array_header_1_0(head)
        elif version == (2, 0):
            shape, fortran, found = np.lib.format.read_array_header_2_0(head)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except _HEADER_ERRORS as exc:
        raise TapeError(f"{source}: {name} has a bad .npy header: {exc}") from None
    if found.str != dtype or len(shape) != 1 or found.hasobject or fortran:
        raise TapeError(f"{source}: corrupt book file: {name} is {found.str}{tuple(shape)}, "
                        f"not 1-D {dtype}")  # fmt: skip
    data = start + head.tell()
    claimed = shape[0] * found.itemsize
    if claimed != end - data:
        raise TapeError(f"{source}: corrupt book file: {name} claims {shape[0]} values "
                        f"({claimed} bytes) but holds {end - data} bytes")  # fmt: skip
    if not shape[0]:
        return np.empty(0, dtype=found)
    return np.frombuffer(mm, dtype=found, count=shape[0], offset=data)


def _column(
    source: str, zf: zipfile.ZipFile, mm: mmap.mmap, name: str, dtype: str, budget: Budget
) -> np.ndarray:
    info = zf.getinfo(name)
    if info.flag_bits & 0x1:
        raise TapeError(f"{source}: {name} is encrypted")
    if info.compress_type == zipfile.ZIP_STORED:
        return _mapped(source, mm, info, dtype, budget)
    return read_npy(zf, name, dtype, budget)  # inflated within the budget, never past it


class _Kind(msgspec.Struct):
    """Just what a header says it is, read before the rest so a tape is named as one."""

    format: str = ""
    version: int = 0


def _header(source: str, raw: bytes) -> _Header:
    try:
        kind = msgspec.json.decode(raw, type=_Kind)
        if kind.format != FORMAT_NAME or kind.version != FORMAT_VERSION:
            raise TapeError(f"{source}: not an {FORMAT_NAME} v{FORMAT_VERSION} file "
                            f"(format={kind.format!r}, version={kind.version})")  # fmt: skip
        return msgspec.json.decode(raw, type=_Header)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
        raise TapeError(f"{source}: bad book file header: {exc}") from None


def load_books(path: str | Path, *, verify: bool = False, max_bytes: int | None = None) -> Books:
    """Open a ``.books`` file without reading its columns: the header and member headers are
    checked now, each token's snapshots when first used. ``verify`` checks every token and
    recomputes the content hash against the one the file records (``arena tapes validate``).
    ``max_bytes`` caps what the file may map or inflate (default ``ARENA_TAPE_MAX_BYTES``)."""
    path = Path(path)
    source = str(path)
    budget = Budget(source, max_bytes)
    try:
        with open(path, "rb") as fh:
            if fh.read(2) != b"PK":
                raise TapeError(f"{source}: not a book file (not a zip)")
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            with zipfile.ZipFile(fh) as zf:
                header = _header(source, read_member(zf, "meta.json", budget))
                columns = Columns(
                    *(_column(source, zf, mm, f"{name}.npy", dtype, budget)
                      for name, dtype in COLUMN_DTYPES)
                )  # fmt: skip
    except TapeError:
        raise
    except _ZIP_ERRORS as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise TapeError(f"{source}: corrupt or unreadable book file: {reason}") from None
    books = Books(
        header.tokens, columns, ticks=header.ticks, attribution=header.attribution,
        source=source, lazy=True, keep=mm,
    )  # fmt: skip
    if header.snapshots is not None and header.snapshots != books.n_snapshots:
        raise TapeError(f"{source}: the header counts {header.snapshots} snapshots, "
                        f"the columns hold {books.n_snapshots}")  # fmt: skip
    if verify:
        books.check()
        if header.hash is not None and header.hash != books.hash:
            raise TapeError(f"{source}: content hash mismatch: file says {header.hash[:12]}…, "
                            f"content is {books.hash[:12]}…")  # fmt: skip
    return books


def recorded_hash(path: str | Path) -> str | None:
    """The content hash a ``.books`` file's header records (not recomputed)."""
    source = str(path)
    try:
        with zipfile.ZipFile(path) as zf:
            return _header(source, read_member(zf, "meta.json", Budget(source))).hash
    except TapeError:
        raise
    except _ZIP_ERRORS as exc:
        raise TapeError(f"{source}: corrupt or unreadable book file: {exc}") from None


def is_books_file(path: str | Path) -> bool:
    """A ``.books`` name, or a zip whose header says ``arena-books``."""
    path = Path(path)
    if path.name.endswith(SUFFIX):
        return True
    try:
        with zipfile.ZipFile(path) as zf:
            info = zf.getinfo("meta.json")
            if info.file_size > 1 << 20:
                return False
            return b'"format":"arena-books"' in zf.read(info)[:200]
    except (*_ZIP_ERRORS, zipfile.LargeZipFile):
        return False
